"""`tinyscope reproduce`: plan the runs a selection of claims needs, run them, judge the claims.

A plan is the set of distinct runs (experiment, preset, ``--set`` values, seed) the claims read;
one run serves every claim that reads it. Runs go through the sweep machinery into
``OUT/runs/<experiment>-<preset>/<setting>/s<seed>`` (resumable: rerunning the same command
skips complete runs and resumes interrupted ones), then every claim is measured from the run
directories and the outcome written to ``OUT/claims.json`` and ``OUT/claims.md`` (the paper's
tables laid out beside the measured ones, cell by cell). With ``record`` the measurements go
into the study ledgers (:mod:`tinyscope.runs.ledger`) and ``docs/results/<study>.md``; with
``zoo`` the median of the seeds that meet a met claim's target becomes a zoo entry (:mod:`tinyscope.runs.zoo`).
"""
from __future__ import annotations

import json
import logging
import math
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from tinyscope import __version__
from tinyscope.errors import ConfigError
from tinyscope.runs import ledger, registry, zoo
from tinyscope.runs.claims import (
    Claim,
    ClaimError,
    Measurement,
    RunRecord,
    RunSet,
    all_claims,
    measure_claim,
    median_seed,
    time_to,
)
from tinyscope.sweep.grid import RunSpec, setting_name
from tinyscope.train.checkpoint import atomic_write_bytes, atomic_write_json

log = logging.getLogger(__name__)
SMOKE = "smoke"


@dataclass(frozen=True)
class PlannedRun:
    run_set: RunSet
    seed: int
    spec: RunSpec
    estimate_s: float | None
    estimate_from_siblings: bool = False  # no run of this setting recorded: estimated from other settings


@dataclass
class Plan:
    """The claims chosen (at the plan's preset), the runs they need, and the claims left out."""

    claims: list[Claim]
    runs: list[PlannedRun]
    out: Path
    skipped: list[tuple[Claim, str]] = field(default_factory=list)
    n_seeds: int | None = None
    companions: list[Claim] = field(default_factory=list)   # in ``claims``: added because they read the same runs

    def is_done(self, run: PlannedRun) -> bool:
        return (self.out / run.spec.rel_path / "results.json").exists() and not self.is_stale(run)

    def is_stale(self, run: PlannedRun) -> bool:
        """A run directory trained with an older version of its preset (its config.json is not
        the training the preset does today, :func:`~tinyscope.runs.rundir.trained_as`)."""
        return _stale(self.out / run.spec.rel_path, run.run_set, run.seed)

    def stale(self) -> list[PlannedRun]:
        return [r for r in self.runs if self.is_stale(r)]

    def run_dir(self, run_set: RunSet, seed: int) -> Path:
        return self.out / _spec(run_set, seed).rel_path


def _stale(run_dir: Path, rs: RunSet, seed: int) -> bool:
    from tinyscope.runs.rundir import trained_as

    return (run_dir / "config.json").exists() and not trained_as(run_dir, rs.experiment, rs.preset, seed,
                                                                 list(rs.overrides))


def _spec(rs: RunSet, seed: int) -> RunSpec:
    return RunSpec(rs.experiment, rs.preset, int(seed), (), tuple(rs.overrides), setting_name(_pairs(rs.overrides)),
                   group=f"{rs.experiment}-{rs.preset}")


def _pairs(overrides: tuple[str, ...]) -> list[tuple[str, str]]:
    return [tuple(o.split("=", 1)) if "=" in o else (o, "") for o in overrides]


def plan(claims: list[Claim], out: str | Path, preset: str | None = None, n_seeds: int | None = None,
         include_gpu: bool = False) -> Plan:
    """The runs ``claims`` need with ``n_seeds`` seeds (None: each claim's own).

    preset: None takes every claim at its own preset; a preset P takes only the claims declared
    at P (and the computed ones), except ``smoke``, which runs every claim at the smoke preset —
    a check of the whole path in seconds, never recorded in a ledger. Claims that need a GPU are
    left out without one unless ``include_gpu``. Every run's config is built first, so a bad
    setting fails before any run starts."""
    if n_seeds is not None and n_seeds < 1:
        raise ConfigError(f"--n-seeds {n_seeds} must be >= 1")
    import torch

    gpu = torch.cuda.is_available()
    out = Path(out)
    if preset is not None and preset != SMOKE:
        known = sorted({p for c in claims for rs in c.runs for p in registry.get(rs.experiment).presets})
        if known and preset not in known:
            raise ConfigError(f"--preset {preset}: none of the chosen claims' experiments has it (they have "
                              f"{', '.join(known)})")
    chosen, skipped = [], []
    for c in claims:
        if preset == SMOKE:
            c = c.at(SMOKE)
        elif preset is not None and c.runs and c.preset != preset:
            skipped.append((c, f"declared at preset {c.preset}"))
            continue
        if c.needs_gpu and not (gpu or include_gpu) and c.runs and c.preset == "paper":
            skipped.append((c, "needs the paper preset on a GPU (--include-gpu runs it anyway)"))
            continue
        chosen.append(c)
    calibration = ledger.calibrate() if any(c.runs for c in chosen) else None
    timings: dict[str, dict] = {}
    runs: dict[tuple[str, int], PlannedRun] = {}
    for c in chosen:
        for rs in c.runs:
            exp = registry.get(rs.experiment)
            if rs.preset not in exp.presets:
                raise ConfigError(f"claim {c.id}: {exp.name} has no preset {rs.preset!r} "
                                  f"(it has {', '.join(exp.presets)})")
            if exp.study not in timings:
                timings[exp.study] = ledger.read_ledger(exp.study)["timings"]
            for seed in rs.seed_list(n_seeds):
                if (rs.key, seed) in runs:
                    continue
                try:
                    exp.config(rs.preset, seed, list(rs.overrides))
                except ConfigError as exc:
                    raise ConfigError(f"claim {c.id}: {exc}") from None
                est = ledger.estimate(timings[exp.study], rs.key, calibration)
                rough = est is None
                if rough:
                    est = ledger.estimate_from_siblings(timings[exp.study], rs.key, calibration)
                runs[(rs.key, seed)] = PlannedRun(rs, seed, _spec(rs, seed), est, rough and est is not None)
    p = Plan(chosen, list(runs.values()), out, skipped, n_seeds)
    if preset != SMOKE:
        p.companions = companions(p)
        p.claims += p.companions
    return p


def companions(p: Plan) -> list[Claim]:
    """The claims ``p`` did not choose that read only runs it plans, every seed of them: a run
    judges every claim that reads it, so reproducing Table 1's row records Table 13's cells of the
    same runs too, and no claim is left "not run" beside runs that measure it."""
    planned = {(r.run_set.key, r.seed) for r in p.runs}
    have = {c.id for c in p.claims} | {c.id for c, _ in p.skipped}
    return [c for c in all_claims() if c.id not in have and c.runs
            and all((rs.key, s) in planned for rs in c.runs for s in rs.seed_list(p.n_seeds))]


def format_duration(s: float | None, rough: bool = False) -> str:
    """``s`` seconds as "40 s", "12 min" or "2.5 h"; ``rough`` marks an estimate made from other
    settings with "≈"."""
    if s is None:
        return "unknown"
    if math.isinf(s):
        return "never"
    mark = "≈" if rough else ""
    if s < 90:
        return f"{mark}{s:.0f} s"
    if s < 5400:
        return f"{mark}{s / 60:.0f} min"
    return f"{mark}{s / 3600:.1f} h"


def makespan(durations: list[float], jobs: int) -> float:
    """Wall time of running ``durations`` in the given order on ``jobs`` workers, each run taken
    by the first worker to come free (how the sweep hands them out): three 30-minute runs on
    two jobs take 60 minutes, not 45."""
    import heapq

    free_at = [0.0] * max(1, jobs)
    for d in durations:
        heapq.heappush(free_at, heapq.heappop(free_at) + d)
    return max(free_at)


def run_command(r: PlannedRun, out: Path) -> str:
    """The `tinyscope run` command line of one planned run, into its folder under ``out``."""
    import shlex

    rs = r.run_set
    sets = "".join(f" --set {shlex.quote(o)}" for o in rs.overrides)
    return f"tinyscope run {rs.experiment} --preset {rs.preset} --seed {r.seed}{sets} --out {shlex.quote(str(out / r.spec.rel_path))}"


def format_plan(p: Plan, jobs: int, commands: bool = False) -> str:
    """One line per run set (experiment, preset, setting): seeds, done, estimated time per run;
    ``commands``: then every run still to do, in the order it runs, as its `tinyscope run` command."""
    groups: dict[str, list[PlannedRun]] = {}
    for r in p.runs:
        groups.setdefault(r.run_set.key, []).append(r)
    rows = [("experiment", "preset", "--set", "seeds", "done", "per run", "remaining")]
    todo_runs = [r for r in p.runs if not p.is_done(r)]
    remaining, unknown, rough = 0.0, 0, False
    for runs in groups.values():
        rs = runs[0].run_set
        todo = [r for r in runs if not p.is_done(r)]
        est, from_siblings = runs[0].estimate_s, runs[0].estimate_from_siblings
        if todo and est is None:
            unknown += len(todo)
        rough |= bool(todo) and from_siblings
        remaining += (est or 0.0) * len(todo)
        rows.append((rs.experiment, rs.preset, " ".join(rs.overrides) or "–", ",".join(str(r.seed) for r in runs),
                     str(len(runs) - len(todo)), format_duration(est, from_siblings),
                     format_duration(est * len(todo), from_siblings) if est is not None
                     else ("0 s" if not todo else "unknown")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows] if groups else []
    n_todo = sum(not p.is_done(r) for r in p.runs)
    total = format_duration(makespan([r.estimate_s or 0.0 for r in todo_runs], jobs), rough)
    if unknown:
        total = f"{total} + {unknown} run(s) of unknown length" if remaining else "unknown"
    computed = sum(not c.runs for c in p.claims)
    also = f", {len(p.companions)} of them because they read the same runs" if p.companions else ""
    lines.append(f"{len(p.claims)} claim(s) ({computed} computed without training{also}); {len(p.runs)} run(s), "
                 f"{len(p.runs) - n_todo} already complete; estimated time at {jobs} job(s): {total}")
    if rough:
        lines.append("  ≈: no run of that setting recorded; the median of the same experiment and preset at "
                     "other --set values")
    lines += [f"  left out: {c.id}: {why}" for c, why in p.skipped]
    if commands and todo_runs:
        lines += ["the runs, in order:"] + [f"  {run_command(r, p.out)}" for r in todo_runs]
    stale = p.stale()
    if stale:
        lines.append(f"  {len(stale)} run(s) under {p.out} trained with an older version of their preset, e.g. "
                     f"{p.out / stale[0].spec.rel_path}: not counted; delete them or choose another --out")
    return "\n".join(lines)


def execute(p: Plan, jobs: int = 1, threads: int | None = None, progress: bool = True, backend: str = "local",
            address: str | None = None):
    """Run every planned run that is not complete (see :func:`tinyscope.sweep.core.run_specs`)."""
    from tinyscope.errors import TinyscopeError
    from tinyscope.sweep.core import run_specs

    stale = p.stale()
    if stale:
        raise TinyscopeError(f"{len(stale)} run(s) under {p.out} were trained with an older version of their preset "
                             f"(e.g. {p.out / stale[0].spec.rel_path}); delete them or choose another --out")
    record = {"claims": [c.id for c in p.claims], "n_seeds": p.n_seeds}
    return run_specs([r.spec for r in p.runs], p.out, record, desc="reproduce", jobs=jobs, backend=backend,
                     address=address, threads=threads, progress=progress, run_report="none")


# ---------------------------------------------------------------- measuring the claims
@dataclass
class ClaimResult:
    claim: Claim
    measurement: Measurement
    extras: dict
    run_dirs: dict[int, Path]   # the first run set's finished runs, by seed
    error: str | None = None

    @property
    def zoo_seeds(self) -> dict[int, float]:
        """Seeds that may back a met claim in the zoo: those whose own value meets its target (a
        claim met by the median or a fraction of seeds has seeds that do not)."""
        if self.measurement.verdict != "met" or not self.run_dirs:
            return {}
        target = self.claim.target
        return {s: v for s, v in self.measurement.per_seed.items()
                if s in self.run_dirs and (target is None or target.met(v))}

    @property
    def zoo_seed(self) -> int | None:
        """The median of :attr:`zoo_seeds`."""
        return median_seed(self.zoo_seeds)


def runs_of(p: Plan, claim: Claim) -> list[dict[int, RunRecord]]:
    """The finished runs of each of the claim's run sets, by seed."""
    out = []
    for rs in claim.runs:
        found = {}
        for seed in rs.seed_list(p.n_seeds):
            d = p.run_dir(rs, seed)
            if (d / "results.json").exists() and not _stale(d, rs, seed):
                found[seed] = RunRecord(seed, json.loads((d / "results.json").read_text()), d)
        out.append(found)
    return out


def collect(p: Plan) -> list[ClaimResult]:
    """Measure every claim of the plan from the runs on disk (missing runs: fewer seeds)."""
    results = []
    for c in p.claims:
        runs = runs_of(p, c) if c.runs else []
        try:
            m = measure_claim(c, runs)
            error = None
        except Exception as exc:  # noqa: BLE001 - one claim that cannot be measured must not lose the others
            m = Measurement(math.nan, math.nan, 0, {}, "not run")
            error = str(exc) if isinstance(exc, ClaimError) else f"{type(exc).__name__}: {exc}"
            log.warning("claim %s could not be measured: %s", c.id, error)
        extras = _extras(c, runs, m) if error is None else {}
        results.append(ClaimResult(c, m, extras, {s: r.path for s, r in runs[0].items()} if runs else {}, error))
    return results


def _extras(c: Claim, runs, m: Measurement) -> dict:
    """For a per-seed metric judged against a bound: how many seeds meet the bound, and the
    median training time until an evaluation first met it (from metrics.jsonl, or the claim's own
    ``time_to_target`` measure, whose per-seed times are kept too)."""
    if not m.per_seed or c.measure is None or c.target.op == "within":
        return {}
    out = {"seeds_met": sum(c.target.met(v) for v in m.per_seed.values()), "seeds": m.n}
    if c.time_to_target is not None:
        try:
            times = c.time_to_target(runs)
        except ClaimError:  # a run without metrics.jsonl: the value stands, the times are left out
            times = {}
        if times:
            out["median_time_to_target_s"] = statistics.median(times.values())
            out["time_to_target_s"] = {str(s): _plain(t) for s, t in sorted(times.items())}
        return out
    key = c.measure.key
    logged = key and runs and any(key in h for r in runs[0].values() for h in r.history() if h.get("split") == "eval")
    if c.aggregate != "fraction" and c.measure.final_only and logged:
        try:
            times = time_to(key, c.target.op, c.target.value)(runs)
        except ClaimError:
            times = {}
        if times:
            out["median_time_to_target_s"] = statistics.median(times.values())
    return out


# ---------------------------------------------------------------- outputs
def result_record(r: ClaimResult) -> dict:
    c, m = r.claim, r.measurement
    rec = {"id": c.id, "where": c.where, "row": c.row, "column": c.column, "statement": c.statement,
           "paper": {"text": c.paper.text, "value": c.paper.value, "sd": c.paper.sd},
           "target": c.target.describe(c.unit), "aggregate": c.aggregate, "unit": c.unit, "note": c.note,
           "preset": c.preset, "measure": c.measure.label if c.measure else "computed", **m.to_dict(),
           "extras": {k: _plain(v) for k, v in r.extras.items()}}
    if r.error:
        rec["error"] = r.error
    return rec


def _plain(v):
    return "inf" if isinstance(v, float) and math.isinf(v) else v


def format_measured(c: Claim, value: float, sd: float, n: int, aggregate: str) -> str:
    """``98.1 ± 0.4% (n=5)``, ``0.2% (median, n=10)``, ``7/10`` (fraction), ``250`` (computed)."""
    from tinyscope.report.stats import Stat

    if n == 0 or value is None or math.isnan(value):
        return "–"
    if aggregate == "fraction":
        return f"{round(value * n)}/{n}"
    if aggregate == "mean" and sd == 0:  # every seed gave the same value
        text = f"{c.format(value)} ± 0"
    elif aggregate == "mean" and not math.isnan(sd) and math.isfinite(value):
        pct = c.unit == "%"
        text = Stat(value, sd, n).format(scale=100.0 if pct else 1.0) + ("%" if pct else f"{c.unit and ' ' + c.unit}")
    else:
        text = c.format(value)
    if not c.runs:
        return text
    label = {"median": "median, ", "min": "worst, ", "max": "best, "}.get(aggregate, "")
    return f"{text} ({label}n={n})"


VERDICT_MARK = {"met": "✓", "not met": "✗", "not run": "·", "needs GPU": "GPU"}


def markdown(records: list[tuple[Claim, dict]], title: str) -> str:
    """The claims as markdown: each paper table laid out cell by cell (paper | measured, with
    the verdict), then the other claims as a list."""
    lines = [f"# {title}", ""]
    by_where: dict[tuple[str, str], list[tuple[Claim, dict]]] = {}
    for c, rec in records:
        by_where.setdefault((c.study, c.where), []).append((c, rec))
    lists = []
    for (study, where), items in by_where.items():
        if all(c.row and c.column for c, _ in items) and len(items) > 1:
            lines += _grid(study, where, items)
        else:
            lists += items
    if lists:
        lines += ["| claim | where | paper | measured | target | verdict |", "|---|---|---|---|---|---|"]
        for c, rec in lists:
            where = ", ".join(x for x in (c.where, c.row, c.column) if x)
            lines.append(f"| `{c.id}` | {where} | {c.paper.text} | {_measured(c, rec)} | {c.target.describe(c.unit)} "
                         f"| {rec.get('verdict', 'not run')} |")
        lines.append("")
    notes = [(c, rec) for c, rec in records if c.note]
    if notes:
        lines += ["Notes:", ""] + [f"- `{c.id}`: {c.note}" for c, _ in notes] + [""]
    return "\n".join(lines)


def _measured(c: Claim, rec: dict) -> str:
    if not rec or rec.get("n", 0) == 0:
        return "–"
    text = format_measured(c, _num(rec.get("value")), _num(rec.get("sd")), int(rec.get("n", 0)), c.aggregate)
    ex = rec.get("extras") or {}
    if "seeds_met" in ex and c.aggregate != "fraction":
        text += f"; {ex['seeds_met']}/{ex['seeds']} seeds meet it"
    if "median_time_to_target_s" in ex:
        text += f", median {format_duration(_num(ex['median_time_to_target_s']))} to it"
    return text


def _num(v) -> float:
    return math.nan if v is None else float(v)


def _grid(study: str, where: str, items: list[tuple[Claim, dict]]) -> list[str]:
    rows = list(dict.fromkeys(c.row for c, _ in items))
    cols = list(dict.fromkeys(c.column for c, _ in items))
    cell = {(c.row, c.column): (c, rec) for c, rec in items}
    out = [f"## {study}: {where}", "", "Each cell: the paper's value → the measured one, and the verdict.", "",
           "| | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for row in rows:
        cells = []
        for col in cols:
            if (row, col) not in cell:
                cells.append("")
                continue
            c, rec = cell[(row, col)]
            cells.append(f"{c.paper.text} → {_measured(c, rec)} {VERDICT_MARK.get(rec.get('verdict', 'not run'), '')}")
        out.append(f"| {row} | " + " | ".join(cells) + " |")
    return out + [""]


def write_outputs(p: Plan, results: list[ClaimResult]) -> tuple[Path, Path]:
    records = [result_record(r) for r in results]
    atomic_write_json(p.out / "claims.json", {"claims": records,
                                              "skipped": [{"id": c.id, "why": why} for c, why in p.skipped]})
    md = markdown([(r.claim, rec) for r, rec in zip(results, records)], "Claims reproduced")
    atomic_write_bytes(p.out / "claims.md", md.encode())
    return p.out / "claims.json", p.out / "claims.md"


def recordable(results: list[ClaimResult]) -> list[ClaimResult]:
    """The results that stand as a claim's measurement: made at the claim's own preset, on every
    seed it lists. Fewer finished seeds (``--n-seeds``, ``--collect-only`` while runs are still
    to come) make a check, which neither the ledger nor the zoo keeps."""
    own = {c.id: c for c in all_claims()}
    out = []
    for r in results:
        base = own.get(r.claim.id)
        if base is None or r.measurement.n == 0 or r.claim.preset != base.preset:
            continue
        if r.claim.runs and len(r.run_dirs) < len(base.runs[0].seeds):
            continue
        out.append(r)
    return out


def record(p: Plan, results: list[ClaimResult], command: str, zoo_names: dict[str, str] | None = None,
           root: Path | None = None) -> list[Path]:
    """Write the measurements made at each claim's own preset into the study ledgers, with the
    wall times of their runs (for later estimates); returns the ledgers written."""
    calibration = ledger.calibrate()
    by_study: dict[str, list[ClaimResult]] = {}
    for r in recordable(results):
        by_study.setdefault(r.claim.study, []).append(r)
    written = []
    for study, items in by_study.items():
        data = ledger.read_ledger(study, root)
        for r in items:
            m = r.measurement
            rec = {**m.to_dict(), "preset": r.claim.preset, "measure": r.claim.measure.label if r.claim.measure else
                   "computed", "seeds": sorted(m.per_seed), "extras": {k: _plain(v) for k, v in r.extras.items()},
                   "command": command, "measured": time.strftime("%Y-%m-%d"),
                   "machine": ledger.runs_hardware(r.run_dirs.values()) if r.run_dirs else ledger.machine(),
                   "tinyscope_version": __version__}
            if zoo_names and r.claim.id in zoo_names:
                rec["zoo"] = zoo_names[r.claim.id]
            data["claims"][r.claim.id] = rec
            for rs in r.claim.runs:
                walls = [json.loads((p.run_dir(rs, s) / "results.json").read_text()).get("wall_time")
                         for s in rs.seed_list(p.n_seeds) if (p.run_dir(rs, s) / "results.json").exists()]
                ledger.record_timing(data, rs.key, [w for w in walls if isinstance(w, (int, float))], calibration)
        written.append(ledger.write_ledger(study, data, root))
    return written


def export_entry(run_path: Path, name: str, claims: list[str], command: str, root: Path | None = None) -> zoo.ZooEntry:
    """Copy the selected model of the run at ``run_path`` into the zoo as ``name`` (replacing an
    older entry of that name): config.json, results.json, the weights only, zoo.json, README.md."""
    import torch

    from tinyscope.runs.rundir import load_run
    from tinyscope.train import checkpoint as ckpt

    root = root or zoo.zoo_dir()
    run = load_run(run_path, "best")
    state = ckpt.unwrap(run.model).state_dict()
    n_bytes = sum(t.numel() * t.element_size() for t in state.values())
    dtype = zoo.half_dtype(state) if n_bytes > zoo.HALF_ABOVE_BYTES else "float32"
    if dtype != "float32":
        state = {k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v for k, v in state.items()}
    tmp = root / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "checkpoints").mkdir(parents=True)
    shutil.copy2(run_path / "config.json", tmp / "config.json")
    shutil.copy2(run_path / "results.json", tmp / "results.json")
    ckpt.save_tensors(tmp / "checkpoints" / "best.safetensors", {k: v.contiguous() for k, v in state.items()},
                      {"step": run.step, "zoo_dtype": dtype})
    cfg_record = json.loads((run_path / "config.json").read_text())
    info = {"name": name, "experiment": run.experiment.name, "preset": run.preset, "seed": run.cfg.seed,
            "step": run.step, "stage": run.stage, "dtype": dtype, "claims": sorted(claims), "command": command,
            "recheck": f"tinyscope eval zoo:{name} --seed 12345", "exported": time.strftime("%Y-%m-%d"),
            "tinyscope_version": cfg_record.get("tinyscope_version")}
    ckpt.atomic_write_json(tmp / "zoo.json", info)
    (tmp / "README.md").write_text(f"`{command}` (seed {run.cfg.seed}; weights {dtype}) backs "
                                   f"{', '.join(f'`{c}`' for c in sorted(claims))}; recheck with "
                                   f"`tinyscope eval zoo:{name} --seed 12345`.\n")
    final = root / name
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    total = sum(e.size_bytes for e in zoo.entries(root))
    if total > zoo.ZOO_LIMIT_BYTES:
        raise ConfigError(f"the zoo is now {total / 2**20:.1f} MB, over its {zoo.ZOO_LIMIT_BYTES // 2**20} MB limit; "
                          f"remove an entry (zoo/{name} was written)")
    return zoo.ZooEntry(name, final, info)


def export_zoo(p: Plan, results: list[ClaimResult]) -> dict[str, str]:
    """Zoo entries for the first run set of every met, :func:`recordable` claim that a fresh evaluation of one run
    can recheck (a measure of the final evaluation) and whose ``zoo`` is not "none": its median
    seed, named ``<experiment>-<preset>[-<setting>]``, or, when a claim on the run set asks for
    "all", every finished seed, each named with ``-s<seed>`` appended. The entries of a run set
    serve every such claim on it. Returns claim id -> the entry of its median seed (of the run
    set's first such claim where that seed has none)."""
    # run set -> (run set, its first claim's seed, seed -> the claims it backs, claim -> its own seed)
    chosen: dict[str, tuple[RunSet, int, dict[int, set[str]], dict[str, int]]] = {}
    for r in recordable(results):
        if r.zoo_seed is None or not r.claim.runs or not r.claim.measure.final_only or r.claim.zoo == "none":
            continue
        rs = r.claim.runs[0]
        if rs.key not in chosen:
            chosen[rs.key] = (rs, r.zoo_seed, {}, {})
        _, first, backed, ids = chosen[rs.key]
        own = first if first in r.zoo_seeds else r.zoo_seed  # one entry serves as many claims as it can
        for seed in (r.zoo_seeds if r.claim.zoo == "all" else (own,)):
            backed.setdefault(seed, set()).add(r.claim.id)
        ids[r.claim.id] = own
    names = {}
    for rs, median, backed, ids in chosen.values():
        base = f"{rs.experiment}-{rs.preset}" + (f"-{setting_name(_pairs(rs.overrides))}" if rs.overrides else "")
        name_of = {s: f"{base}-s{s}" if len(backed) > 1 else base for s in backed}
        for seed in sorted(backed):
            export_entry(p.run_dir(rs, seed), name_of[seed], sorted(backed[seed]), rs.command(seed))
        names.update({i: name_of.get(own, name_of[median]) for i, own in ids.items()})
    return names


def docs_results_dir() -> Path | None:
    """``docs/results`` of the source tree this package runs from (None: an installed package)."""
    d = Path(__file__).resolve().parents[3] / "docs" / "results"
    return d if d.is_dir() else None


BEGIN, END = "<!-- claims:begin (written by `tinyscope reproduce`; do not edit) -->", "<!-- claims:end -->"


def ledger_markdown(study: str) -> str:
    """The claims section of docs/results/<study>.md, from the study's ledger."""
    data = ledger.read_ledger(study)["claims"]
    claims = all_claims(study)
    body = markdown([(c, data.get(c.id, {})) for c in claims], f"Claims of the {study} study")
    dated = sorted({(rec.get("measured", ""), rec.get("machine", ""), rec.get("command", ""))
                    for rec in data.values() if rec.get("measured")})
    src = ["", "Measured (date, machine, command):", ""] + [f"- {d}, {m}: `{cmd}`" for d, m, cmd in dated]
    return body.replace(f"# Claims of the {study} study", "## Claims (from the ledger)", 1) + "\n".join(src) + "\n"


def write_docs(study: str) -> Path | None:
    """Replace (or add at the top) the claims section of docs/results/<study>.md."""
    d = docs_results_dir()
    if d is None:
        return None
    path = d / f"{study}.md"
    text = path.read_text() if path.exists() else f"# {study}: measured results\n\n"
    section = f"{BEGIN}\n{ledger_markdown(study)}{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        first, _, rest = text.partition("\n")
        text = f"{first}\n\n{section}\n{rest}"
    atomic_write_bytes(path, text.encode())
    return path
