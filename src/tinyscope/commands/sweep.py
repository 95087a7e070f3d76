"""``tinyscope sweep`` (grids × seeds, local processes or Ray), ``tinyscope runs`` (query the
SQLite run index) and ``tinyscope report DIR`` (seed statistics and paper tables)."""
from __future__ import annotations

import csv
import json
import signal
import sys


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run an experiment over a grid of settings and seeds (resumable)")
    p.add_argument("experiment", help="an experiment name (`tinyscope list` shows them all)")
    p.add_argument("--preset", default="cpu", help="smoke (seconds) | cpu (minutes on 2 cores) | paper (the paper's "
                                                   "settings) (default: cpu)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="training seeds (default: the preset's seed)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="values of one config field; repeat for a Cartesian product (e.g. --grid train.lr=1e-3,3e-4)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field in every run")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads per run (default: cores // jobs, so the jobs never oversubscribe the cores)")
    p.add_argument("--out", default=None, help="sweep folder (default: sweeps/EXP-PRESET)")
    p.add_argument("--backend", default="local", choices=["local", "ray"], help="local processes or a Ray cluster")
    p.add_argument("--address", default=None, help="Ray cluster address (e.g. ray://head:10001 or auto); "
                                                   "default: start a local Ray instance")
    p.add_argument("--logger", default=None, choices=["none", "tensorboard", "mlflow"],
                   help="also log each run's training curves: tensorboard (RUN/tensorboard) or mlflow "
                        "(RUN/mlflow.db, or $MLFLOW_TRACKING_URI / --set train.mlflow_uri=URI); as --set train.logger=")
    p.add_argument("--run-report", default="auto", choices=["auto", "full", "quick", "none"],
                   help="each run's RUN/report.html, as in `tinyscope run` (quick or none saves time in large sweeps)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("runs", help="list and query the run index of a sweep folder (SQLite)")
    p.add_argument("folder", nargs="?", default="runs", help="a sweep folder or any folder of run directories")
    p.add_argument("--where", default=None, help="an SQL condition on columns and metrics, e.g. \"status = 'done' AND rule_error < 0.1\"")
    p.add_argument("--order", default="path", help="SQL ORDER BY (default: path)")
    p.add_argument("--columns", default=None, help="comma-separated columns to show")
    p.add_argument("--format", default="table", choices=["table", "csv", "json"], help="table (default), csv or json")
    p.add_argument("--scan", action="store_true",
                   help="(re)index the run directories found under the folder first and write FOLDER/index.sqlite "
                        "(a folder without an index is scanned in memory, and nothing is written into it)")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("report", help="seed statistics, paired differences and paper tables for a folder of runs")
    p.add_argument("folder", help="a sweep folder or any folder of run directories")
    p.add_argument("--table", default=None, help="a registered paper table layout (see --list-tables)")
    p.add_argument("--list-tables", action="store_true", help="list the registered table layouts and exit")
    p.add_argument("--pair", default=None, metavar="KEY", help="paired differences along this config key "
                                                               "(default: every grid key); refuses mismatched evaluation sets")
    p.add_argument("--metrics", default=None, help="comma-separated metrics to report (default: all)")
    p.add_argument("--ood-above", type=float, default=None,
                   help="lengths above this are shaded as out-of-distribution in the length figures")
    p.add_argument("--format", default="markdown", choices=["markdown", "csv", "latex"],
                   help="what to print (all three are written to FOLDER/report/)")
    p.set_defaults(func=cmd_report)


def cmd_sweep(args) -> int:
    from pathlib import Path

    from tinyscope.commands._preflight import check_machine, check_out, cores
    from tinyscope.errors import ConfigError
    from tinyscope.sweep import SweepSpec, parse_grid, run_sweep
    from tinyscope.sweep.core import check_options

    if args.backend == "local":  # let the fork server import torch while we do
        from tinyscope.sweep.local import prestart

        prestart()
    from tinyscope.runs.registry import get

    exp = get(args.experiment)
    seeds = args.seeds or [exp.config(args.preset).seed]
    common = list(args.overrides) + ([f"train.logger={args.logger}"] if args.logger else [])
    spec = SweepSpec(exp.name, args.preset, seeds, parse_grid(args.grid), common)
    out = args.out or f"sweeps/{exp.name}-{args.preset}"
    check_options(args.jobs, args.backend, args.address, args.run_report)
    runs = spec.validate()  # a bad key or value in any grid point stops here, before any run
    n = len(runs)
    check_out(Path(out))
    if args.backend == "local":  # a Ray cluster's machines are not this one
        if args.threads is not None and not 1 <= args.threads <= cores():
            raise ConfigError(f"--threads {args.threads} must be between 1 and {cores()} (the cores this process may use)")
        for r in {r.setting: r for r in runs}.values():  # seeds do not change what a run needs
            check_machine(exp, exp.config(r.preset, r.seed, r.overrides), r.overrides)
    print(f"tinyscope: sweep of {exp.name} ({args.preset}): {n} run(s), {args.jobs} at a time, "
          f"backend {args.backend}, into {out}", file=sys.stderr)
    def stop(signum, frame):  # `kill` stops the runs cleanly, like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        result = run_sweep(spec, out, jobs=args.jobs, backend=args.backend, address=args.address,
                           threads=args.threads, progress=not args.no_progress, run_report=args.run_report)
    except KeyboardInterrupt:
        print("tinyscope: sweep interrupted; the same command continues it (complete runs are skipped, "
              "interrupted ones resume from their last checkpoint)", file=sys.stderr)
        return 130
    print(f"tinyscope: {result.done} run(s) finished, {result.skipped} already complete, "
          f"{len(result.failed)} failed, in {result.wall_time:.1f} s", file=sys.stderr)
    for path, err in result.failed:
        print(f"  failed: {path}: {err}  (full traceback in {out}/{path}/error.txt)", file=sys.stderr)
    print(f"tinyscope: `tinyscope runs {out}` lists them; `tinyscope report {out}` summarizes them", file=sys.stderr)
    return 1 if result.failed else 0


def _print_rows(headers: list[str], rows: list[list], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps([dict(zip(headers, r)) for r in rows], indent=2))
        return
    if fmt == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(headers)
        w.writerows(rows)
        return

    def text(v) -> str:
        if v is None:
            return "–"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[text(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def cmd_runs(args) -> int:
    from pathlib import Path

    from tinyscope.errors import ConfigError
    from tinyscope.sweep.index import INDEX_NAME, RunIndex, rows_for_display

    folder = Path(args.folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; give a sweep folder or a folder of run directories")
    if args.scan or (folder / INDEX_NAME).exists():
        if args.scan:
            with RunIndex(folder) as index:
                index.scan()
        with RunIndex(folder, readonly=True) as index:
            cols, rows = index.query(args.where, args.order)
    else:  # a folder without an index is listed from an index in memory: nothing is written into it
        with RunIndex(folder, memory=True) as index:
            index.scan()
            cols, rows = index.query(args.where, args.order)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    if args.format == "json" and columns is None:
        for r in rows:
            r["setting"], r["overrides"], r["metrics"] = (json.loads(r[k] or "null") for k in ("setting", "overrides", "metrics"))
        print(json.dumps(rows, indent=2))
        return 0
    headers, values = rows_for_display(cols, rows, columns)
    _print_rows(headers, values, args.format)
    return 0


def cmd_report(args) -> int:
    from tinyscope.report.sweep_report import build_report
    from tinyscope.report.tables import get_table, table_names

    if args.list_tables:
        for name in table_names():
            t = get_table(name)
            print(f"{name:<32} {', '.join(t.experiments):<32} {t.caption}")
        return 0
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
    rep = build_report(args.folder, table=args.table, pair=args.pair, ood_above=args.ood_above, metrics=metrics)
    if args.format == "markdown":
        print(rep.markdown)
    else:
        ext = "csv" if args.format == "csv" else "tex"
        for f in rep.files:
            if f.suffix == f".{ext}":
                print(f.read_text())
    print(f"tinyscope: wrote {len(rep.files)} file(s) under {args.folder}/report/", file=sys.stderr)
    return 0
