"""Training throughput of THEIA (2.75M) against the transformer baseline (3.58M) and the flat MLP
on this machine: samples per second of forward + backward + optimizer step (AdamW, or the `cpu`
preset's Muon with AdamW) on 4-domain records.

Wall-clock numbers on a shared machine are noisy, so the models run interleaved in one process
(rounds of a few steps each) and the figure is the ratio of medians. Target: THEIA trains more
samples per second than the transformer baseline (the paper reports it reaches 12/12 rules 6.5×
sooner than the transformer under matched settings).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/theia/throughput.py [--batch 256] [--rounds 5] [--bf16] [--optimizer muon]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.studies.theia.model import FlatMLP, Theia, TheiaTransformer
from tinyscope.studies.theia.task import evaluate_records, sample_records
from tinyscope.train.optim import MuonAdamW, muon_param_groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="training steps per model per round")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bf16", action="store_true", help="bfloat16 autocast of the forward (the cpu presets' setting)")
    ap.add_argument("--optimizer", choices=("adamw", "muon"), default="adamw",
                    help="muon: Muon (lr 0.05, Newton-Schulz in bf16) on hidden matrices, AdamW on the rest")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    models = {"THEIA": Theia(), "transformer": TheiaTransformer(), "flat MLP (0.80M)": FlatMLP()}
    if args.optimizer == "muon":
        opts = {k: MuonAdamW(muon_param_groups(m, muon_lr=0.05, adam_lr=1e-3), ns_bf16=True) for k, m in models.items()}
    else:
        opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in models.items()}
    rng = np.random.default_rng(0)
    x = sample_records(rng, args.batch)
    xt, yt = torch.from_numpy(x), torch.from_numpy(evaluate_records(x)["label"])
    rates: dict[str, list[float]] = {k: [] for k in models}
    for r in range(args.rounds + 1):                      # round 0 warms up
        for name, model in models.items():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                    loss = F.cross_entropy(model(xt).float(), yt)
                opts[name].zero_grad(set_to_none=True)
                loss.backward()
                opts[name].step()
            if r:
                rates[name].append(args.steps * args.batch / (time.perf_counter() - t0))
    med = {k: statistics.median(v) for k, v in rates.items()}
    base = med["transformer"]
    print(f"batch {args.batch}, {args.threads} thread(s), {'bf16' if args.bf16 else 'fp32'}, {args.optimizer}, "
          f"{args.rounds} rounds x {args.steps} steps, median samples/s")
    print("| model | parameters | samples/s | x transformer |")
    print("|---|---|---|---|")
    for name, model in models.items():
        n = sum(p.numel() for p in model.parameters())
        print(f"| {name} | {n:,} | {med[name]:.0f} | {med[name] / base:.2f} |")
    print(f"THEIA / transformer training throughput ratio: {med['THEIA'] / base:.2f}x")


if __name__ == "__main__":
    main()
