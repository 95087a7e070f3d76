"""Seed-statistics figures: a metric against evaluation length, mean ± sample SD per setting,
with the out-of-distribution lengths (longer than any training length) shaded.

Plotting functions take data and return a matplotlib Figure (Agg); saving is the caller's.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

from matplotlib.figure import Figure

from tinyscope.interp.mpl import plt
from tinyscope.report.records import split_length
from tinyscope.report.stats import SettingSummary, Stat


def length_families(summaries: Sequence[SettingSummary]) -> dict[str, list[int]]:
    """Metric base names that are indexed by length (``acc@256``, ``acc@1024`` -> ``acc``), with
    their lengths; a family needs at least two lengths to be drawn as a curve."""
    fam: dict[str, set[int]] = defaultdict(set)
    for g in summaries:
        for m in g.metrics():
            parsed = split_length(m)
            if parsed:
                fam[parsed[0]].add(parsed[1])
    return {k: sorted(v) for k, v in sorted(fam.items()) if len(v) >= 2}


def curve(summary: SettingSummary, family: str) -> list[tuple[int, Stat]]:
    """(length, mean ± SD over seeds) of ``family`` for one setting, sorted by length."""
    points = {}
    for m in summary.metrics():
        parsed = split_length(m)
        if parsed and parsed[0] == family:
            points[parsed[1]] = summary.stat(m)
    return sorted(points.items())


def plot_length_curves(summaries: Sequence[SettingSummary], family: str, labels: Sequence[str],
                       ood_above: float | None = None, scale: float = 1.0, ylabel: str | None = None) -> Figure:
    """One error-bar line per setting: ``family`` at each evaluation length (mean ± sample SD
    over seeds, the SD as error bars); lengths > ``ood_above`` are shaded as OOD."""
    fig, ax = plt.subplots(figsize=(6.0, 3.8), layout="constrained")
    lengths: set[int] = set()
    for g, label in zip(summaries, labels):
        pts = curve(g, family)
        if not pts:
            continue
        xs = [x for x, _ in pts]
        lengths.update(xs)
        ys = [s.mean * scale for _, s in pts]
        es = [0.0 if math.isnan(s.sd) else s.sd * scale for _, s in pts]
        n = min(s.n for _, s in pts)
        ax.errorbar(xs, ys, yerr=es, marker="o", ms=4, capsize=3, lw=1.5, label=f"{label} (n={n})")
    xs = sorted(lengths)
    log = bool(xs) and xs[0] > 0 and (xs[-1] / xs[0] >= 8 or (len(xs) >= 3 and all(x & (x - 1) == 0 for x in xs)))
    if log:
        ax.set_xscale("log", base=2)
    if xs:
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.minorticks_off()
    if ood_above is not None and xs and xs[-1] > ood_above:
        inside = [x for x in xs if x <= ood_above]
        first_out = min(x for x in xs if x > ood_above)
        # the shading starts halfway (in the axis' own scale) between the last ID and the first OOD length
        start = (math.sqrt(inside[-1] * first_out) if log else (inside[-1] + first_out) / 2) if inside else ood_above
        right = xs[-1] * 1.25 if log else xs[-1] + 0.05 * (xs[-1] - xs[0])
        ax.axvspan(start, right, color="0.88", zorder=0, label=f"OOD (> {ood_above:g})")
        ax.set_xlim(right=right)
    ax.set_xlabel("evaluation length")
    ax.set_ylabel(ylabel or family)
    ax.grid(alpha=0.3)
    if labels:
        ax.legend(fontsize=8)
    ax.set_title(f"{family}: mean ± sample SD over seeds")
    return fig
