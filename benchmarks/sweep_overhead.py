"""Sweep overhead: wall time of a 12-run `smoke` sweep of plus-last-even with --jobs 2 against
the same 12 runs back to back in one process (both end to end from a fresh interpreter,
imports included). Target: ratio <= 0.6 on 2 cores.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sweep_overhead.py [--repeats 1]

The machine's load average is printed: on a shared machine the ratio is only meaningful when
both arms see the same load, so arms alternate when --repeats > 1.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

SEEDS = [1, 2, 3, 4, 5, 6]
LRS = ["3e-3", "1e-2"]

SEQUENTIAL = """
import sys, torch
torch.set_num_threads(1)
from tinyscope.experiments.runner import run_experiment
out = sys.argv[1]
for lr in {lrs!r}:
    for seed in {seeds!r}:
        run_experiment("plus-last-even", "smoke", seed, [f"train.lr={{lr}}"], f"{{out}}/lr={{lr}}/s{{seed}}", progress=False)
"""


def timed(cmd: list[str]) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    py = sys.executable
    seq_times, sweep_times = [], []
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for rep in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            seq_cmd = [py, "-c", SEQUENTIAL.format(lrs=LRS, seeds=SEEDS), f"{tmp}/seq"]
            sweep_cmd = [py, "-m", "tinyscope.cli", "sweep", "plus-last-even", "--preset", "smoke", "--jobs", "2",
                         "--seeds", *map(str, SEEDS), "--grid", f"train.lr={','.join(LRS)}", "--out", f"{tmp}/sweep",
                         "--no-progress"]
            arms = [("sequential", seq_cmd, seq_times), ("sweep", sweep_cmd, sweep_times)]
            for name, cmd, store in (arms if rep % 2 == 0 else arms[::-1]):
                store.append(timed(cmd))
                print(f"repeat {rep}: {name:<10} {store[-1]:6.1f} s", flush=True)
    seq, sweep = min(seq_times), min(sweep_times)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print(f"12 smoke runs back to back in one process: {seq:.1f} s")
    print(f"12 smoke runs as `tinyscope sweep --jobs 2`: {sweep:.1f} s")
    print(f"ratio sweep / sequential = {sweep / seq:.2f} (target <= 0.6)")


if __name__ == "__main__":
    main()
