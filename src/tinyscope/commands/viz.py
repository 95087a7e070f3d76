"""``tinyscope viz RUN``: every figure the run's experiment declares (``Experiment.views``), saved
under RUN/figures/, and the run report refreshed with them."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("viz", help="draw every figure a run offers (its study's views) into RUN/figures")
    p.add_argument("run", help="run directory")
    p.add_argument("--checkpoint", default=None,
                   help="draw this checkpoint: best | last | a step number (default: the selected)")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None,
                   help="draw only these views (full names or the part after the number), e.g. --only embeddings")
    p.add_argument("--sequence", default=None, help="a token sequence to trace, tokens separated by spaces")
    p.add_argument("--focus", default=None, help="the query token a view centres on")
    p.add_argument("--focus-position", type=int, default=None, help="the query position a view centres on")
    p.add_argument("--head", type=int, default=0, help="attention head drawn (default: 0)")
    p.add_argument("--dpi", type=int, default=110, help="resolution of the saved PNGs (default: 110)")
    p.add_argument("--format", nargs="+", choices=("pdf", "svg"), default=[], metavar="pdf|svg",
                   help="also save each figure as a vector file (pdf, svg or both) beside its PNG")
    p.add_argument("--no-report", action="store_true",
                   help="do not rewrite RUN/report.html (it is rewritten only for a full run of the selected step)")
    p.add_argument("--list", action="store_true", help="list the run's views and exit")
    p.set_defaults(func=cmd_viz)


def select(views: list, only: list[str] | None, experiment: str) -> list:
    """The views named in ``only`` (a full name, or its part after the leading number), in order."""
    from tinyscope.errors import TinyscopeError

    if not only:
        return views
    names = {v.name for v in views}
    chosen = []
    for want in only:
        hits = [v for v in views if want in (v.name, v.name.split("_", 1)[-1])]
        if not hits:
            raise TinyscopeError(f"{experiment} has no view named {want!r} for this run; choose from "
                                 f"{', '.join(sorted(names))}")
        chosen += [v for v in hits if v not in chosen]
    return [v for v in views if v in chosen]


def chosen_options(args) -> list[str]:
    """The view options the user gave (``--sequence``, ``--focus``, ``--focus-position``, ``--head``)."""
    given = [("--sequence", args.sequence), ("--focus", args.focus), ("--focus-position", args.focus_position),
             ("--head", args.head or None)]
    return [f"{flag} {value!r}" if isinstance(value, str) else f"{flag} {value}" for flag, value in given
            if value is not None]


def draw(view, args):
    """``view.draw()``; a failure that only the user's view options can explain (an index out of
    range, a value the view cannot use) is reported as theirs, in one line."""
    from tinyscope.errors import TinyscopeError

    try:
        return view.draw()
    except TinyscopeError:
        raise
    except (IndexError, KeyError, ValueError) as exc:
        options = chosen_options(args)
        if not options:
            raise
        raise TinyscopeError(f"view {view.name} cannot be drawn with {', '.join(options)} "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())}); check these values") from None


def cmd_viz(args) -> int:
    """Runs while holding the run directory's lock (one writer per run; see runs/lock.py)."""
    from tinyscope.runs.lock import run_lock
    from tinyscope.runs.rundir import resolve_run_path

    if getattr(args, 'list', False):
        return _viz(args)
    with run_lock(resolve_run_path(args.run)):
        return _viz(args)


def _viz(args) -> int:
    from tinyscope.commands.analyze import parse_checkpoint
    from tinyscope.errors import TinyscopeError
    from tinyscope.interp.plotting import figure_png
    from tinyscope.report.run_report import ReportFigure, write_run_report
    from tinyscope.runs.experiment import ViewOptions
    from tinyscope.runs.rundir import load_run

    if args.dpi < 10 or args.dpi > 1200:
        raise TinyscopeError(f"--dpi={args.dpi} must be between 10 and 1200")
    if args.head < 0:
        raise TinyscopeError(f"--head={args.head} must be >= 0 (heads are numbered from 0)")
    if args.focus_position is not None and args.focus_position < 0:
        raise TinyscopeError(f"--focus-position={args.focus_position} must be >= 0 (positions are numbered from 0)")
    which = parse_checkpoint(args.checkpoint) if args.checkpoint is not None else "best"
    run = load_run(args.run, which)
    options = ViewOptions(sequence=args.sequence, focus=args.focus, focus_position=args.focus_position,
                          head=args.head)
    views = run.experiment.views(run, options)
    if not views:
        raise TinyscopeError(f"{run.experiment.name} declares no views for {args.run}")
    if args.list:
        for v in views:
            print(f"{v.name:<30} {v.label:<20} {v.caption}")
        return 0
    views = select(views, args.only, run.experiment.name)
    out = run.path / "figures" / (f"step_{run.step:06d}" if args.checkpoint is not None else "")
    out.mkdir(parents=True, exist_ok=True)
    from tinyscope.interp.mpl import plt

    drawn = {}
    for view in views:
        fig = draw(view, args)
        png = figure_png(fig, dpi=args.dpi)
        for fmt in args.format:  # vector copies beside the PNG
            fig.savefig(out / f"{view.name}.{fmt}", format=fmt)
            print(out / f"{view.name}.{fmt}")
        plt.close(fig)
        (out / f"{view.name}.png").write_bytes(png)
        drawn[view.name] = ReportFigure(view.name, view.label, view.caption, png)
        print(out / f"{view.name}.png")
        if view.table is not None and (args.only or args.sequence):  # the readout as text, when asked for
            print(view.table())
    if not args.no_report and not args.only and args.checkpoint is None:  # the report shows the selected checkpoint
        path = write_run_report(run, full=True, drawn=drawn)
        print(f"tinyscope: report {path}", file=sys.stderr)
    return 0
