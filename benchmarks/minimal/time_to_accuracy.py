"""Wall time and steps for the plus-last-even ``cpu`` preset to reach held-out rule error <= 1%.

    .venv/bin/python benchmarks/minimal/time_to_accuracy.py [--seeds 18 0 1] [--threads 1]

Training stops at the first evaluation (every 100 steps) with rule error <= target. Prints one line
per seed (wall seconds, CPU seconds, steps) and, last, the median wall time (target: <= 60 s; the
paper reports 10-15 minutes on a laptop CPU for its 20,000 steps).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from tinyscope.runs.rundir import run_experiment


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[18, 0, 1])
    ap.add_argument("--target", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    walls = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            res = run_experiment("plus-last-even", "cpu", seed=seed, out=f"{tmp}/run", progress=False, report="none",
                                 overrides=["train.eval_every=100", "train.stop_metric=rule_error",
                                            f"train.stop_threshold={args.target}", "train.eval_at_start=false"])
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        reached = res["stopped"] != "max_steps"
        walls.append(res["wall_time"] if reached else float("inf"))
        print(f"seed {seed}: {'reached' if reached else 'NOT reached'} rule error "
              f"{res['metrics']['rule_error']:.4f} at step {res['steps']}: training {res['wall_time']:.1f} s wall; "
              f"with data, model and final evaluation {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    print(f"median training wall time to rule error <= {args.target:.0%}: {statistics.median(walls):.1f} s "
          f"over seeds {args.seeds} (target <= 60 s)")


if __name__ == "__main__":
    main()
