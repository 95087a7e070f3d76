"""Wall time for a spatial-induction row to reach its Table 1 target on held-out rules, on this
2-core CPU: validation TF cell accuracy >= 0.999 (deterministic rows) or validation
KL(q_kgram || q_model) <= 0.005 (stochastic rows). Targets: <= 15 min for a 1-D deterministic
row, <= 60 min for a 2-D row (1-D stochastic rows have none). Prints the curve, then the figure line.

    # train now (the row's cpu preset, stopping at the threshold), then report
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/spatial_induction/time_to_accuracy.py \
        --experiment sih-v3-shared-det --out /tmp/sih-tta
    # or read a finished / running run directory
    .venv/bin/python benchmarks/spatial_induction/time_to_accuracy.py --experiment sih-eca-dedicated-stoch --run RUN
    # or every run of a reproduction (`tinyscope reproduce spatial_induction --out DIR`): one line per run
    .venv/bin/python benchmarks/spatial_induction/time_to_accuracy.py --runs DIR

Accuracy is the val-out split (rules held out of training, coverage-filtered contexts; fresh
Dirichlet(1) rules for stochastic rows); the time is the trainer's wall clock at that step
(evaluation excluded).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def phases(run_dir: Path) -> list[Path]:
    """The run's training phases in order: the main one, then its fresh starts
    (``stages/restart1``, ``restart2``, …) when its gate abandoned a start."""
    restarts = sorted((run_dir / "stages").glob("restart*"), key=lambda p: int(p.name[len("restart"):]))
    return [run_dir, *[p for p in restarts if (p / "metrics.jsonl").exists()]]


def curve(run_dir: Path, metric: str) -> list[tuple[int, float, float]]:
    """(step, seconds, metric) per evaluation; seconds from the last training log at or before it.
    Over fresh starts the steps and seconds add up: an abandoned start's time counts."""
    out, step0, t0 = [], 0, 0.0
    for phase in phases(run_dir):
        records = [json.loads(ln) for ln in (phase / "metrics.jsonl").read_text().splitlines() if ln.strip()]
        times = {r["step"]: r["time"] for r in records if r.get("split") == "train"}
        for r in records:
            if r.get("split") == "eval" and metric in r:
                known = [s for s in times if s <= r["step"]]
                out.append((step0 + r["step"], t0 + (times[max(known)] if known else 0.0), r[metric]))
        step0 += max((r["step"] for r in records), default=0)
        t0 += max((r.get("time", 0.0) for r in records), default=0.0)
    return out


def figure(points, threshold: float, path: Path, label: str, title: str) -> None:
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


def target(experiment: str) -> tuple[str, str, float, str, float | None]:
    """(metric, mode, threshold, name, target minutes or None) of a ``sih-{setting}-{arch}-{det|stoch}`` row."""
    if experiment.endswith("-stoch"):
        metric, mode, threshold, name = "val_tf_kl_kgram", "min", 0.005, "TF KL(q_kgram || q_model)"
    else:
        metric, mode, threshold, name = "val_tf_cell_acc", "max", 0.999, "TF cell acc"
    minutes = 60.0 if "-vn2d-" in experiment else (15.0 if experiment.endswith("-det") else None)
    return metric, mode, threshold, name, minutes


def time_to(points, threshold: float, mode: str) -> tuple[int, float] | None:
    """(step, seconds) of the first evaluation that meets the threshold."""
    better = (lambda a: a <= threshold) if mode == "min" else (lambda a: a >= threshold)
    return next(((s, t) for s, t, a in points if better(a)), None)


def summary(runs_root: Path) -> None:
    """One line per run directory under a reproduction's runs/ folder."""
    print(f"{'experiment':<26} {'seed':>5} {'reached (min)':>14} {'target (min)':>13}  verdict")
    for cfg_path in sorted(runs_root.glob("runs/sih-*/**/config.json")):
        record = json.loads(cfg_path.read_text())
        experiment, seed = record["experiment"], record["config"]["seed"]
        metric, mode, threshold, _, minutes = target(experiment)
        hit = time_to(curve(cfg_path.parent, metric), threshold, mode)
        reached = f"{hit[1] / 60:.1f}" if hit else "not reached"
        verdict = "–" if minutes is None else ("met" if hit and hit[1] / 60 <= minutes else "not met")
        print(f"{experiment:<26} {seed:>5} {reached:>14} {'–' if minutes is None else f'{minutes:.0f}':>13}  {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default="sih-eca-dedicated-det", help="a trained sih-* row")
    ap.add_argument("--run", type=Path, help="read this run directory instead of training")
    ap.add_argument("--runs", type=Path, help="summarise every sih run under this reproduction folder")
    ap.add_argument("--out", type=Path, default=Path("/tmp/sih-time-to-accuracy"))
    ap.add_argument("--threshold", type=float, default=None, help="default 0.999 (det) / 0.005 (stoch)")
    ap.add_argument("--set", action="append", default=[], help="extra config overrides")
    args = ap.parse_args()
    if args.runs is not None:
        summary(args.runs)
        return
    metric, mode, threshold, name, minutes = target(args.experiment)
    threshold = threshold if args.threshold is None else args.threshold
    run_dir = args.run
    if run_dir is None:
        from tinyscope.runs.rundir import run_experiment

        overrides = [f"train.stop_metric={metric}", f"train.stop_threshold={threshold}", f"train.stop_mode={mode}",
                     *args.set]
        run_experiment(args.experiment, "cpu", overrides=overrides, out=args.out, progress=False)
        run_dir = args.out
    points = curve(run_dir, metric)
    reached = time_to(points, threshold, mode)
    png = run_dir / "time_to_accuracy.png"
    figure(points, threshold, png, f"validation {name}", args.experiment)
    print(f"{'step':>6} {'minutes':>8} {metric}")
    for s, t, a in points:
        print(f"{s:>6} {t / 60:>8.2f} {a:.4f}")
    best = (min if mode == "min" else max)(points, key=lambda p: p[2])
    goal = "no time target" if minutes is None else f"target <= {minutes:.0f} min"
    print(f"figure: {png}")
    op = "<=" if mode == "min" else ">="
    if reached:
        print(f"time to {name} {op} {threshold}: {reached[1] / 60:.1f} min (step {reached[0]}); {goal}")
    else:
        print(f"{name} {op} {threshold} not reached; best {best[2]:.4f} at step {best[0]} "
              f"({best[1] / 60:.1f} min); {goal}")


if __name__ == "__main__":
    main()
