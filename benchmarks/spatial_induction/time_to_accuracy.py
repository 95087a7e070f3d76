"""Wall time for ECA Dedicated-heads to reach TF cell accuracy >= 0.99 on held-out rules
(target <= 30 minutes on a 2-core CPU machine). Prints the curve, then the figure line.

    # train now (the cpu preset, stopping at the threshold), then report
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/spatial_induction/time_to_accuracy.py --out /tmp/sih-tta
    # or read a finished / running run directory
    .venv/bin/python benchmarks/spatial_induction/time_to_accuracy.py --run /tmp/sih-runs/r1
    # the stochastic preset: time to validation KL(q_kgram || q_model) <= 0.02
    .venv/bin/python benchmarks/spatial_induction/time_to_accuracy.py --stochastic --run /tmp/sih-runs/stoch

Accuracy is the val-out split (rules held out of training, coverage-filtered contexts; fresh
Dirichlet(1) rules for --stochastic); the time is the trainer's wall clock at that step
(evaluation excluded).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def curve(run_dir: Path, metric: str) -> list[tuple[int, float, float]]:
    """(step, seconds, metric) per evaluation; seconds from the last training log at or before it."""
    records = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    times = {r["step"]: r["time"] for r in records if r.get("split") == "train"}
    out = []
    for r in records:
        if r.get("split") == "eval" and metric in r:
            known = [s for s in times if s <= r["step"]]
            out.append((r["step"], times[max(known)] if known else 0.0, r[metric]))
    return out


def figure(points, threshold: float, path: Path, label: str = "val-out TF cell accuracy",
           title: str = "ECA Dedicated-heads, held-out rules") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([t / 60 for _, t, _ in points], [a for *_, a in points], marker="o", ms=3)
    ax.axhline(threshold, color="tab:red", lw=1, ls="--")
    ax.set_xlabel("wall time (min)")
    ax.set_ylabel(label)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="read this run directory instead of training")
    ap.add_argument("--out", type=Path, default=Path("/tmp/sih-time-to-accuracy"))
    ap.add_argument("--threshold", type=float, default=None, help="default 0.99 (det) / 0.02 (--stochastic)")
    ap.add_argument("--stochastic", action="store_true",
                    help="sih-eca-dedicated-stoch: time to validation KL(q_kgram || q_model) <= threshold")
    ap.add_argument("--set", action="append", default=[], help="extra config overrides")
    args = ap.parse_args()
    if args.stochastic:
        experiment, metric, mode, name = "sih-eca-dedicated-stoch", "val_tf_kl_kgram", "min", "TF KL(q_kgram || q_model)"
        threshold = 0.02 if args.threshold is None else args.threshold
    else:
        experiment, metric, mode, name = "sih-eca-dedicated-det", "val_tf_cell_acc", "max", "TF cell acc"
        threshold = 0.99 if args.threshold is None else args.threshold
    better = (lambda a: a <= threshold) if mode == "min" else (lambda a: a >= threshold)
    run_dir = args.run
    if run_dir is None:
        from tinyscope.runs.rundir import run_experiment

        overrides = [f"train.stop_metric={metric}", f"train.stop_threshold={threshold}", f"train.stop_mode={mode}",
                     *args.set]
        run_experiment(experiment, "cpu", overrides=overrides, out=args.out, progress=False)
        run_dir = args.out
    points = curve(run_dir, metric)
    reached = next(((s, t) for s, t, a in points if better(a)), None)
    png = run_dir / "time_to_accuracy.png"
    figure(points, threshold, png, *((f"validation {name}", "ECA Dedicated-heads, stochastic rules")
                                     if args.stochastic else ()))
    print(f"{'step':>6} {'minutes':>8} {metric}")
    for s, t, a in points:
        print(f"{s:>6} {t / 60:>8.2f} {a:.4f}")
    best = (min if mode == "min" else max)(points, key=lambda p: p[2])
    print(f"figure: {png}")
    op = "<=" if mode == "min" else ">="
    if reached:
        print(f"time to {name} {op} {threshold}: {reached[1] / 60:.1f} min (step {reached[0]}); target <= 30 min")
    else:
        print(f"{name} {op} {threshold} not reached; best {best[2]:.4f} at step {best[0]} "
              f"({best[1] / 60:.1f} min); target <= 30 min")


if __name__ == "__main__":
    main()
