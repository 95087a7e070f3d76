"""Claims: a number a paper reports, the runs that reproduce it, and how the two are compared.

A :class:`Claim` names

* where it stands in the paper (``where``: "Table 1", "Fig. 3", "Sec. 4.2"; ``row`` and
  ``column`` for a table cell) and what the paper says (``paper``: the value as printed, with
  its ± where the paper gives one);
* the runs that measure it (``runs``: one or more :class:`RunSet` — an experiment, a preset,
  ``--set`` values and seeds) and the number taken from each run (``measure``, a
  :class:`Measure`: a key of results.json, or a function of several runs paired by seed, such as
  a ratio or the time until a metric first reaches a threshold);
* how the seeds are pooled (``aggregate``: mean ± sample SD, median, or the fraction of seeds
  that reach a per-seed threshold) and how the pooled value is judged (``target``: at least,
  at most, or within a tolerance of a value, stated in the claim, not inferred);
* ``note``: where the paper's protocol differs from the preset's; ``needs_gpu``: the claim is
  reached only by the ``paper`` preset, on a GPU.

A claim with ``compute`` instead of runs is a number computed from code alone (a parameter count
of a preset's model, say): `tinyscope reproduce` evaluates it without training.

Studies declare their claims in ``studies/<study>/claims.py`` and hand them out through
:meth:`Experiment.claims`; :mod:`tinyscope.runs.ledger` keeps the measured values and
:mod:`tinyscope.runs.reproduce` plans and runs what a selection of claims needs.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tinyscope.errors import ConfigError, TinyscopeError

AGGREGATES = ("mean", "median", "fraction", "min", "max")
VERDICTS = ("met", "not met", "not run", "needs GPU")
_ID = re.compile(r"[a-z0-9_]+(/[A-Za-z0-9_.=+\-]+)+")


class ClaimError(TinyscopeError):
    """A claim could not be measured from the runs given (a missing metric, a missing run)."""


# ---------------------------------------------------------------- the runs a claim reads
@dataclass(frozen=True)
class RunSet:
    """Runs of one experiment at one preset and setting (``overrides``: ``--set`` values), over seeds.

    seeds: the seeds this claim is reproduced with; ``--n-seeds N`` (`tinyscope reproduce`) takes the first N, continued
    by consecutive integers when N is larger."""

    experiment: str
    preset: str = "cpu"
    overrides: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)

    def __post_init__(self):
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"RunSet({self.experiment!r}).seeds must be distinct and non-empty, got {self.seeds}")
        if isinstance(self.overrides, str):
            raise ConfigError(f"RunSet({self.experiment!r}).overrides must be a tuple of KEY=VALUE strings")

    def seed_list(self, n: int | None = None) -> list[int]:
        seeds = list(self.seeds)
        if n is None:
            return seeds
        nxt = max(seeds) + 1
        while len(seeds) < n:
            seeds.append(nxt)
            nxt += 1
        return seeds[:n]

    def at(self, preset: str | None) -> "RunSet":
        """The same runs at another preset (None: unchanged)."""
        return self if preset in (None, self.preset) else RunSet(self.experiment, preset, self.overrides, self.seeds)

    @property
    def key(self) -> str:
        """Identifies the runs (not the seeds): ``experiment|preset|sorted --set values``."""
        return "|".join([self.experiment, self.preset, *sorted(self.overrides)])

    def command(self, seed: int | str = "S") -> str:
        sets = "".join(f" --set {o}" for o in self.overrides)
        return f"tinyscope run {self.experiment} --preset {self.preset} --seed {seed}{sets}"


def _some(names: list[str], n: int = 8) -> str:
    """At most ``n`` names, then how many more (an error line stays one readable line)."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


@dataclass
class RunRecord:
    """What a measure reads of one finished run: results.json and, on demand, metrics.jsonl."""

    seed: int
    results: dict
    path: Path | None = None
    _history: list[dict] | None = field(default=None, repr=False)

    def value(self, key: str) -> float:
        """``results["metrics"][key]``, else a top-level entry of results.json (``n_parameters``,
        ``wall_time``, ``steps``), else a dotted path (``phases.0.steps``)."""
        metrics = self.results.get("metrics", {})
        if key in metrics:
            return float(metrics[key])
        node = self.results
        for part in key.split("."):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                where = f" ({self.path})" if self.path else ""
                raise ClaimError(f"results of seed {self.seed}{where} have no metric {key!r}; "
                                 f"it has {_some(sorted(metrics)) or 'no metrics'}")
        if isinstance(node, bool) or not isinstance(node, (int, float)):
            raise ClaimError(f"results entry {key!r} of seed {self.seed} is not a number: {node!r}")
        return float(node)

    def history(self) -> list[dict]:
        """The records of metrics.jsonl (empty when the run directory is not at hand)."""
        if self._history is None:
            p = None if self.path is None else self.path / "metrics.jsonl"
            self._history = ([json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
                             if p is not None and p.exists() else [])
        return self._history


# ---------------------------------------------------------------- measures
Runs = Sequence[Mapping[int, RunRecord]]  # per RunSet of the claim: seed -> record


@dataclass(frozen=True)
class Measure:
    """A per-seed number from the runs of a claim: ``fn(runs) -> {seed: value}``, where ``runs``
    holds, for each RunSet of the claim in order, its finished runs by seed; a seed missing
    from any RunSet the measure reads gives no value.

    label: how the number is defined, shown beside the claim; final_only: it reads only the
    final evaluation of the first RunSet (results.json ``metrics``), so a fresh evaluation of
    one run (`tinyscope eval RUN --seed S`) measures it again."""

    label: str
    fn: Callable[[Runs], dict[int, float]]
    final_only: bool = False
    key: str | None = None  # the results.json key it reads, for a plain metric

    def __call__(self, runs: Runs) -> dict[int, float]:
        return self.fn(runs)


def _common_seeds(runs: Runs, sets: Sequence[int]) -> list[int]:
    common = None
    for i in sets:
        seeds = set(runs[i]) if i < len(runs) else set()
        common = seeds if common is None else common & seeds
    return sorted(common or ())


# Entries of results.json that describe the training run rather than its final evaluation: a
# fresh evaluation of the model cannot measure them again.
RUN_ENTRIES = ("steps", "wall_time", "selected_step", "eval_time", "n_parameters", "phases")


def metric(key: str, run_set: int = 0, of_training: bool = False) -> Measure:
    """The final value of ``key`` (results.json ``metrics``, or a top-level entry) in each run.
    ``of_training``: the metric records the training (a curriculum's stages reached), so a fresh
    evaluation of the selected model cannot recheck it (as for the run entries)."""
    of_training = of_training or key.split(".", 1)[0] in RUN_ENTRIES
    return Measure(key, lambda runs: {s: r.value(key) for s, r in (runs[run_set].items() if runs else ())},
                   final_only=run_set == 0 and not of_training, key=key)


def reached(key: str, op: str, threshold: float) -> Measure:
    """1 where a run's final ``key`` satisfies ``op threshold`` ("<=" or ">="), else 0; pooled
    with ``aggregate="fraction"`` it is the fraction of seeds that reach the threshold."""
    test = _comparator(op)
    return Measure(f"{key} {op} {threshold:g}", lambda runs: {s: float(test(v, threshold))
                                                           for s, v in metric(key)(runs).items()},
                   final_only=True)


def combine(label: str, fn: Callable[..., float], *keys: str) -> Measure:
    """``fn(v0, v1, ...)`` per seed, with ``v_i`` the final ``keys[i]`` of the i-th RunSet's run of
    that seed (runs paired by seed, as the papers pair their variants); e.g. a ratio or a gap."""
    def per_seed(runs: Runs) -> dict[int, float]:
        return {s: float(fn(*(runs[i][s].value(k) for i, k in enumerate(keys))))
                for s in _common_seeds(runs, range(len(keys)))}

    return Measure(label, per_seed)


def within_run(label: str, fn: Callable[..., float], *keys: str, run_set: int = 0) -> Measure:
    """``fn(v0, v1, ...)`` per seed, with ``v_i`` the final ``keys[i]`` of one run (RunSet
    ``run_set``), e.g. the gap between two layers' metrics of the same model; :func:`combine`
    reads each key from its own RunSet instead."""
    def per_seed(runs: Runs) -> dict[int, float]:
        return {s: float(fn(*(r.value(k) for k in keys))) for s, r in (runs[run_set].items() if runs else ())}

    return Measure(label, per_seed, final_only=run_set == 0)


def ratio(key_a: str, key_b: str) -> Measure:
    """RunSet 0's ``key_a`` over RunSet 1's ``key_b``, seed by seed."""
    return combine(f"{key_a} / {key_b}", lambda a, b: a / b if b else math.inf, key_a, key_b)


def difference(key_a: str, key_b: str) -> Measure:
    """RunSet 0's ``key_a`` minus RunSet 1's ``key_b``, seed by seed."""
    return combine(f"{key_a} − {key_b}", lambda a, b: a - b, key_a, key_b)


def time_to(key: str, op: str, threshold: float, clock: str = "time") -> Measure:
    """How long each run trained until an evaluation first had ``key op threshold``, read from
    metrics.jsonl: ``clock`` "time" (training seconds, interpolated between the training log's
    timestamps), "step", or "tokens"/"samples" where the log counts them. A run that never got
    there gives +inf (pooled with the median, the claim then shows that fewer than half did)."""
    test = _comparator(op)
    if clock not in ("time", "step", "tokens", "samples"):
        raise ConfigError(f"time_to clock {clock!r} must be time, step, tokens or samples")

    def per_seed(runs: Runs) -> dict[int, float]:
        out = {}
        for seed, rec in (runs[0].items() if runs else ()):
            hist = rec.history()
            if not hist:
                raise ClaimError(f"run of seed {seed} has no metrics.jsonl to read {key!r} over training from")
            out[seed] = _first_reach(hist, key, test, threshold, clock)
        return out

    return Measure(f"{clock} until {key} {op} {threshold:g}", per_seed)


def _first_reach(hist: list[dict], key: str, test, threshold: float, clock: str) -> float:
    evals = [r for r in hist if r.get("split") == "eval" and key in r]
    step = next((r["step"] for r in evals if test(float(r[key]), threshold)), None)
    if step is None:
        return math.inf
    if clock == "step":
        return float(step)
    points = [(0, 0.0)] + sorted((r["step"], float(r[clock])) for r in hist
                                 if r.get("split") == "train" and clock in r)
    if len(points) == 1:
        raise ClaimError(f"metrics.jsonl logs no {clock!r} to time {key!r} with")
    for (s0, t0), (s1, t1) in zip(points, points[1:]):
        if s0 <= step <= s1:
            return t0 + (t1 - t0) * (step - s0) / max(1, s1 - s0)
    (s0, t0), (s1, t1) = points[-2], points[-1]  # after the last log: extrapolate its rate
    return t1 + (t1 - t0) * (step - s1) / max(1, s1 - s0)


def _comparator(op: str) -> Callable[[float, float], bool]:
    if op == "<=":
        return lambda v, t: v <= t
    if op == ">=":
        return lambda v, t: v >= t
    raise ConfigError(f"comparison {op!r} must be '<=' or '>='")


# ---------------------------------------------------------------- targets and paper values
@dataclass(frozen=True)
class Target:
    """How a pooled value is judged: ``op`` is ">=" (at least ``value``), "<=" (at most) or
    "within" (``|v - value| <= tol``)."""

    op: str
    value: float
    tol: float = 0.0

    def __post_init__(self):
        if self.op not in (">=", "<=", "within"):
            raise ConfigError(f"target op {self.op!r} must be '>=', '<=' or 'within'")
        if self.op == "within" and not self.tol > 0:
            raise ConfigError("a 'within' target needs tol > 0")

    def met(self, v: float, slack: float = 0.0) -> bool:
        if math.isnan(v):
            return False
        if self.op == ">=":
            return v >= self.value - slack
        if self.op == "<=":
            return v <= self.value + slack
        return abs(v - self.value) <= self.tol + slack

    def describe(self, unit: str = "") -> str:
        f = _formatter(unit)
        if self.op == "within":
            return f"within {f(self.tol)} of {f(self.value)}"
        return f"{'≥' if self.op == '>=' else '≤'} {f(self.value)}"


def at_least(value: float) -> Target:
    return Target(">=", value)


def at_most(value: float) -> Target:
    return Target("<=", value)


def within(value: float, tol: float) -> Target:
    return Target("within", value, tol)


@dataclass(frozen=True)
class PaperValue:
    """A number as the paper reports it: ``value`` (None where the paper states only a bound or a
    word), its ``sd`` where it gives one, and ``text``, the way it is printed ("99.7 ± 0.2")."""

    text: str
    value: float | None = None
    sd: float | None = None


# ---------------------------------------------------------------- the claim
ZOO_CHOICES = ("median", "all", "none")


@dataclass(frozen=True)
class Claim:
    """One quantitative claim of a paper and how tinyscope checks it (see the module docstring).

    id: ``<study>/<where>/<name>``, e.g. ``spatial_induction/table13/eca-dedicated/tf_cell_acc``;
    unit: "%" for fractions shown as percentages, "" otherwise; experiment: the experiment that
    owns the claim (default: the first RunSet's); recheck_slack and recheck_n: how far a fresh
    evaluation of the claim's zoo run (one seed) may miss the target and still count as a
    recheck, and the size of that fresh set in the test suite (None: the run's own count); zoo:
    which of its first run set's seeds `reproduce --zoo` exports when the claim is met, "median"
    (the median seed), "all" (every finished seed, one entry each, for a paper whose models are
    compared across seeds) or "none" (the run directories only: a variant the zoo's size budget
    does not hold); time_to_target: for a claim whose value is not itself a time (a fraction of
    seeds that reach 12/12), a per-seed measure of the training seconds until the target was first
    met, recorded beside the value (the ledger's ``median_time_to_target_s``, per seed in
    ``time_to_target_s``)."""

    id: str
    where: str
    statement: str
    paper: PaperValue
    target: Target
    runs: tuple[RunSet, ...] = ()
    measure: Measure | None = None
    aggregate: str = "mean"
    row: str = ""
    column: str = ""
    unit: str = ""
    note: str = ""
    needs_gpu: bool = False
    compute: Callable[[], float] | None = None
    experiment: str = ""
    recheck_slack: float = 0.0
    recheck_n: int | None = None
    zoo: str = "median"
    time_to_target: Measure | None = None

    def __post_init__(self):
        if not _ID.fullmatch(self.id):
            raise ConfigError(f"claim id {self.id!r} must look like study/where/name (letters, digits, _ . = + -)")
        if self.aggregate not in AGGREGATES:
            raise ConfigError(f"claim {self.id}: aggregate {self.aggregate!r} must be one of {', '.join(AGGREGATES)}")
        if self.zoo not in ZOO_CHOICES:
            raise ConfigError(f"claim {self.id}: zoo {self.zoo!r} must be one of {', '.join(ZOO_CHOICES)}")
        if self.compute is None and not self.runs:
            raise ConfigError(f"claim {self.id}: give runs (and a measure) or compute")
        if self.runs and self.measure is None:
            raise ConfigError(f"claim {self.id}: runs need a measure (e.g. metric('acc'))")
        if not self.experiment:
            if not self.runs:
                raise ConfigError(f"claim {self.id}: a computed claim names its experiment")
            object.__setattr__(self, "experiment", self.runs[0].experiment)

    @property
    def study(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def preset(self) -> str:
        return self.runs[0].preset if self.runs else "—"

    def at(self, preset: str | None) -> "Claim":
        """The claim with its runs at another preset (None: its own)."""
        if preset is None or not self.runs:
            return self
        import dataclasses

        return dataclasses.replace(self, runs=tuple(r.at(preset) for r in self.runs))

    def command(self) -> str:
        """The command that reproduces the claim."""
        return f"tinyscope reproduce {self.id}"

    def format(self, v: float | None) -> str:
        return _formatter(self.unit)(v)


def _formatter(unit: str) -> Callable[[float | None], str]:
    def f(v: float | None) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if math.isinf(v):
            return "never" if v > 0 else "-inf"
        if unit == "%":
            return f"{100 * v:.4g}%"
        if float(v).is_integer() and abs(v) >= 1000:  # a count: every digit (4,722,432, not 4.722e+06)
            return f"{int(v):,}{unit and ' ' + unit}"
        return f"{v:.4g}{unit and ' ' + unit}"

    return f


# ---------------------------------------------------------------- measuring a claim
@dataclass
class Measurement:
    """A claim measured over seeds: the pooled value (mean, median, fraction, min or max), the
    sample SD of the per-seed values (mean only; NaN for one seed), the per-seed values, and the
    verdict against the claim's target."""

    value: float
    sd: float
    n: int
    per_seed: dict[int, float]
    verdict: str

    def to_dict(self) -> dict:
        return {"value": _json_float(self.value), "sd": _json_float(self.sd), "n": self.n,
                "per_seed": {str(s): _json_float(v) for s, v in sorted(self.per_seed.items())},
                "verdict": self.verdict}

    @classmethod
    def from_dict(cls, d: dict) -> "Measurement":
        return cls(_from_json(d["value"]), _from_json(d["sd"]), int(d["n"]),
                   {int(s): _from_json(v) for s, v in d.get("per_seed", {}).items()}, d["verdict"])


def _json_float(v: float) -> float | str | None:
    if v is None or math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(v)


def _from_json(v) -> float:
    if v is None:
        return math.nan
    return float(v)  # float("inf") reads "inf"


def pool(values: Sequence[float], aggregate: str) -> tuple[float, float]:
    """(pooled value, sample SD) of per-seed values under ``aggregate``."""
    if not values:
        return math.nan, math.nan
    if aggregate == "median":
        return float(statistics.median(values)), math.nan
    if aggregate == "min":
        return float(min(values)), math.nan
    if aggregate == "max":
        return float(max(values)), math.nan
    finite = [v for v in values if math.isfinite(v)]
    mean = float(sum(values) / len(values)) if len(finite) == len(values) else math.inf
    sd = statistics.stdev(values) if aggregate == "mean" and len(finite) == len(values) > 1 else math.nan
    return mean, sd


def measure_claim(claim: Claim, runs: Runs) -> Measurement:
    """Pool the claim's per-seed values and judge them (runs: seed -> record per RunSet)."""
    if claim.compute is not None:
        v = float(claim.compute())
        return Measurement(v, math.nan, 1, {}, "met" if claim.target.met(v) else "not met")
    per_seed = claim.measure(runs)
    if not per_seed:
        return Measurement(math.nan, math.nan, 0, {}, "needs GPU" if claim.needs_gpu else "not run")
    value, sd = pool(list(per_seed.values()), claim.aggregate)
    return Measurement(value, sd, len(per_seed), per_seed, "met" if claim.target.met(value) else "not met")


def median_seed(per_seed: Mapping[int, float]) -> int | None:
    """The seed whose value is the median (the lower of the middle two for an even count)."""
    if not per_seed:
        return None
    order = sorted(per_seed, key=lambda s: (per_seed[s], s))
    return order[(len(order) - 1) // 2]


# ---------------------------------------------------------------- every claim
def all_claims(study: str | None = None) -> list[Claim]:
    """Every claim of every registered experiment (or of one study), in declaration order."""
    from tinyscope.runs import registry

    if study is not None and study not in registry.study_names():
        raise ConfigError(f"unknown study {study!r}; choose one of {', '.join(registry.study_names())}")
    seen: dict[str, Claim] = {}
    for exp in registry.experiments():
        if study is not None and exp.study != study:
            continue
        try:
            declared = exp.claims()
        except Exception as exc:  # one broken claims module must not hide the others; the tests forbid it
            CLAIM_ERRORS[exp.name] = f"{type(exc).__name__}: {exc}"
            continue
        for c in declared:
            if c.id in seen and seen[c.id] is not c:
                raise ConfigError(f"claim {c.id} is declared twice")
            seen[c.id] = c
    return sorted(seen.values(), key=lambda c: (c.study, _declared_order(c)))


_ORDER: dict[str, int] = {}
# Experiments whose claims() raised, with the error (reported by `tinyscope claims`).
CLAIM_ERRORS: dict[str, str] = {}


def declare(*claims: Claim) -> list[Claim]:
    """Register the declaration order of a study's claims (tables list rows in it)."""
    for c in claims:
        _ORDER.setdefault(c.id, len(_ORDER))
    return list(claims)


def _declared_order(c: Claim) -> int:
    return _ORDER.get(c.id, len(_ORDER))


def select(names: Sequence[str]) -> list[Claim]:
    """Claims by study name, experiment name (the claims it owns), claim id, or id prefix
    (``spatial_induction/table13``)."""
    from tinyscope.runs import registry

    claims = all_claims()
    if not names:
        return claims
    studies = set(registry.study_names())
    experiments = set(registry.names())
    chosen: dict[str, Claim] = {}
    for name in names:
        if name in studies:
            hits = [c for c in claims if c.study == name]
        elif name in experiments:
            hits = [c for c in claims if c.experiment == name]
        else:
            hits = [c for c in claims if c.id == name or c.id.startswith(name.rstrip("/") + "/")]
        if not hits:
            raise ConfigError(f"{name!r} is neither a study ({', '.join(sorted(studies))}), an experiment with "
                              f"claims, nor a claim id or prefix; `tinyscope claims` lists them")
        for c in hits:
            chosen.setdefault(c.id, c)
    return list(chosen.values())
