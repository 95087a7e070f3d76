"""``tinyscope list``, ``run`` and ``eval``."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("list", help="list registered experiments and their presets")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="train an experiment into a run directory")
    p.add_argument("experiment")
    p.add_argument("--preset", default="cpu", help="smoke | cpu | paper (default: cpu)")
    p.add_argument("--seed", type=int, default=None, help="training seed (default: the preset's)")
    p.add_argument("--out", default=None, help="run directory (default: runs/EXP-PRESET-sSEED)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field, e.g. --set model.d_model=4 --set train.lr=3e-4")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("eval", help="re-evaluate a run's selected checkpoint, on its own or a fresh evaluation set")
    p.add_argument("run", help="a run directory or zoo:NAME")
    p.add_argument("--checkpoint", default="best", help="best | last | a step number")
    p.add_argument("--seed", type=int, default=None,
                   help="draw a fresh evaluation set from this seed (held out as the run's own test set is)")
    p.add_argument("--n", type=int, default=None, help="examples in the fresh set (default: as many as the run's own)")
    p.set_defaults(func=cmd_eval)


def cmd_list(args) -> int:
    from tinyscope.runs import registry

    for name in registry.names():
        print(registry.get(name).line())
    for module, error in registry.IMPORT_ERRORS.items():
        print(f"tinyscope: warning: experiments module {module!r} failed to import: {error}", file=sys.stderr)
    return 0


def cmd_run(args) -> int:
    from tinyscope.commands._preflight import check_start
    from tinyscope.runs.registry import get
    from tinyscope.runs.rundir import run_experiment

    exp = get(args.experiment)
    cfg = exp.config(args.preset, args.seed, args.overrides)  # validate before any file is written
    out = args.out or f"runs/{exp.name}-{args.preset}-s{cfg.seed}"
    check_start(exp, cfg, args.overrides, out, resume=args.resume)  # device, threads, memory, --out
    print(f"tinyscope: training {exp.name} (preset {args.preset}, seed {cfg.seed}) into {out}", file=sys.stderr)
    results = run_experiment(exp.name, args.preset, args.seed, args.overrides, out, resume=args.resume,
                             progress=not args.no_progress)
    if results:
        print(json.dumps({k: results[k] for k in ("steps", "wall_time", "stopped", "selected_step", "metrics")}, indent=2))
        print(f"tinyscope: run directory {out}", file=sys.stderr)
    return 0


def cmd_eval(args) -> int:
    from tinyscope.config import check_seed
    from tinyscope.errors import ConfigError
    from tinyscope.runs.rundir import evaluate_run

    if args.checkpoint not in ("best", "last") and not args.checkpoint.isdigit():
        raise ConfigError(f"--checkpoint {args.checkpoint!r} must be best, last or a step number")
    if args.n is not None and args.n < 1:
        raise ConfigError(f"--n {args.n} must be >= 1")
    check_seed("--seed", args.seed)
    which = args.checkpoint if args.checkpoint in ("best", "last") else int(args.checkpoint)
    print(json.dumps(evaluate_run(args.run, which, seed=args.seed, n=args.n), indent=2))
    return 0
