"""Materialized rule pools of the large rule spaces (App. I.1): 1D V=3 k=3 (3^27 rules) and 2D von
Neumann V=2 k=5 (2^32 rules).

Strata are the sorted output histograms of a table: for V = 2 the folded Langton lambda
min(#1, C - #1) (17 strata for C = 32), for V = 3 the 75 histograms of 27 entries, each with its
own entropy value. The pool of all three splits holds P_s rules of stratum s, P_s = min(n_s, cap)
with n_s the stratum's size and one cap chosen so that sum_s P_s = train + val + test ("small
strata are enumerated; large strata are sampled at a fixed count": approximately uniform over
strata). Val-out and test take the same number of rules from each stratum, in proportion to P_s,
and only orbits whose every member is coverage-feasible (:func:`.coverage.feasibility`); a stratum short of feasible rules
(the near-constant ones) passes its share to the capped strata. Everything is drawn at the level
of canonical classes, then expanded to whole orbits, so the three pools are disjoint and closed
under the symmetry group. Deterministic from the seed; built once per process and setting.
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from functools import lru_cache
from math import factorial

import numpy as np

from tinyscope.errors import ConfigError, check_choice
from tinyscope.studies.spatial_induction.coverage import feasibility
from tinyscope.studies.spatial_induction.lattice import Lattice
from tinyscope.studies.spatial_induction.rules import numbers_of, table_from_number
from tinyscope.studies.spatial_induction.symmetry import SymmetryGroup

SPLITS = ("train", "val", "test")
#: App. I.1's pool sizes after orbit expansion (train, val-out, test), by (V, k, dim)
PAPER_POOL_SIZES = {(3, 3, 1): (3_621_300, 122_640, 122_640), (2, 5, 2): (315_859, 10_904, 10_904)}


def sorted_histograms(n_configs: int, V: int) -> list[tuple[int, ...]]:
    """All sorted (descending) output histograms of a table with ``n_configs`` entries, as
    V-tuples, in descending order of the largest count (near-constant strata first)."""
    out = set()
    for cuts in itertools.combinations_with_replacement(range(n_configs + 1), V - 1):
        parts = np.diff(np.concatenate([[0], np.array(cuts, dtype=np.int64), [n_configs]]))
        out.add(tuple(sorted(parts.tolist(), reverse=True)))
    return sorted(out, reverse=True)


def stratum_size(hist: tuple[int, ...]) -> int:
    """Number of rule tables whose sorted histogram is ``hist`` (multinomial x distinct role maps)."""
    C = sum(hist)
    arrangements = factorial(C)
    for h in hist:
        arrangements //= factorial(h)
    return arrangements * len(set(itertools.permutations(hist)))


def entropy(hist: tuple[int, ...]) -> float:
    p = np.array([h for h in hist if h], dtype=np.float64) / sum(hist)
    return float(-(p * np.log(p)).sum())


def water_fill(sizes: list[int], total: int, unit: int = 1) -> list[int]:
    """P_s = min(n_s, cap) with sum P_s = ``total``: the capped strata take multiples of ``unit``
    (whole orbits), the last of them also what is left below one unit."""
    if total >= sum(sizes):
        raise ConfigError(f"a pool of {total} rules needs more rules than the {sum(sizes)} of the strata")
    order = sorted(range(len(sizes)), key=lambda s: sizes[s])
    out, left = [0] * len(sizes), total
    for i, s in enumerate(order):
        if sizes[s] * (len(order) - i) <= left:
            out[s] = sizes[s]
            left -= sizes[s]
            continue
        rest = sorted(order[i:])
        units, below = divmod(left, unit)
        cap, extra = divmod(units, len(rest))
        for j, r in enumerate(rest):
            out[r] = (cap + (1 if j >= len(rest) - extra else 0)) * unit
        out[rest[-1]] += below
        return out
    return out


def largest_remainder(weights: list[float], total: int, unit: int) -> list[int]:
    """Integers in multiples of ``unit`` proportional to ``weights`` with sum ``total``."""
    n_units = total // unit
    w = np.asarray(weights, dtype=np.float64)
    exact = n_units * w / w.sum()
    base = np.floor(exact).astype(np.int64)
    for s in np.argsort(-(exact - base), kind="stable")[:n_units - int(base.sum())]:
        base[s] += 1
    return (base * unit).tolist()


def enumerate_stratum(hist: tuple[int, ...], V: int) -> np.ndarray:
    """Every table (n_s, C) of a stratum whose minority entries are few (C - hist[0] small)."""
    C, m = sum(hist), sum(hist) - hist[0]
    if m == 0:
        return np.repeat(np.arange(V)[:, None], C, axis=1)  # the V constant rules
    labels = [lab for lab, h in enumerate(hist) if lab for _ in range(h)]
    arrangements = np.array(sorted(set(itertools.permutations(labels))), dtype=np.int64).reshape(-1, m)
    positions = np.array(list(itertools.combinations(range(C), m)), dtype=np.int64).reshape(-1, m)
    base = np.zeros((len(positions) * len(arrangements), C), dtype=np.int64)
    rows = np.repeat(np.arange(len(base)), m).reshape(len(base), m)
    base[rows, np.repeat(positions, len(arrangements), 0)] = np.tile(arrangements, (len(positions), 1))
    roles = [np.array(p) for p in itertools.permutations(range(V))]
    tables = np.concatenate([r[base] for r in roles])
    _, first = np.unique(numbers_of(tables, V), return_index=True)  # equal histogram slots repeat tables
    return tables[np.sort(first)]


def draw_stratum(rng: np.random.Generator, hist: tuple[int, ...], V: int, n: int) -> np.ndarray:
    """``n`` uniform tables (n, C) of a stratum: uniform role map, then uniform entry order."""
    roles = np.argsort(rng.random((n, V)), axis=1)  # (n, V): the state of each histogram slot
    slots = np.repeat(np.arange(V), hist)  # (C,)
    order = np.argsort(rng.random((n, len(slots))), axis=1)  # (n, C) a uniform permutation
    return np.take_along_axis(roles, slots[order], axis=1)


@dataclass(frozen=True)
class PoolKey:
    lattice: Lattice
    T0: int
    spatial: str
    states: str
    seed: int
    sizes: tuple[int, int, int]
    tries: int
    holdout: tuple[int, ...]


class StratifiedPools:
    """Train / val-out / test rule numbers of a large rule space (see the module docstring).

    ``rules(split)`` is the expanded pool (uint64 rule numbers); ``strata`` the per-stratum rule
    counts of each split; ``draw(rng, n, split)`` draws tables uniformly from a pool."""

    def __init__(self, lattice: Lattice, group: SymmetryGroup, T0: int, sizes: tuple[int, int, int],
                 seed: int = 0, tries: int = 64, holdout: tuple[int, ...] = ()):
        self.lattice, self.group = lattice, group
        key = PoolKey(lattice, int(T0), group.spatial, group.states, int(seed), tuple(int(s) for s in sizes),
                      int(tries), tuple(int(h) for h in holdout))
        self._pools, self.strata, self.histograms = _build(key)

    def rules(self, split: str) -> np.ndarray:
        check_choice("split", split, SPLITS)
        return self._pools[split]

    def draw(self, rng: np.random.Generator, n: int, split: str) -> np.ndarray:
        pool = self.rules(split)
        numbers = pool[rng.integers(0, len(pool), size=n)]  # (n,)
        return tables_of(numbers, self.lattice.V, self.lattice.n_configs)

    def stratum_weights(self, split: str) -> dict[str, float]:
        """Share of the pool (= of uniformly drawn trajectories) in each stratum, keyed by histogram."""
        counts = self.strata[split]
        total = sum(counts)
        return {"-".join(map(str, h)): c / total for h, c in zip(self.histograms, counts)}


def tables_of(numbers: np.ndarray, V: int, C: int) -> np.ndarray:
    """Tables (n, C) of rule numbers (uint64; the inverse of :func:`.rules.numbers_of`)."""
    powers = np.uint64(V) ** np.arange(C, dtype=np.uint64)
    return ((np.asarray(numbers, dtype=np.uint64)[:, None] // powers) % np.uint64(V)).astype(np.int64)


def _orbits(group: SymmetryGroup, tables: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Canonical numbers (n,), orbit sizes (n,) and all images (G, n) of tables."""
    images = numbers_of(group.orbit(tables), group.lattice.V)  # (G, n)
    ordered = np.sort(images, axis=0)
    return ordered[0], 1 + (np.diff(ordered, axis=0) != 0).sum(0), images


def _fixed_rules(group: SymmetryGroup, hist: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Tables (m, C) of stratum ``hist`` fixed by an involution of the group without fixed
    configurations (2D V=2: the self-complementary rules f[C-1-c] = 1 - f[c], orbit size 1)."""
    C = sum(hist)
    out = []
    for src, pi, _ in group.elements[1:]:
        if np.any(src == np.arange(C)) or np.any(src[src] != np.arange(C)) or np.any(pi == np.arange(len(pi))) \
                or np.any(pi[pi] != np.arange(len(pi))):
            continue
        lead = np.flatnonzero(np.arange(C) < src)  # one configuration of each pair
        f = np.zeros(C, dtype=np.int64)
        f[lead] = rng.integers(0, len(pi), size=len(lead))
        f[src[lead]] = pi[f[lead]]
        if tuple(sorted(np.bincount(f, minlength=len(pi)).tolist(), reverse=True)) == tuple(hist):
            out.append(f)
    return np.array(out, dtype=np.int64).reshape(-1, C)


def cache_path(key: PoolKey):
    """$TINYSCOPE_CACHE/sih_pools/<hash of the key>.npz (default ~/.cache/tinyscope): a built pool
    is a pure function of its key, so it is computed once per machine."""
    import hashlib
    from pathlib import Path

    env = os.environ.get("TINYSCOPE_CACHE")
    root = (Path(env) if env else Path.home() / ".cache" / "tinyscope") / "sih_pools"
    digest = hashlib.sha256(f"{POOL_FORMAT}|{key!r}".encode()).hexdigest()[:20]
    return root / f"{digest}.npz"


POOL_FORMAT = 3  # bump when the construction below changes


@lru_cache(maxsize=8)
def _build(key: PoolKey):
    path = cache_path(key)
    if path.is_file():
        with np.load(path) as z:
            hists = [tuple(h) for h in z["hists"].tolist()]
            return ({s: z[s] for s in SPLITS}, {s: z[f"{s}_counts"].tolist() for s in SPLITS}, hists)
    pools, counts, hists = _construct(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, hists=np.array(hists), **pools, **{f"{s}_counts": np.array(counts[s]) for s in SPLITS})
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: the pool is rebuilt next time
    return pools, counts, hists


def _construct(key: PoolKey):
    lat, V, C = key.lattice, key.lattice.V, key.lattice.n_configs
    group = SymmetryGroup(Lattice((3,) * lat.dim, lat.offsets, V), key.spatial, key.states)
    G = len(group)
    n_train, n_val, n_test = key.sizes
    if n_val != n_test:
        raise ConfigError(f"task.pool_sizes: val-out and test take the same share of every stratum; got {n_val} and {n_test}")
    hists = sorted_histograms(C, V)
    sizes = [stratum_size(h) for h in hists]
    total = water_fill(sizes, n_train + n_val + n_test, G)
    held = largest_remainder(total, n_val, G)  # rules of val (= of test) per stratum, multiples of G
    rng = np.random.default_rng([key.seed, 0x9001])
    held_canon = set()
    if key.holdout:
        held_canon = set(_orbits(group, np.stack([table_from_number(h, V, lat.k) for h in key.holdout]))[0].tolist())
    pools = {s: [] for s in SPLITS}
    counts = {s: [0] * len(hists) for s in SPLITS}
    enumerated = [s for s in range(len(hists)) if total[s] == sizes[s]]
    capped = [s for s in range(len(hists)) if total[s] < sizes[s]]  # near-constant first (hists sorted so)
    deficit = 0
    for s in enumerated + capped:
        if s in capped and deficit:  # a stratum short of feasible rules passes its share on
            rest = capped[capped.index(s):]
            share = deficit if len(rest) == 1 else deficit * total[s] // sum(total[c] for c in rest) // G * G
            held[s] += share
            deficit -= share
        got = _fill_stratum(group, lat, key, hists[s], sizes[s], total[s], held[s], rng, held_canon)
        for split in SPLITS:
            pools[split].append(got[split][0])
            counts[split][s] = int(got[split][1])
        deficit += held[s] - counts["val"][s]
    out = {split: np.unique(np.concatenate(pools[split])) for split in SPLITS}
    return out, counts, hists


def _fill_stratum(group, lat, key, hist, n_s, quota, held, rng, held_canon) -> dict[str, tuple[np.ndarray, int]]:
    """Orbits of one stratum (expanded rule numbers and rule count per split): up to ``held``
    rules to each of val and test, equally many, from coverage-feasible orbits; the rest of
    ``quota`` to train."""
    V, G = lat.V, len(group)
    chosen = {s: [] for s in SPLITS}
    have = {s: 0 for s in SPLITS}
    want = {"train": quota - 2 * held, "val": held, "test": held}
    enumerate_all = quota == n_s
    if enumerate_all:
        want["train"] = quota  # every orbit of the stratum lands somewhere
    candidates = enumerate_stratum(hist, V)[rng.permutation(n_s)] if enumerate_all else None
    seen: set[int] = set()
    drawn = checked = stall = 0
    # a capped stratum looks for feasible held-out orbits among at most this many candidates
    # (near-constant strata have few or none: their share then passes to the other strata)
    budget = 4 * (want["val"] + want["test"]) // G + 256
    searching = True
    while True:
        held_open = have["val"] < want["val"] or have["test"] < want["test"]
        more = drawn < len(candidates) if enumerate_all else checked < budget
        if searching and not (held_open and more):
            searching = False  # balance val and test; what they could not take goes to train
            for big, small in (("val", "test"), ("test", "val")):
                while chosen[big] and have[big] - len(np.unique(chosen[big][-1])) >= have[small]:
                    orbit = chosen[big].pop()
                    have[big] -= len(np.unique(orbit))
                    chosen["train"].append(orbit)
                    have["train"] += len(np.unique(orbit))
            if not enumerate_all:
                want["train"] = quota - have["val"] - have["test"]
        if not searching and (have["train"] >= want["train"] or stall >= 3):
            break
        if enumerate_all:
            if drawn >= len(candidates):
                break
            batch = candidates[drawn:drawn + 4096]
        else:
            batch = draw_stratum(rng, hist, V, max(256, min(8192, (want["train"] - have["train"]) // 2)))
        drawn += len(batch)
        before = sum(have.values())
        if 0 < want["train"] - have["train"] < G and not enumerate_all:
            batch = np.concatenate([batch, _fixed_rules(group, hist, rng)])  # an orbit small enough for the rest
        canon, size, images = _orbits(group, batch)
        # feasibility is checked on as many candidates as the held-out quotas may still need
        missing = (want["val"] - have["val"] + want["test"] - have["test"]) // G
        ok = np.zeros(len(batch), dtype=bool)
        n_check = 0
        if searching and missing > 0:
            n_check = len(batch) if enumerate_all else min(len(batch), 2 * missing + 64, budget - checked)
            members = tables_of(images[:, :n_check].ravel(), V, lat.n_configs)  # (G n_check, C)
            ok[:n_check] = feasibility(lat, members, key.T0, key.tries)[0].reshape(G, n_check).all(0)
        checked += n_check
        for i, (c, n, feasible) in enumerate(zip(canon.tolist(), size.tolist(), ok.tolist())):
            if c in seen:
                continue
            seen.add(c)
            if c in held_canon:
                chosen["test"].append(images[:, i])
                continue
            split = "train"
            if feasible and searching:
                for s in (("val", "test") if have["val"] <= have["test"] else ("test", "val")):
                    if have[s] + n <= want[s]:
                        split = s
                        break
            if have[split] + n > want[split]:
                if not enumerate_all:
                    seen.discard(c)  # may still fit a later, smaller remainder
                continue
            chosen[split].append(images[:, i])
            have[split] += n
        stall = stall + 1 if sum(have.values()) == before else 0
    return {s: (np.unique(np.concatenate(chosen[s])) if chosen[s] else np.zeros(0, np.uint64), have[s])
            for s in SPLITS}
