"""Wall time to draw every view and all five training movies of a run with 200 checkpoints.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/minimal/viz_time.py [--run DIR]

Without --run it trains plus-last-even (cpu preset, a checkpoint every 30 steps: 201
checkpoints) into runs/bench-viz-200 once. Target: <= 120 s for views + movies on the
development machine, with the peak memory printed. The figure printed last is the timing table.
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import torch


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default=None, help="an existing run directory (default: train runs/bench-viz-200)")
    ap.add_argument("--dpi", type=int, default=110, help="PNG resolution of the views")
    ap.add_argument("--mp4", action="store_true", help="also encode MP4s (when ffmpeg is available)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from tinyscope.interp.plotting import figure_png
    from tinyscope.runs.rundir import load_run, run_experiment
    from tinyscope.studies.minimal.movies import render_movies
    from tinyscope.studies.minimal.views import ViewContext, render_views

    run_dir = Path(args.run or "runs/bench-viz-200")
    if not (run_dir / "results.json").exists():
        t = time.perf_counter()
        run_experiment("plus-last-even", "cpu", overrides=["train.checkpoint_every=30", "train.threads=1"],
                       out=run_dir, progress=False)
        print(f"trained {run_dir} in {time.perf_counter() - t:.1f} s (not part of the timing)")

    run = load_run(run_dir)
    n_ckpt = len(run.checkpoint_steps())
    base = rss_mb()

    t0 = time.perf_counter()
    ctx = ViewContext(run)
    out = run_dir / "figures"
    out.mkdir(exist_ok=True)
    n_views = 0
    for view, fig in render_views(ctx):
        (out / f"{view.name}.png").write_bytes(figure_png(fig, dpi=args.dpi))
        n_views += 1
    t_views = time.perf_counter() - t0
    mem_views = rss_mb()

    t1 = time.perf_counter()
    written = render_movies(run, mp4=args.mp4, progress=False)
    t_movies = time.perf_counter() - t1
    mem_movies = rss_mb()
    total = t_views + t_movies
    sizes = sum(f.stat().st_size for fs in written.values() for f in fs) / 1e6

    print()
    print(f"run: {run_dir} ({n_ckpt} checkpoints)")
    print(f"{'part':<28}{'wall s':>10}{'peak RSS MB':>14}")
    print(f"{'model + run loaded':<28}{'':>10}{base:>14.0f}")
    print(f"{f'{n_views} views (PNG, {args.dpi} dpi)':<28}{t_views:>10.1f}{mem_views:>14.0f}")
    print(f"{f'5 movies x {n_ckpt} frames':<28}{t_movies:>10.1f}{mem_movies:>14.0f}   ({sizes:.1f} MB of GIF/MP4)")
    print(f"{'total':<28}{total:>10.1f}{max(mem_views, mem_movies):>14.0f}   target <= 120 s: "
          f"{'met' if total <= 120 else 'NOT met'}")


if __name__ == "__main__":
    main()
