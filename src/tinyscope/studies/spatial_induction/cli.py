"""``tinyscope construct SETTING`` (a command of the spatial-induction study): write a run directory whose model is a compiled spatial
induction head (Construction I or II + the Layer-2 matching head), evaluated against the Bayes posterior."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("construct", help="compile a spatial-induction circuit into a run directory (no training)")
    p.add_argument("setting", choices=["eca", "v3", "vn2d"],
                   help="eca: 1-D, 2 states, 3 neighbours; v3: 1-D, 3 states, 3 neighbours; vn2d: 2-D von Neumann, 2 states, 5 neighbours")
    p.add_argument("--construction", choices=["I", "II"], default="I",
                   help="I: Dedicated heads (Theorem G.9); II: Shared head + MLP decoding (Theorem G.10)")
    p.add_argument("--rules", choices=["det", "stoch"], default="det",
                   help="det: deterministic rules (default); stoch: stochastic rules")
    p.add_argument("--grid", type=int, nargs="+", default=None, help="torus sides, e.g. --grid 64 or --grid 10 10")
    p.add_argument("--T", type=int, default=None, help="time steps")
    p.add_argument("--T0", type=int, default=None, help="context steps")
    p.add_argument("--beta", type=float, default=None, help="Layer-2 scale (default: the recipe of App. H.7)")
    p.add_argument("--Lambda", type=float, default=None, help="Layer-1 logit scale (default: the recipe)")
    p.add_argument("--kappa", type=float, default=None, help="KL budget for stochastic rules (default 0.01)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field of the compiled run")
    p.add_argument("--out", default=None, help="run directory (default: runs/sih-compiled-SETTING-RULES-CONSTRUCTION)")
    p.set_defaults(func=cmd_construct)


def cmd_construct(args) -> int:
    from tinyscope.studies.spatial_induction.compiled import write_compiled_run

    sets = [f"construction.construction={args.construction}"] + list(args.overrides)
    for key, value in (("task.grid", args.grid), ("task.T", args.T), ("task.T0", args.T0),
                       ("construction.beta", args.beta), ("construction.Lambda", args.Lambda),
                       ("construction.kappa", args.kappa)):
        if value is not None:
            sets.insert(0, f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}")
    out = args.out or f"runs/sih-compiled-{args.setting}-{args.rules}-{args.construction}"
    results = write_compiled_run(args.setting, args.rules, out, sets)
    print(json.dumps({"sizes": results["construction"]["sizes"], "metrics": results["metrics"]}, indent=2))
    print(f"tinyscope: compiled circuit written to {out}", file=sys.stderr)
    return 0
