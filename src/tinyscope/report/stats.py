"""Seed statistics: mean ± sample standard deviation per setting, and paired differences.

The reporting unit is a training seed (TraceRelay App. A: "means, sample standard deviations,
and paired differences should be computed from seed-level metrics without mixing evaluation
lengths"). Hence:

- :func:`mean_sd` uses the sample SD (ddof = 1); with one seed the SD is undefined (NaN).
- :func:`summarize` groups runs by setting *and* evaluation fingerprint, so runs evaluated on
  different sets are never averaged together, and keeps every metric key (``acc@256`` and
  ``acc@1024`` are separate) apart.
- :func:`paired_differences` pairs two variants seed by seed and refuses a pair whose
  evaluation fingerprints differ (:class:`FingerprintMismatch`).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from tinyscope.errors import TinyscopeError
from tinyscope.report.records import RunRecord, format_value


class FingerprintMismatch(TinyscopeError):
    """Two runs to be paired (or averaged) were evaluated on different evaluation sets."""


@dataclass(frozen=True)
class Stat:
    """Mean ± sample SD of ``n`` seed-level values (``sd`` is NaN when n < 2)."""

    mean: float
    sd: float
    n: int

    def format(self, digits: int | None = None, scale: float = 1.0) -> str:
        """``98.81 ± 0.58``; with ``digits=None`` the SD gets two significant digits and the
        mean is rounded to the same decimal place."""
        mean, sd = self.mean * scale, self.sd * scale
        if math.isnan(mean):
            return "–"
        if digits is None:
            digits = decimals_for(sd, mean)
        if self.n < 2 or math.isnan(sd):
            return f"{mean:.{digits}f}"
        return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def decimals_for(sd: float, mean: float) -> int:
    """Decimal places that show ``sd`` with two significant digits (4 when sd is 0 or NaN)."""
    ref = abs(sd) if sd and not math.isnan(sd) else 0.0
    if ref == 0.0:
        return 4 if abs(mean) < 1000 else 1
    return int(min(8, max(0, 1 - math.floor(math.log10(ref)))))


def mean_sd(values: Sequence[float]) -> Stat:
    """Mean and sample SD (ddof = 1) of finite values; NaN entries are dropped."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=np.float64)
    if x.size == 0:
        return Stat(math.nan, math.nan, 0)
    sd = float(x.std(ddof=1)) if x.size > 1 else math.nan
    return Stat(float(x.mean()), sd, int(x.size))


@dataclass
class SettingSummary:
    """All seeds of one setting evaluated on one evaluation set."""

    experiment: str
    preset: str
    setting: dict
    eval_fingerprint: str | None
    runs: list[RunRecord] = field(default_factory=list)

    @property
    def seeds(self) -> list[int]:
        return sorted(r.seed for r in self.runs)

    def stat(self, metric: str) -> Stat:
        return mean_sd([r.metrics.get(metric, math.nan) for r in self.runs])

    def metrics(self) -> list[str]:
        names: dict[str, None] = {}
        for r in self.runs:
            names.update(dict.fromkeys(r.metrics))
        return list(names)


def summarize(records: Iterable[RunRecord]) -> list[SettingSummary]:
    """Group ``records`` by (experiment, preset, setting, evaluation fingerprint).

    A setting whose seeds were evaluated on different sets becomes several summaries (one
    per fingerprint) rather than one mean over different data."""
    groups: dict[tuple, SettingSummary] = {}
    for r in records:
        key = r.setting_key + (r.eval_fingerprint,)
        if key not in groups:
            groups[key] = SettingSummary(r.experiment, r.preset, dict(r.setting), r.eval_fingerprint)
        groups[key].runs.append(r)
    for g in groups.values():
        seeds = [r.seed for r in g.runs]
        dup = {s for s in seeds if seeds.count(s) > 1}
        if dup:
            where = ", ".join(str(r.path) for r in g.runs if r.seed in dup)
            raise TinyscopeError(f"seed {min(dup)} appears twice in one setting ({where}); "
                                 f"report one run per seed and setting")
    return sorted(groups.values(), key=lambda g: (g.experiment, g.preset, sorted((k, natural(v))
                                                                                  for k, v in g.setting.items()),
                                                  str(g.eval_fingerprint)))


def natural(value) -> tuple:
    """A sort key that orders numbers by value and everything else by its text, numbers first."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, format_value(value))


@dataclass
class PairedDifference:
    """``variant - baseline`` of ``metric``, seed by seed, over matched runs."""

    metric: str
    stat: Stat
    seeds: list[int]
    differences: list[float]


def pair_runs(variant: Sequence[RunRecord], baseline: Sequence[RunRecord]) -> list[tuple[RunRecord, RunRecord]]:
    """Match runs of two variants by seed; refuse (raise) a pair with different fingerprints.

    Seeds present in only one variant are left out (a paired statistic needs both)."""
    by_seed = {r.seed: r for r in baseline}
    pairs = []
    for v in sorted(variant, key=lambda r: r.seed):
        b = by_seed.get(v.seed)
        if b is None:
            continue
        if v.eval_fingerprint != b.eval_fingerprint:
            raise FingerprintMismatch(
                f"cannot pair seed {v.seed}: {v.path} was evaluated on set {v.eval_fingerprint} and "
                f"{b.path} on set {b.eval_fingerprint}; evaluate both on the same set")
        pairs.append((v, b))
    return pairs


def paired_differences(variant: Sequence[RunRecord], baseline: Sequence[RunRecord],
                       metrics: Sequence[str] | None = None) -> list[PairedDifference]:
    """Mean ± sample SD of the per-seed differences ``variant - baseline`` for each metric."""
    pairs = pair_runs(variant, baseline)
    if metrics is None:
        metrics = [m for m in (pairs[0][0].metrics if pairs else {}) if all(m in b.metrics for _, b in pairs)]
    out = []
    for m in metrics:
        diffs = [v.metrics.get(m, math.nan) - b.metrics.get(m, math.nan) for v, b in pairs]
        out.append(PairedDifference(m, mean_sd(diffs), [v.seed for v, _ in pairs], diffs))
    return out


def variants_along(records: Iterable[RunRecord], key: str) -> dict[tuple, dict[str, list[RunRecord]]]:
    """Group runs into matched families that differ only in config ``key``.

    Returns ``{(experiment, preset, other setting items): {value of key: [runs]}}``."""
    fam: dict[tuple, dict[str, list[RunRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        others = tuple(sorted((k, format_value(v)) for k, v in r.setting.items() if k != key))
        fam[(r.experiment, r.preset, others)][format_value(r.config.get(key))].append(r)
    return {k: dict(v) for k, v in fam.items()}
