"""``tinyscope viz RUN`` (every view of the walkthrough, saved under RUN/figures/, and the run
report refreshed with them) and ``tinyscope movie RUN`` (the five training movies)."""
from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("viz", help="draw every view of a run (Fig. 2-15 of the minimal-transformers paper)")
    p.add_argument("run", nargs="?", help="run directory")
    p.add_argument("--step", type=int, default=None, help="draw the checkpoint of this step (default: the selected)")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None,
                   help="draw only these views, e.g. --only embeddings 13_walk_attention")
    p.add_argument("--sequence", default=None,
                   help="walkthrough sequence, tokens separated by spaces (default: '4 1 + 4 6 9 5 +')")
    p.add_argument("--focus", default=None, help="query token of Fig. 7-8 (default: '+')")
    p.add_argument("--focus-position", type=int, default=None, help="query position of Fig. 7 (default: 5)")
    p.add_argument("--head", type=int, default=0, help="attention head drawn (default: 0)")
    p.add_argument("--dpi", type=int, default=110, help="resolution of the saved PNGs (default: 110)")
    p.add_argument("--no-report", action="store_true",
                   help="do not rewrite RUN/report.html (it is rewritten only for a full run of the selected step)")
    p.add_argument("--list", action="store_true", help="list the views and exit")
    p.set_defaults(func=cmd_viz)

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


def cmd_viz(args) -> int:
    from tinyscope.errors import TinyscopeError
    from tinyscope.interp.plotting import figure_png
    from tinyscope.report.run_report import ReportFigure, write_run_report
    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.minimal.views import VIEWS, ViewContext, render_views, select_views

    if args.list:
        for v in VIEWS:
            print(f"{v.name:<30} {v.figure:<20} {v.caption}")
        return 0
    if args.run is None:
        raise TinyscopeError("tinyscope viz needs a run directory (or --list)")
    select_views(args.only)  # reject unknown names before loading anything
    which = args.step if args.step is not None else "best"
    run = load_run(args.run, which)
    ctx = ViewContext(run, sequence=args.sequence, focus=args.focus, focus_position=args.focus_position,
                      head=args.head)
    out = Path(args.run) / "figures" / (f"step_{args.step:06d}" if args.step is not None else "")
    out.mkdir(parents=True, exist_ok=True)
    rendered = []
    for view, fig in render_views(ctx, args.only):
        png = figure_png(fig, dpi=args.dpi)
        (out / f"{view.name}.png").write_bytes(png)
        rendered.append(ReportFigure(view.name, view.figure, view.caption, png))
        print(out / f"{view.name}.png")
    if not rendered:
        print(f"tinyscope: no view applies to {args.run}", file=sys.stderr)
    if not args.no_report and not args.only and args.step is None:  # the report shows the selected checkpoint
        path = write_run_report(args.run, which, figures=rendered, sequence=args.sequence, run=run)
        print(f"tinyscope: report {path}", file=sys.stderr)
    return 0


def cmd_movie(args) -> int:
    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.minimal.movies import render_movies

    run = load_run(args.run, "best")
    written = render_movies(run, out_dir=args.out, only=args.only, fps=args.fps, every=args.every,
                            mp4=not args.no_mp4, dpi=args.dpi, progress=not args.no_progress)
    for files in written.values():
        for f in files:
            print(f)
    if not args.no_mp4 and not any(str(f).endswith(".mp4") for fs in written.values() for f in fs):
        print("tinyscope: no ffmpeg found, wrote GIFs only (pip install imageio-ffmpeg for MP4)", file=sys.stderr)
    return 0
