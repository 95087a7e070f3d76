"""``tinyscope claims`` (every paper claim, its measured value and verdict), ``tinyscope reproduce``
(plan, run and judge the claims) and ``tinyscope zoo`` (the trained models behind them)."""
from __future__ import annotations

import json
import signal
import sys

FORMATS = ("table", "markdown", "json")


def register(sub) -> None:
    p = sub.add_parser("claims", help="every paper claim: the paper's value, the measured one, the verdict")
    p.add_argument("study", nargs="?", default=None, help="one study (default: all)")
    p.add_argument("--format", default="table", choices=FORMATS,
                   help="table (default), markdown (as docs/results holds it) or json (every field)")
    p.set_defaults(func=cmd_claims)

    p = sub.add_parser("reproduce", help="run what a study's (or some claims') reproduction needs and judge the claims")
    p.add_argument("targets", nargs="+", metavar="STUDY|CLAIM", help="study names, experiment names, claim ids or id prefixes")
    p.add_argument("--preset", default=None, help="only the claims declared at this preset (default: every claim at its own); "
                        "smoke: every claim at the smoke preset, a quick check that is never recorded")
    p.add_argument("--n-seeds", dest="seeds", type=int, default=None, metavar="N",
                   help="seeds per claim (default: each claim's own list; N takes its first N, then the next integers)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (default 1; 2 on a 2-core machine)")
    p.add_argument("--threads", type=int, default=None, help="torch threads per run (default: cores // jobs)")
    p.add_argument("--out", default=None, help="folder of the runs and of claims.json / claims.md "
                                             "(default: reproduce/<targets>)")
    p.add_argument("--dry-run", action="store_true", help="show the plan and its estimated time; run nothing")
    p.add_argument("--no-record", action="store_true",
                   help="do not write the measurements into the study ledgers and docs/results")
    p.add_argument("--zoo", action="store_true", help="export the median seed of every met claim's runs to the zoo")
    p.add_argument("--include-gpu", action="store_true", help="also run claims that need the paper preset on a GPU")
    p.add_argument("--computed-only", action="store_true",
                   help="only the claims computed from code (parameter counts, constructions): no training")
    p.add_argument("--collect-only", action="store_true",
                   help="start no run: measure the claims from the runs already finished under --out (fewer seeds "
                        "where some are missing; each claim shows its n), e.g. while a long reproduction trains")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("zoo", help="the trained models behind the met claims: list them, or print one's path")
    zsub = p.add_subparsers(dest="zoo_command", metavar="list|path", parser_class=type(p))
    zl = zsub.add_parser("list", help="every zoo entry: experiment, preset, seed, size, the claims it backs")
    zl.add_argument("--format", default="table", choices=["table", "json"], help="table (default) or json")
    zl.set_defaults(func=cmd_zoo_list)
    zp = zsub.add_parser("path", help="the run directory of a zoo entry")
    zp.add_argument("name", help="a zoo entry (`tinyscope zoo list` names them)")
    zp.set_defaults(func=cmd_zoo_path)
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])


# ---------------------------------------------------------------- claims
def claim_rows(study: str | None) -> list[dict]:
    """Every claim (of one study) with its ledger record: the rows `tinyscope claims` prints."""
    from tinyscope.runs import ledger
    from tinyscope.runs.claims import all_claims
    from tinyscope.runs.reproduce import _measured

    rows, ledgers = [], {}
    for c in all_claims(study):
        if c.study not in ledgers:
            ledgers[c.study] = ledger.read_ledger(c.study)["claims"]
        rec = ledgers[c.study].get(c.id, {})
        verdict = rec.get("verdict") or ("needs GPU" if c.needs_gpu else "not run")
        rows.append({"id": c.id, "where": ", ".join(x for x in (c.where, c.row, c.column) if x),
                     "paper": c.paper.text, "target": c.target.describe(c.unit), "measured": _measured(c, rec),
                     "verdict": verdict, "preset": c.preset, "command": rec.get("command") or c.command(),
                     "zoo": rec.get("zoo"), "measured_on": rec.get("measured"), "claim": c, "record": rec})
    return rows


def cmd_claims(args) -> int:
    from tinyscope.runs.reproduce import markdown

    rows = claim_rows(args.study)
    if args.format == "json":
        print(json.dumps([{k: v for k, v in r.items() if k not in ("claim",)} for r in rows], indent=2))
        return 0
    if args.format == "markdown":
        print(markdown([(r["claim"], r["record"]) for r in rows], "Claims"))
        return 0
    headers = ["claim", "where", "paper", "measured", "verdict", "command"]
    cells = [[r["id"], r["where"], r["paper"], r["measured"], r["verdict"], r["command"]] for r in rows]
    _print_table(headers, cells)
    counts = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(f"{len(rows)} claim(s): " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())), file=sys.stderr)
    _warn_claim_errors()
    return 0


def _warn_claim_errors() -> None:
    from tinyscope.runs.claims import CLAIM_ERRORS

    for name, error in sorted(CLAIM_ERRORS.items()):
        print(f"tinyscope: warning: the claims of {name} failed to load: {error}", file=sys.stderr)


def _print_table(headers: list[str], cells: list[list[str]]) -> None:
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


# ---------------------------------------------------------------- reproduce
def cmd_reproduce(args) -> int:
    from tinyscope.errors import ConfigError
    from tinyscope.runs import claims as claims_mod
    from tinyscope.runs import reproduce

    if args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs} must be >= 1")
    if args.collect_only and args.dry_run:
        raise ConfigError("--collect-only and --dry-run: choose one (a dry run shows what would train)")
    if not args.dry_run and not args.collect_only:  # the fork server imports torch while the plan is built
        from tinyscope.sweep.local import prestart

        prestart()
    chosen = claims_mod.select(args.targets)
    _warn_claim_errors()
    if args.computed_only:
        chosen = [c for c in chosen if not c.runs]
        if not chosen:
            raise ConfigError(f"{' '.join(args.targets)} has no computed claims")
    out = args.out or "reproduce/" + "+".join(t.replace("/", "_") for t in args.targets)[:80]
    plan = reproduce.plan(chosen, out, preset=args.preset, n_seeds=args.seeds, include_gpu=args.include_gpu)
    _preflight(plan, args)
    print(reproduce.format_plan(plan, args.jobs, commands=args.dry_run), file=sys.stderr)
    if args.dry_run:
        return 0
    command = "tinyscope reproduce " + " ".join(args.targets) + (f" --preset {args.preset}" if args.preset else "") \
        + (f" --n-seeds {args.seeds}" if args.seeds else "") + (" --computed-only" if args.computed_only else "")
    if args.collect_only:
        missing = [r for r in plan.runs if not plan.is_done(r)]
        if missing:
            print(f"tinyscope: --collect-only: {len(missing)} of {len(plan.runs)} run(s) are not finished; their "
                  f"claims are measured on fewer seeds", file=sys.stderr)
        return _measure_and_record(plan, args, command, out, failed=[])

    def stop(signum, frame):  # `kill` stops the runs cleanly, like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        result = reproduce.execute(plan, jobs=args.jobs, threads=args.threads, progress=not args.no_progress)
    except KeyboardInterrupt:
        print("tinyscope: reproduce interrupted; the same command continues it", file=sys.stderr)
        return 130
    return _measure_and_record(plan, args, command, out, failed=result.failed)


def _measure_and_record(plan, args, command: str, out: str, failed: list) -> int:
    """Measure every claim of ``plan`` from its finished runs, write claims.json / claims.md,
    record the ledgers and docs (unless --no-record), export the zoo (--zoo), print the table."""
    from tinyscope.runs import reproduce

    for path, err in failed:
        print(f"  failed: {path}: {err}  (traceback in {out}/{path}/error.txt)", file=sys.stderr)
    results = reproduce.collect(plan)
    zoo_names = reproduce.export_zoo(plan, results) if args.zoo else {}
    json_path, md_path = reproduce.write_outputs(plan, results)
    if not args.no_record:
        for path in reproduce.record(plan, results, command, zoo_names):
            print(f"tinyscope: recorded in {path}", file=sys.stderr)
        for study in sorted({r.claim.study for r in results}):
            doc = reproduce.write_docs(study)
            if doc is not None:
                print(f"tinyscope: wrote the claims section of {doc}", file=sys.stderr)
    cells = [[r.claim.id, r.claim.paper.text, reproduce._measured(r.claim, reproduce.result_record(r)),
              r.measurement.verdict + (f" ({r.error})" if r.error else "")] for r in results]
    _print_table(["claim", "paper", "measured", "verdict"], cells)
    for name in sorted(set(zoo_names.values())):
        print(f"tinyscope: zoo entry zoo:{name}", file=sys.stderr)
    print(f"tinyscope: {json_path} and {md_path}", file=sys.stderr)
    return 1 if failed else 0


def _preflight(plan, args) -> None:
    """The checks `tinyscope sweep` makes before writing: the output folder (not for a dry run),
    --threads, and device, threads and memory of each distinct trained setting."""
    from pathlib import Path

    from tinyscope.commands._preflight import check_machine, check_out, cores
    from tinyscope.errors import ConfigError
    from tinyscope.runs import registry

    if not args.dry_run:
        check_out(Path(plan.out))
    if args.threads is not None and not 1 <= args.threads <= cores():
        raise ConfigError(f"--threads {args.threads} must be between 1 and {cores()} (the cores this process may use)")
    seen = set()
    for r in plan.runs:
        exp = registry.get(r.run_set.experiment)
        if r.run_set.key in seen or not exp.trainable:
            continue
        seen.add(r.run_set.key)
        check_machine(exp, exp.config(r.run_set.preset, r.seed, list(r.run_set.overrides)), list(r.run_set.overrides))


# ---------------------------------------------------------------- zoo
def cmd_zoo_list(args) -> int:
    from tinyscope.runs import zoo

    rows = zoo.entries()
    if args.format == "json":
        print(json.dumps([{**e.info, "path": str(e.path), "size_bytes": e.size_bytes} for e in rows], indent=2))
        return 0
    cells = [[e.name, e.info.get("experiment", ""), e.info.get("preset", ""), str(e.info.get("seed", "")),
              f"{e.size_bytes / 1024:.0f} KB", ", ".join(e.info.get("claims", []))] for e in rows]
    _print_table(["name", "experiment", "preset", "seed", "size", "claims"], cells)
    total = sum(e.size_bytes for e in rows)
    print(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}, {total / 2**20:.2f} MB of {zoo.ZOO_LIMIT_BYTES // 2**20} MB "
          f"in {zoo.zoo_dir()}", file=sys.stderr)
    return 0


def cmd_zoo_path(args) -> int:
    from tinyscope.runs import zoo

    print(zoo.resolve(f"{zoo.ZOO_PREFIX}{args.name}"))
    return 0
