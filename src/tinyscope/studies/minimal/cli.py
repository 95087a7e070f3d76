"""The minimal study's commands. ``tinyscope movie RUN``: the learning-dynamics movies of the
minimal transformer (Mahajne & Moldwin, Sec. 6), one frame per checkpoint, into RUN/movies (GIF
and MP4), and the run's report refreshed to show them; ``tinyscope compare-seeds RUN1 RUN2 ...``
(:mod:`~tinyscope.studies.minimal.seed_comparison`); ``tinyscope import creating-transformer PATH``
(:mod:`~tinyscope.studies.minimal.authors_checkpoint`). Registering them imports no torch."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("movie", help="render the learning-dynamics movies of a run (GIF and MP4) into its report")
    p.add_argument("run", nargs="?", help="run directory")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None,
                   help="render only these movies, or variants (names with or without their number; see --list)")
    p.add_argument("--list", action="store_true", help="list the movies and variants, and exit")
    p.add_argument("--fps", type=float, default=8.0, help="frames per second (default: 8)")
    p.add_argument("--every", type=int, default=1, help="use every k-th checkpoint (default: all)")
    p.add_argument("--dpi", type=int, default=None, help="frame resolution (default: 100)")
    p.add_argument("--no-mp4", action="store_true", help="write GIFs only")
    p.add_argument("--out", default=None, help="output folder (default: RUN/movies; the report is refreshed only then)")
    p.add_argument("--no-report", action="store_true", help="do not rewrite RUN/report.html")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_movie)
    register_compare_seeds(sub)
    register_import(sub)


def register_compare_seeds(sub) -> None:
    """``tinyscope compare-seeds RUN1 RUN2 ... --out DIR``."""
    p = sub.add_parser("compare-seeds", help="the embeddings, Q/K space and output landscape of several runs "
                       "side by side, aligned to the first by orthogonal Procrustes")
    p.add_argument("runs", nargs="+", help="run directories (or zoo:NAME); the first is the reference frame")
    p.add_argument("--out", required=True, help="folder for seed_comparison.png and alignment.json")
    p.add_argument("--checkpoint", default="best", help="best (default), last, or a step number, for every run")
    p.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="figure format (default: png)")
    p.set_defaults(func=_lazy("seed_comparison", "cmd_compare_seeds"))


def register_import(sub) -> None:
    """``tinyscope import creating-transformer PATH --out RUN``."""
    p = sub.add_parser("import", help="import a checkpoint another codebase wrote into a run directory")
    kinds = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    q = kinds.add_parser("creating-transformer", help="Mahajne & Moldwin's public code (plus-last-even): its "
                         "<config>/checkpoints folder (every step_*/model.pt) or one model.pt")
    q.add_argument("path", help="their checkpoints folder or a model.pt")
    q.add_argument("--out", required=True, help="the run directory to write")
    q.add_argument("--final-step", type=int, default=None,
                   help="the step of the final model.pt (default: the metadata's last evaluation + eval_interval)")
    q.set_defaults(func=_lazy("authors_checkpoint", "cmd_import"))


def _lazy(module: str, name: str):
    """The command ``name`` of ``tinyscope.studies.minimal.<module>``, imported only when it runs
    (registering the flags must stay light: `tinyscope --help` imports no torch)."""
    def run(args) -> int:
        import importlib

        return getattr(importlib.import_module(f"tinyscope.studies.minimal.{module}"), name)(args)

    return run


def cmd_movie(args) -> int:
    """Runs while holding the run directory's lock (one writer per run; see runs/lock.py)."""
    from tinyscope.errors import ConfigError
    from tinyscope.runs.lock import run_lock
    from tinyscope.runs.rundir import resolve_run_path

    if args.list:
        return _list()
    if args.run is None:
        raise ConfigError("tinyscope movie needs a run directory (or --list)")
    with run_lock(resolve_run_path(args.run)):
        return _movie(args)


def _list() -> int:
    from tinyscope.studies.minimal.movies import MOVIES

    for m in MOVIES:
        kind = "" if m.default else "  (variant: --only)"
        print(f"{m.name:<34} {m.paper:<26} {m.caption}{kind}")
    return 0


def drawn_views(run) -> dict:
    """The views `tinyscope viz RUN` drew for the selected checkpoint (RUN/figures/*.png, newer
    than results.json), as report figures, so that refreshing the report need not draw them again."""
    from tinyscope.report.run_report import ReportFigure

    folder, results = run.path / "figures", run.path / "results.json"
    since = results.stat().st_mtime if results.is_file() else 0.0
    out = {}
    for v in run.experiment.views(run):
        png = folder / f"{v.name}.png"
        if png.is_file() and png.stat().st_mtime >= since:
            out[v.name] = ReportFigure(v.name, v.label, v.caption, png.read_bytes())
    return out


def _movie(args) -> int:
    import math

    from tinyscope.errors import ConfigError
    from tinyscope.report.run_report import write_run_report
    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.minimal.movies import DEFAULT_DPI, render_movies, resolve_movie_names

    dpi = DEFAULT_DPI if args.dpi is None else args.dpi
    if not (math.isfinite(args.fps) and 0 < args.fps <= 120):
        raise ConfigError(f"--fps {args.fps} must be a number in (0, 120]")
    if args.every < 1:
        raise ConfigError(f"--every {args.every} must be >= 1")
    if not 10 <= dpi <= 1200:
        raise ConfigError(f"--dpi {dpi} must be between 10 and 1200")
    resolve_movie_names(args.only)  # a bad name is reported before the run is loaded
    run = load_run(args.run, "best")
    written = render_movies(run, out_dir=args.out, only=args.only, fps=args.fps, every=args.every,
                            mp4=not args.no_mp4, dpi=dpi, progress=not args.no_progress and sys.stderr.isatty())
    for files in written.values():
        for f in files:
            print(f)
    if not args.no_mp4 and not any(f.suffix == ".mp4" for fs in written.values() for f in fs):
        print("tinyscope: no ffmpeg found, wrote GIFs only (imageio-ffmpeg ships one: pip install imageio-ffmpeg)",
              file=sys.stderr)
    if not args.no_report and args.out is None:
        path = write_run_report(run, full=True, drawn=drawn_views(run))
        print(f"tinyscope: report {path}", file=sys.stderr)
    return 0
