"""``tinyscope list``, ``show``, ``run`` and ``eval``."""
from __future__ import annotations

import json
import shlex
import sys

PRESET_HELP = "smoke (seconds) | cpu (minutes on 2 cores) | paper (the paper's settings)"


def add_config_arguments(p) -> None:
    """The flags that choose a config: EXPERIMENT, --preset, --seed, --set (run, show)."""
    p.add_argument("experiment", help="an experiment name (`tinyscope list` shows them all)")
    p.add_argument("--preset", default=None, help=f"{PRESET_HELP} (default: cpu, or the experiment's only "
                                                  "preset where it has no cpu one, e.g. the compiled circuits)")
    p.add_argument("--seed", type=int, default=None, help="training seed (default: the preset's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field, e.g. --set model.d_model=4 --set train.lr=3e-4 "
                        "(`tinyscope show EXP` lists them)")


def register(sub) -> None:
    p = sub.add_parser("list", help="list registered experiments and their presets")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="print the config of an experiment's preset (with --seed and --set applied)")
    add_config_arguments(p)
    p.add_argument("--format", default="set", choices=["set", "json"],
                   help="set: one --set KEY=VALUE line per field (default); json: as the run's config.json holds it")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("run", help="train an experiment into a run directory")
    add_config_arguments(p)
    p.add_argument("--out", default=None, help="run directory (default: runs/EXP-PRESET-sSEED)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--dry-run", action="store_true",
                   help="print the resolved config, parameter count, precision, threads and estimated wall time; "
                        "train and write nothing")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("eval", help="re-evaluate a run's selected checkpoint, on its own or a fresh evaluation set")
    p.add_argument("run", help="a run directory or zoo:NAME")
    p.add_argument("--checkpoint", default="best", help="best | last | a step number (default: best)")
    p.add_argument("--seed", type=int, default=None,
                   help="draw a fresh evaluation set from this seed (held out as the run's own test set is)")
    p.add_argument("--n", type=int, default=None, help="examples in the fresh set (default: as many as the run's own)")
    p.set_defaults(func=cmd_eval)


def default_preset(exp, preset: str | None) -> str:
    """``preset`` as given; else ``cpu`` where ``exp`` has it, else its first preset."""
    if preset is not None:
        return preset
    return "cpu" if "cpu" in exp.presets else next(iter(exp.presets))


def cmd_list(args) -> int:
    """From the studies' static catalogs: no torch, no experiment module (runs/registry.py)."""
    from tinyscope.runs import registry

    for name, presets, description in registry.catalog():
        print(registry.line(name, presets, description))
    for module, error in registry.IMPORT_ERRORS.items():
        print(f"tinyscope: warning: experiments module {module!r} failed to import: {error}", file=sys.stderr)
    return 0


def cmd_show(args) -> int:
    from tinyscope.commands._plan import config_record, set_lines
    from tinyscope.runs.registry import get

    exp = get(args.experiment)
    args.preset = default_preset(exp, args.preset)
    cfg = exp.config(args.preset, args.seed, args.overrides)
    if args.format == "json":
        print(json.dumps(config_record(exp, args.preset, cfg), indent=2))
    else:
        print("\n".join(set_lines(cfg)))
    return 0


def cmd_run(args) -> int:
    from pathlib import Path

    from tinyscope.commands._preflight import check_machine, check_start
    from tinyscope.errors import ConfigError
    from tinyscope.runs.registry import get
    from tinyscope.runs.rundir import run_experiment

    exp = get(args.experiment)
    args.preset = default_preset(exp, args.preset)
    cfg = exp.config(args.preset, args.seed, args.overrides)  # validate before any file is written
    out = args.out or f"runs/{exp.name}-{args.preset}-s{cfg.seed}"
    if args.dry_run:  # the checks that write nothing, then the plan
        from tinyscope.commands._plan import describe_run

        if Path(out).exists() and not Path(out).is_dir():
            raise ConfigError(f"--out {out} is a file, not a directory; give a directory for the run")
        if (Path(out) / "config.json").exists() and not args.resume:
            raise ConfigError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
        if exp.trainable:
            check_machine(exp, cfg, args.overrides)
        print(describe_run(exp, args.preset, cfg, args.overrides, out, args.resume))
        return 0
    check_start(exp, cfg, args.overrides, out, resume=args.resume)  # device, threads, memory, --out
    verb = "training" if exp.trainable else "building and evaluating"
    print(f"tinyscope: {verb} {exp.name} (preset {args.preset}, seed {cfg.seed}) into {out}", file=sys.stderr)
    results = run_experiment(exp.name, args.preset, args.seed, args.overrides, out, resume=args.resume,
                             progress=not args.no_progress)
    if results:
        # a built (untrained) experiment's results have no wall_time or stop reason
        summary = ("steps", "wall_time", "stopped", "selected_step", "metrics")
        print(json.dumps({k: results[k] for k in summary if k in results}, indent=2))
        print(f"tinyscope: run directory {out}", file=sys.stderr)
        if (Path(out) / "report.html").exists():
            print(f"tinyscope: report {Path(out) / 'report.html'}", file=sys.stderr)
        commands = exp.next_commands(shlex.quote(out))
        if commands:
            print("tinyscope: next:\n" + "\n".join(f"  {c}" for c in commands), file=sys.stderr)
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
