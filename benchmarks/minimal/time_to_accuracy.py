"""Wall time and steps for a plus-last-even preset to reach held-out rule error <= 1%, seed by seed.

    .venv/bin/python benchmarks/minimal/time_to_accuracy.py [--preset cpu] [--seeds 0 1 ... 9] [--threads 1] [--set K=V ...]

Training stops at the first evaluation (every 100 steps) with rule error <= target, or at the
preset's last step; a restart (the cpu preset's, see studies/minimal/restarts.py) counts its
steps and time toward the seed's. Prints one line per seed (reached or NOT, the rule error, wall and CPU
seconds, steps), then every seed that failed by name with its final rule error, and last the
figure: the fraction of seeds that reach the target and the median training wall time over those
that do (target: every seed, median <= 60 s; the paper reports 10-15 minutes on a laptop CPU for
its 20,000 steps). A median never includes a seed that did not reach the target.
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
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--target", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every seed")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    reached, failed = {}, {}
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            res = run_experiment("plus-last-even", args.preset, seed=seed, out=f"{tmp}/run", progress=False,
                                 report="none",
                                 overrides=[f"train.threads={args.threads}", "train.eval_every=100",
                                            "train.stop_metric=rule_error", f"train.stop_threshold={args.target}",
                                            "train.eval_at_start=false", *args.set])
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        err = res["metrics"]["rule_error"]
        ok = err <= args.target  # the selected model of the last phase (a restart's when there was one)
        phases = res.get("phases") or [{"name": "main", "steps": res["steps"]}]
        restarted = [p["name"] for p in phases[1:] if p["steps"] > 0]
        steps = sum(p["steps"] for p in phases)
        (reached if ok else failed)[seed] = (res["wall_time"], steps, err)
        print(f"seed {seed}: {'reached' if ok else 'NOT reached'} rule error {err:.4f} after {steps} steps"
              f"{' (' + ', '.join(restarted) + ')' if restarted else ''}: "
              f"training {res['wall_time']:.1f} s wall; with data, model and final evaluation {wall:.1f} s wall, "
              f"{cpu:.1f} s CPU", flush=True)
    for seed, (_, steps, err) in failed.items():
        print(f"FAILED seed {seed}: rule error {err:.2%} after {steps} steps (target <= {args.target:.0%})")
    median = f"{statistics.median(w for w, _, _ in reached.values()):.1f} s" if reached else "n/a"
    print(f"{args.preset} preset: {len(reached)}/{len(args.seeds)} seeds reach rule error <= {args.target:.0%}; "
          f"median training wall time over those: {median} (target: all seeds, <= 60 s)"
          + (f"; failed: seeds {', '.join(map(str, failed))}" if failed else ""))


if __name__ == "__main__":
    main()
