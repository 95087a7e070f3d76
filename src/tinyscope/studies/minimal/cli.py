"""``tinyscope movie RUN``: the five learning-dynamics movies of the minimal transformer
(Mahajne & Moldwin, Sec. 6), one frame per checkpoint, into RUN/movies and the run's report."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("movie", help="render the five learning-dynamics movies of a run (GIF; MP4 with ffmpeg)")
    p.add_argument("run", help="run directory")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None, help="render only these movies")
    p.add_argument("--fps", type=float, default=8.0, help="frames per second (default: 8)")
    p.add_argument("--every", type=int, default=1, help="use every k-th checkpoint (default: all)")
    p.add_argument("--dpi", type=int, default=72, help="frame resolution (default: 72)")
    p.add_argument("--no-mp4", action="store_true", help="write GIFs only even when ffmpeg is available")
    p.add_argument("--out", default=None, help="output folder (default: RUN/movies)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_movie)
    from tinyscope.studies.minimal import authors_checkpoint, seed_comparison

    seed_comparison.register(sub)  # tinyscope compare-seeds RUN1 RUN2 ... --out DIR
    authors_checkpoint.register(sub)  # tinyscope import creating-transformer PATH --out RUN


def cmd_movie(args) -> int:
    """Runs while holding the run directory's lock (one writer per run; see runs/lock.py)."""
    from tinyscope.runs.lock import run_lock
    from tinyscope.runs.rundir import resolve_run_path

    with run_lock(resolve_run_path(args.run)):
        return _movie(args)


def _movie(args) -> int:
    import math

    from tinyscope.errors import ConfigError
    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.minimal.movies import render_movies

    if not (math.isfinite(args.fps) and 0 < args.fps <= 120):
        raise ConfigError(f"--fps {args.fps} must be a number in (0, 120]")
    if args.every < 1:
        raise ConfigError(f"--every {args.every} must be >= 1")
    if not 10 <= args.dpi <= 1200:
        raise ConfigError(f"--dpi {args.dpi} must be between 10 and 1200")
    run = load_run(args.run, "best")
    written = render_movies(run, out_dir=args.out, only=args.only, fps=args.fps, every=args.every,
                            mp4=not args.no_mp4, dpi=args.dpi, progress=not args.no_progress and sys.stderr.isatty())
    for files in written.values():
        for f in files:
            print(f)
    if not args.no_mp4 and not any(str(f).endswith(".mp4") for fs in written.values() for f in fs):
        print("tinyscope: no ffmpeg found, wrote GIFs only (pip install imageio-ffmpeg for MP4)", file=sys.stderr)
    return 0
