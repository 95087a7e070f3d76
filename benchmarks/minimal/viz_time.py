"""Wall time to draw every view and all five training movies of a run with 200 checkpoints.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/minimal/viz_time.py [--run DIR]

Without --run it trains plus-last-even (cpu preset, a checkpoint every 30 steps: 201
checkpoints) into runs/bench-viz-200 once. The movies are what ``tinyscope movie RUN`` writes:
the paper's five, GIF and MP4 (``--no-mp4``: GIFs only), at the default 100 dpi. Target: <= 120 s
for views + movies on the development machine. Besides wall time it prints CPU seconds (this
process and its ffmpeg children) and the load average, because on a shared machine the wall time
measures the neighbours as much as the code. The figure printed last is the timing table.
"""
from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import torch


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the ffmpeg encoders)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default=None, help="an existing run directory (default: train runs/bench-viz-200)")
    ap.add_argument("--dpi", type=int, default=110, help="PNG resolution of the views")
    ap.add_argument("--no-mp4", action="store_true", help="GIFs only (tinyscope movie --no-mp4)")
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

    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), cpu_s()
    ctx = ViewContext(run)
    out = run_dir / "figures"
    out.mkdir(exist_ok=True)
    n_views = 0
    for view, fig in render_views(ctx):
        (out / f"{view.name}.png").write_bytes(figure_png(fig, dpi=args.dpi))
        n_views += 1
    t_views, c_views = time.perf_counter() - t0, cpu_s() - c0
    mem_views = rss_mb()

    t1, c1 = time.perf_counter(), cpu_s()
    written = render_movies(run, mp4=not args.no_mp4, progress=False)
    t_movies, c_movies = time.perf_counter() - t1, cpu_s() - c1
    mem_movies = rss_mb()
    total = t_views + t_movies
    sizes = sum(f.stat().st_size for fs in written.values() for f in fs) / 1e6

    kinds = "GIF/MP4" if not args.no_mp4 else "GIF"
    print()
    print(f"run: {run_dir} ({n_ckpt} checkpoints); load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after "
          f"({os.cpu_count()} CPUs)")
    print(f"{'part':<28}{'wall s':>10}{'CPU s':>10}{'peak RSS MB':>14}")
    print(f"{'model + run loaded':<28}{'':>10}{'':>10}{base:>14.0f}")
    print(f"{f'{n_views} views (PNG, {args.dpi} dpi)':<28}{t_views:>10.1f}{c_views:>10.1f}{mem_views:>14.0f}")
    print(f"{f'{len(written)} movies x {n_ckpt} frames':<28}{t_movies:>10.1f}{c_movies:>10.1f}{mem_movies:>14.0f}"
          f"   ({sizes:.1f} MB of {kinds})")
    print(f"{'total':<28}{total:>10.1f}{c_views + c_movies:>10.1f}{max(mem_views, mem_movies):>14.0f}   "
          f"target <= 120 s: {'met' if total <= 120 else 'NOT met'}")


if __name__ == "__main__":
    main()
