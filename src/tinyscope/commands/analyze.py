"""``tinyscope analyze RUN``: attention maps, alignment, ablation, probes and t-SNE of a
cellular-automaton run, written to RUN/analysis/ (figures and analysis.json)."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("analyze", help="mechanistic analysis of a run (alignment, ablation, probes, t-SNE)")
    p.add_argument("run")
    p.add_argument("--only", nargs="+", default=None, metavar="ANALYSIS",
                   help="run only these: attention alignment ablation probes tsne")
    p.add_argument("--n-traj", type=int, default=2000, help="fresh test trajectories (default 2000)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint", default="best", help="best | last | a step number")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: the analysis is many small operations)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args) -> int:
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tinyscope.errors import TinyscopeError
    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.spatial_induction.analysis import ANALYSES, AnalysisConfig, analyze
    from tinyscope.train.checkpoint import atomic_write_bytes, atomic_write_json

    if args.n_traj < 1:
        raise TinyscopeError(f"--n-traj={args.n_traj} must be >= 1")
    if args.threads < 1:
        raise TinyscopeError(f"--threads={args.threads} must be >= 1")
    unknown = [a for a in args.only or () if a not in ANALYSES]
    if unknown:
        raise TinyscopeError(f"--only {unknown[0]!r} is not an analysis; choose from {', '.join(ANALYSES)}")
    if args.checkpoint not in ("best", "last") and not args.checkpoint.isdigit():
        raise TinyscopeError(f"--checkpoint={args.checkpoint!r} must be best, last or a step number")
    import torch

    torch.set_num_threads(args.threads)
    which = args.checkpoint if args.checkpoint in ("best", "last") else int(args.checkpoint)
    run = load_run(args.run, which)
    cfg = AnalysisConfig(n_traj=args.n_traj, seed=args.seed, only=list(args.only or ANALYSES))
    results, figures = analyze(run.model, run.task, cfg, progress=not args.no_progress and sys.stderr.isatty())
    out = Path(args.run) / "analysis"
    out.mkdir(exist_ok=True)
    results["checkpoint_step"] = run.step
    atomic_write_json(out / "analysis.json", results)
    import io

    for name, fig in figures.items():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
        plt.close(fig)
        atomic_write_bytes(out / f"{name.replace(' ', '_')}.png", buf.getvalue())
    from tinyscope.report.run_report import write_run_report

    write_run_report(args.run, which, full=False, run=run)  # the report gains an Analysis section
    print(json.dumps({k: v for k, v in results.items() if k in ("alignment", "ablation", "probes")}, indent=2))
    print(f"tinyscope: analysis written to {out}", file=sys.stderr)
    return 0
