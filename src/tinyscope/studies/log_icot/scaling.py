"""Sample complexity in n: the fit ``samples to 99% = C n^b`` and its figure in `tinyscope report`.

The paper's theory says poly(n) samples (the digest quotes n^(2+eps)); the experiment behind it is
the runs of ``parity-cot`` and ``parity-logicot`` at several input lengths n and one k
(``claims.N_SCALING``). For each curriculum the exponent ``b`` is the ordinary least-squares slope
of ``log samples`` on ``log n`` over every (n, seed) run that reached 99% (the curriculum's last
stage met its advance threshold, ``curriculum_done`` = 1), pooled over seeds; its confidence
interval is the two-sided 95% Student-t interval of that slope, ``b ± t_{0.975, N-2} SE(b)`` with
N the number of pooled runs. Runs that never reached 99% are left out of the fit and counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tinyscope.report.folder_figures import FolderFigure, register_figure

KINDS = {"parity-cot": "CoT", "parity-logicot": "Log-ICoT"}


@dataclass(frozen=True)
class ExponentFit:
    exponent: float       # b in samples = C n^b
    intercept: float      # log C
    lo: float             # 95% confidence interval of b (nan when fewer than 3 runs or one n)
    hi: float
    n_runs: int           # runs in the fit
    n_unreached: int      # runs left out: never reached 99%


def fit_exponent(ns: Sequence[float], samples: Sequence[float], confidence: float = 0.95) -> ExponentFit:
    """The OLS fit of ``log samples`` on ``log n`` over the finite ``samples`` (inf: never reached)."""
    from scipy import stats

    pairs = [(float(n), float(s)) for n, s in zip(ns, samples) if math.isfinite(s) and s > 0]
    unreached = len(ns) - len(pairs)
    x = np.log([p[0] for p in pairs])  # (N,)
    y = np.log([p[1] for p in pairs])  # (N,)
    if len(pairs) < 2 or len(set(x.tolist())) < 2:
        return ExponentFit(math.nan, math.nan, math.nan, math.nan, len(pairs), unreached)
    slope, intercept = np.polyfit(x, y, 1)
    lo = hi = math.nan
    if len(pairs) >= 3:
        resid = y - (slope * x + intercept)  # (N,)
        se = math.sqrt(float(resid @ resid) / (len(x) - 2) / float(((x - x.mean()) ** 2).sum()))
        half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 2)) * se
        lo, hi = slope - half, slope + half
    return ExponentFit(float(slope), float(intercept), lo, hi, len(pairs), unreached)


def samples_to_99(metrics: dict) -> float:
    """Samples until the last stage met its threshold (``samples``); +inf when it never did."""
    return float(metrics.get("samples", math.inf)) if metrics.get("curriculum_done", 0.0) >= 1.0 else math.inf


def scaling_points(runs) -> dict[str, tuple[list[int], list[float]]]:
    """Per curriculum, k and architecture (``"CoT, k = 8"``; a fit never pools two k's):
    (n of each run, its samples to 99%), over finished report records."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for r in runs:
        if r.status != "done" or r.experiment not in KINDS:
            continue
        arch = ", constrained" if r.config.get("arch") == "constrained" else ""
        label = f"{KINDS[r.experiment]}, k = {r.config['task.k']}{arch}"
        ns, samples = out.setdefault(label, ([], []))
        ns.append(int(r.config["task.n"]))
        samples.append(samples_to_99(r.metrics))
    return out


def fit_label(name: str, fit: ExponentFit) -> str:
    ci = "" if math.isnan(fit.lo) else f" [{fit.lo:.2f}, {fit.hi:.2f}]"
    left = f"; {fit.n_unreached} never reached 99%" if fit.n_unreached else ""
    if math.isnan(fit.exponent):
        return f"{name}: no fit, fewer than two n reached 99% ({fit.n_runs} runs{left})"
    return f"{name}: b = {fit.exponent:.2f}{ci} ({fit.n_runs} runs{left})"


def scaling_figure(runs):
    """Samples to 99% against n (log-log), each run a point, each curriculum's fit a line."""
    from tinyscope.interp.mpl import plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for i, (name, (ns, samples)) in enumerate(sorted(scaling_points(runs).items())):
        color = f"C{i % 10}"
        fit = fit_exponent(ns, samples)
        reached = [(n, s) for n, s in zip(ns, samples) if math.isfinite(s)]
        if reached:
            ax.plot(*zip(*reached), "o", color=color, alpha=0.7)
        if not math.isnan(fit.exponent):
            grid = np.geomspace(min(ns), max(ns), 50)  # (50,)
            ax.plot(grid, np.exp(fit.intercept) * grid ** fit.exponent, "-", color=color, label=fit_label(name, fit))
        else:
            ax.plot([], [], "o", color=color, label=fit_label(name, fit))
    ax.set(xscale="log", yscale="log", xlabel="input bits n", ylabel="samples to 99%",
           title="k-parity: samples to 99% ~ n^b (95% CI of b)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


register_figure(FolderFigure(
    "log_icot-n-scaling", "Samples to 99% against n for CoT and Log-ICoT (log-log); b is the OLS slope of "
    "log samples on log n pooled over seeds, with its 95% Student-t interval; runs that never reached 99% are "
    "counted, not fitted", tuple(KINDS), scaling_figure))
