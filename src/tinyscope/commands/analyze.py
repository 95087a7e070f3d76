"""``tinyscope analyze RUN``: the mechanistic analyses the run's experiment declares
(``Experiment.analyses`` / ``analyze``), written to RUN/analysis/ (figures and analysis.json) and
into the run's report."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("analyze", help="mechanistic analyses of a run (what its study declares)")
    p.add_argument("run", help="run directory")
    p.add_argument("--only", nargs="+", default=None, metavar="ANALYSIS",
                   help="run only these (`tinyscope analyze RUN --list` names them)")
    p.add_argument("--list", action="store_true", help="list the analyses the run offers and exit")
    p.add_argument("--n", type=int, default=2000,
                   help="fresh evaluation examples (trajectories, sequences, …) the analyses use (default 2000)")
    p.add_argument("--seed", type=int, default=42, help="seed of the fresh examples (default 42)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="change one of the study's analysis sizes (`tinyscope analyze RUN --list` names them with "
                        "their defaults), e.g. --set tsne_per_pair=400")
    p.add_argument("--checkpoint", default="best", help="best | last | a step number")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: the analysis is many small operations)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_analyze)


def parse_checkpoint(value: str) -> str | int:
    """``best``, ``last`` or a step number, as `load_run` takes it."""
    from tinyscope.errors import TinyscopeError

    if value in ("best", "last"):
        return value
    if not value.isdigit():
        raise TinyscopeError(f"--checkpoint={value!r} must be best, last or a step number")
    return int(value)


def cmd_analyze(args) -> int:
    """Runs while holding the run directory's lock (one writer per run; see runs/lock.py)."""
    from tinyscope.runs.lock import run_lock
    from tinyscope.runs.rundir import resolve_run_path

    if getattr(args, 'list', False):
        return _analyze(args)
    with run_lock(resolve_run_path(args.run)):
        return _analyze(args)


def _analyze(args) -> int:

    import torch

    from tinyscope.commands._preflight import cores
    from tinyscope.config import check_seed
    from tinyscope.errors import TinyscopeError
    from tinyscope.interp.mpl import plt
    from tinyscope.interp.plotting import figure_png
    from tinyscope.report.run_report import write_run_report
    from tinyscope.runs.experiment import AnalysisOptions
    from tinyscope.runs.rundir import load_run, read_config
    from tinyscope.train.checkpoint import atomic_write_bytes, atomic_write_json

    if args.n < 1:
        raise TinyscopeError(f"--n={args.n} must be >= 1")
    if args.threads < 1 or args.threads > cores():
        raise TinyscopeError(f"--threads={args.threads} must be between 1 and {cores()} (the cores this process may use)")
    check_seed("--seed", args.seed)
    which = parse_checkpoint(args.checkpoint)
    exp, _, _ = read_config(args.run)
    offered = exp.analyses()
    if not offered:
        raise TinyscopeError(f"{exp.name} declares no analyses; `tinyscope viz {args.run}` draws its figures")
    settable = exp.analysis_settings()
    if args.list:
        print("\n".join(offered), flush=True)  # before the stderr line, so the two never interleave
        if settable:
            print("--set keys (default): " + ", ".join(f"{k}={v}" for k, v in settable.items()), file=sys.stderr)
        return 0
    for assignment in args.settings:
        key = assignment.split("=", 1)[0].strip()
        if "=" not in assignment or key not in settable:
            allowed = ", ".join(settable) or "none"
            raise TinyscopeError(f"--set {assignment!r}: {exp.name}'s analyses take KEY=VALUE with KEY one of: {allowed}")
    unknown = [a for a in args.only or () if a not in offered]
    if unknown:
        raise TinyscopeError(f"--only {unknown[0]!r} is not an analysis of {exp.name}; choose from {', '.join(offered)}")
    torch.set_num_threads(args.threads)
    run = load_run(args.run, which)
    options = AnalysisOptions(only=tuple(args.only or offered), n=args.n, seed=args.seed,
                              progress=not args.no_progress and sys.stderr.isatty(), settings=tuple(args.settings))
    result = exp.analyze(run, options)
    out = run.path / "analysis"
    out.mkdir(exist_ok=True)
    record = dict(result.numbers, checkpoint_step=run.step, captions=result.captions)
    atomic_write_json(out / "analysis.json", record)
    for name, fig in result.figures.items():
        atomic_write_bytes(out / f"{name.replace(' ', '_')}.png", figure_png(fig, dpi=120))
        plt.close(fig)
    write_run_report(run, full=run.preset != "smoke")  # the report gains an Analysis section
    print(json.dumps({k: v for k, v in result.numbers.items() if not isinstance(v, (list, dict)) or k in
                      ("alignment", "ablation", "probes")}, indent=2))
    print(f"tinyscope: analysis written to {out}", file=sys.stderr)
    return 0
