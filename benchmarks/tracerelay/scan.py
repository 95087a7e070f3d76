"""TraceRelay execution speed: the parallel phase scan against the sequential loop, and the
model's forward throughput with banded against dense-mask local attention, at T = 4,096.

Targets: scan ratio >= 50x, banded/dense forward ratio >= 4x. Ratios are measured in
one process (wall-clock on a shared machine is noisy; the ratio is what is reported).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tracerelay/scan.py [--T 4096] [--repeats 3]
"""
from __future__ import annotations

import argparse
import math
import time

import torch

from tinyscope.studies.tracerelay.model import TraceRelay, TraceRelayConfig
from tinyscope.studies.tracerelay.ops.phase_scan import phase_scan, phase_scan_reference


def best_time(fn, repeats: int, warmup: bool = True) -> float:
    """Best of ``repeats`` wall-clock times (the minimum is the least disturbed by other load)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", type=int, default=4096)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    T, B = args.T, args.batch

    # 1. phase scan: paper geometry (W = 8, d = 64), one decoding-sized and one training-sized batch
    ratios = {}
    for b in sorted({1, B}):
        u = torch.rand(b, T, 64) * math.pi
        q = torch.ones(b, T, dtype=torch.bool)
        t_loop = best_time(lambda u=u, q=q: phase_scan_reference(u, q, 8), args.repeats, warmup=False)
        t_scan = best_time(lambda u=u, q=q: phase_scan(u, q, 8), 10 * args.repeats)
        ratios[b] = t_loop / t_scan
        print(f"phase scan, B={b}, T={T}, d=64, W=8: loop {t_loop * 1e3:.1f} ms, parallel {t_scan * 1e3:.2f} ms, "
              f"ratio {ratios[b]:.0f}x (target >= 50x)", flush=True)

    # 2. forward throughput of the paper model (d_c = 64) with banded vs dense local attention
    model = TraceRelay(TraceRelayConfig(vocab_size=16, n_out=8)).eval()
    tokens = torch.randint(0, 16, (1, T))
    with torch.no_grad():
        t_band = best_time(lambda: model(tokens), args.repeats)
        model.use_reference(True, attention=True, scan=False)  # dense-mask attention, same parallel scan
        t_dense = best_time(lambda: model(tokens), 1, warmup=False)
        model.use_reference(False)
    tps_band, tps_dense = T / t_band, T / t_dense
    print(f"forward, paper model (d_c=64), B=1, T={T}: banded {tps_band:,.0f} tok/s, dense-mask {tps_dense:,.0f} tok/s")
    scan = ", ".join(f"B={b}: {r:.0f}x" for b, r in ratios.items())
    print(f"FIGURE tracerelay_scan: scan/loop speedup {scan} (>= 50x); "
          f"banded/dense forward throughput {t_dense / t_band:.1f}x (>= 4x) at T={T}")


if __name__ == "__main__":
    main()
