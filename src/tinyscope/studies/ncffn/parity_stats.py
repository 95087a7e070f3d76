"""Intervals over seeds for the parity probe (:mod:`~tinyscope.studies.ncffn.parity_bases`).

Rows are the probe's per-stack dicts. In one (N, depth) cell, for one basis:

* solve rate at width w: k of the n seeds reach 100%; its exact 95% interval is Clopper-Pearson's
  (:func:`clopper_pearson`);
* threshold parameters ``P(q)``: the fewest parameters among the widths whose solve rate is at
  least ``q`` (``inf``: no width of the ladder reaches it); ``q = 0.5`` reads the median seed;
* the interval of ``P(q)``: a percentile bootstrap over seeds (draw n seeds with replacement, each
  drawn seed bringing its run at every width; :data:`N_BOOT` draws from a fixed generator);
* the efficiency ratio ``P_basis(q) / min_b P_b(q)`` over the other bases, and its bootstrap
  interval with the seeds drawn jointly for all bases (seed s of every basis is one draw).

Percentiles are taken as sample values (``inverted_cdf``), so ``inf`` draws stay ``inf``.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta

from tinyscope.errors import check

N_BOOT = 2000
LEVEL = 0.95


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Exact binomial interval for a proportion of k successes in n trials."""
    check(0 <= k <= n and n >= 1, f"k={k}, n={n}: need 0 <= k <= n, n >= 1")
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def solved_matrix(rows: list[dict], basis: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """One cell's runs of ``basis``: (widths (W,), params (W,), solved (W, S) bool, seeds)."""
    sel = [r for r in rows if r["basis"] == basis]
    widths = np.array(sorted({r["width"] for r in sel}))
    seeds = sorted({r["seed"] for r in sel})
    params = np.zeros(len(widths))
    solved = np.zeros((len(widths), len(seeds)), dtype=bool)
    wi, si = {w: i for i, w in enumerate(widths)}, {s: j for j, s in enumerate(seeds)}
    for r in sel:
        params[wi[r["width"]]] = r["params"]
        solved[wi[r["width"]], si[r["seed"]]] = r["accuracy"] == 1.0
    return widths, params, solved, seeds


def _threshold(params: np.ndarray, solved: np.ndarray, share: float) -> np.ndarray:
    """``solved`` (W, ..., S): the fewest params whose share of solved seeds >= share, per leading draw."""
    ok = solved.mean(-1) >= share - 1e-12  # (W, ...)
    cost = np.where(ok, params.reshape((-1,) + (1,) * (ok.ndim - 1)), np.inf)  # (W, ...)
    return cost.min(0) if len(params) else np.full(ok.shape[1:], np.inf)


def _draws(n_seeds: int, n_boot: int, rng_seed: int) -> np.ndarray:
    return np.random.default_rng(rng_seed).integers(0, n_seeds, size=(n_boot, n_seeds))  # (n_boot, S)


def _interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    a = (1 - level) / 2
    return (float(np.quantile(values, a, method="inverted_cdf")),
            float(np.quantile(values, 1 - a, method="inverted_cdf")))


def threshold_params(rows: list[dict], basis: str, share: float = 0.5, n_boot: int = N_BOOT,
                     rng_seed: int = 0) -> dict:
    """``P(share)`` of one basis in one cell, its width, its bootstrap interval and the seed count."""
    widths, params, solved, seeds = solved_matrix(rows, basis)
    point = float(_threshold(params, solved, share))
    draws = solved[:, _draws(len(seeds), n_boot, rng_seed)]  # (W, n_boot, S)
    lo, hi = _interval(_threshold(params, draws, share))
    width = int(widths[list(params).index(point)]) if math.isfinite(point) else None
    return {"basis": basis, "params": point, "width": width, "lo": lo, "hi": hi, "n_seeds": len(seeds)}


def efficiency_ratio(rows: list[dict], basis: str, others: tuple[str, ...], share: float = 0.5,
                     n_boot: int = N_BOOT, rng_seed: int = 0) -> dict:
    """``P_basis(share) / min over others of P_b(share)`` in one cell, with its bootstrap interval
    (<= 1: no other basis needs fewer parameters; inf: ``basis`` never solves; 0: no other does)."""
    mats = {b: solved_matrix(rows, b) for b in (basis, *others)}
    seeds = mats[basis][3]
    check(all(m[3] == seeds for m in mats.values()), f"bases {sorted(mats)} were not run on the same seeds")
    idx = _draws(len(seeds), n_boot, rng_seed)

    def ratio(sample) -> np.ndarray:
        cost = {b: _threshold(m[1], sample(m[2]), share) for b, m in mats.items()}
        best_other = np.min([cost[b] for b in others], axis=0)
        mine = cost[basis]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(np.isinf(mine), np.inf, np.where(np.isinf(best_other), 0.0, mine / best_other))
        return r

    point = float(ratio(lambda s: s))
    lo, hi = _interval(ratio(lambda s: s[:, idx]))
    return {"ratio": point, "lo": lo, "hi": hi, "n_seeds": len(seeds)}


def cells(rows: list[dict]) -> list[tuple[int, int]]:
    """The (N, depth) cells present in ``rows``, sorted."""
    return sorted({(r["n_bits"], r["depth"]) for r in rows})


def cell_rows(rows: list[dict], n_bits: int, depth: int) -> list[dict]:
    return [r for r in rows if (r["n_bits"], r["depth"]) == (n_bits, depth)]


def solve_rates(rows: list[dict], basis: str) -> list[dict]:
    """Per width of one cell's ``basis``: params, k of n seeds solved, the rate and its exact interval."""
    widths, params, solved, seeds = solved_matrix(rows, basis)
    out = []
    for w, p, s in zip(widths, params, solved):
        k = int(s.sum())
        lo, hi = clopper_pearson(k, len(seeds))
        out.append({"width": int(w), "params": int(p), "k": k, "n": len(seeds), "rate": k / len(seeds),
                    "lo": lo, "hi": hi})
    return out
