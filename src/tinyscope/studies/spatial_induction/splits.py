"""Rule pools for train / val-out / test, disjoint at the canonical level (App. I.1).

* Enumerable spaces (ECA: 256 rules, 88 classes): canonical classes are stratified (ECA: by
  Wolfram class) and split per stratum; each class is then expanded to its rules.
* Spaces too large to enumerate (3^27, 2^32): no stored pool. A canonical rule belongs to the
  split given by a hash of its rule number (salted by the split seed); a pool is sampled by
  drawing a stratum uniformly, a rule uniformly inside the stratum, and rejecting rules whose
  canonical class hashes to another split. Strata are sorted output histograms: for V = 2 this
  is the folded Langton lambda, min(#1, V^k - #1); for V = 3 it spreads rules over histogram
  entropies as the paper does.

Named rules can be held out of training: their classes go to the test split.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.studies.spatial_induction.symmetry import SymmetryGroup, eca_classes, wolfram_class

SPLITS = ("train", "val", "test")


def _allocate(sizes: dict, n_pick: int) -> dict:
    """Per-stratum quotas for a held-out split of ``n_pick`` classes: one per stratum, the rest
    by largest remainder in proportion to stratum size."""
    keys = sorted(sizes)
    check(n_pick >= len(keys), f"a held-out split of {n_pick} classes cannot cover {len(keys)} strata")
    total = sum(sizes.values())
    rest = n_pick - len(keys)
    exact = {s: rest * sizes[s] / total for s in keys}
    quota = {s: 1 + int(exact[s]) for s in keys}
    left = n_pick - sum(quota.values())
    for s in sorted(keys, key=lambda s: (-(exact[s] - int(exact[s])), s))[:left]:
        quota[s] += 1
    return quota


@dataclass
class EnumeratedSplits:
    """Train / val / test rule numbers of an enumerable rule space (default: the 88 ECA classes
    split 70 / 9 / 9, stratified by Wolfram class, ``holdout`` classes forced into test)."""

    seed: int = 0
    n_val: int = 9
    n_test: int = 9
    holdout: tuple[int, ...] = (110,)
    classes: dict = field(default_factory=eca_classes)

    def __post_init__(self):
        rng = np.random.default_rng([int(self.seed), 12])
        strata: dict[int, list[int]] = {}
        for canon in sorted(self.classes):
            strata.setdefault(wolfram_class(canon), []).append(canon)
        forced = {min(self._class_of(h)) for h in self.holdout}
        self.assignment: dict[int, str] = {}
        val_q = _allocate({s: len(v) for s, v in strata.items()}, self.n_val)
        test_q = _allocate({s: len(v) for s, v in strata.items()}, self.n_test)
        for s, members in strata.items():
            members = list(rng.permutation(members))
            pinned = [c for c in members if c in forced]
            free = [c for c in members if c not in forced]
            n_test_free = max(test_q[s] - len(pinned), 0)
            test = pinned + free[:n_test_free]
            val = free[n_test_free:n_test_free + val_q[s]]
            for c in members:
                self.assignment[c] = "test" if c in test else "val" if c in val else "train"

    def _class_of(self, number: int) -> list[int]:
        for members in self.classes.values():
            if number in members:
                return members
        raise ValueError(f"rule {number} is in no class")

    def canonical(self, split: str) -> list[int]:
        check_choice("split", split, SPLITS)
        return sorted(c for c, s in self.assignment.items() if s == split)

    def rules(self, split: str) -> np.ndarray:
        """Rule numbers of ``split`` after expanding each canonical class to its members."""
        return np.array(sorted(r for c in self.canonical(split) for r in self.classes[c]), dtype=np.int64)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """A fast, well-mixed 64-bit integer hash (vectorized)."""
    x = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        x += np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def sorted_histograms(n_configs: int, V: int) -> np.ndarray:
    """All sorted (descending) output histograms (S, V) of a rule with ``n_configs`` entries."""
    out = [h for h in itertools.combinations_with_replacement(range(n_configs + 1), V - 1)]
    hists = set()
    for cuts in out:
        parts = np.diff(np.concatenate([[0], np.array(cuts), [n_configs]]))
        hists.add(tuple(sorted(parts.tolist(), reverse=True)))
    return np.array(sorted(hists), dtype=np.int64)


@dataclass
class HashedSplits:
    """Hash-assigned splits for rule spaces too large to store (1D V=3, 2D von Neumann).

    A canonical rule number h goes to val with probability ``val_fraction``, to test with
    ``test_fraction`` (by splitmix64(h xor salt)); ``holdout`` rule numbers go to test.
    """

    group: SymmetryGroup
    seed: int = 0
    val_fraction: float = 9 / 88
    test_fraction: float = 9 / 88
    holdout: tuple[int, ...] = ()

    def __post_init__(self):
        lat = self.group.lattice
        self.histograms = sorted_histograms(lat.n_configs, lat.V)
        self._held = set()
        if self.holdout:
            from tinyscope.studies.spatial_induction.rules import table_from_number
            tabs = np.stack([table_from_number(h, lat.V, lat.k) for h in self.holdout])
            self._held = set(self.group.canonical_numbers(tabs).tolist())

    def split_of(self, canonical: np.ndarray) -> np.ndarray:
        """Split index (0 train, 1 val, 2 test) of canonical rule numbers."""
        salt = np.uint64(splitmix64(np.uint64(self.seed + 0x5A17)))
        u = (splitmix64(np.asarray(canonical, dtype=np.uint64) ^ salt) >> np.uint64(11)).astype(np.float64) / 2.0 ** 53
        out = np.where(u < self.val_fraction, 1, np.where(u < self.val_fraction + self.test_fraction, 2, 0))
        if self._held:
            out = np.where(np.isin(canonical, list(self._held)), 2, out)
        return out

    def draw_stratified(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` tables (n, C): a sorted histogram uniformly, the states' roles permuted
        uniformly, then the entries placed in a uniform random order."""
        lat = self.group.lattice
        V, C = lat.V, lat.n_configs
        hist = self.histograms[rng.integers(0, len(self.histograms), size=n)]  # (n, V)
        roles = np.argsort(rng.random((n, V)), axis=1)  # random state for each histogram slot
        tables = np.empty((n, C), dtype=np.int64)
        for i in range(n):
            entries = np.repeat(roles[i], hist[i])
            tables[i] = rng.permutation(entries)
        return tables

    def sample(self, rng: np.random.Generator, n: int, split: str, max_rounds: int = 1000) -> np.ndarray:
        """``n`` deterministic tables (n, C) from ``split``, by rejection."""
        check_choice("split", split, SPLITS)
        want = SPLITS.index(split)
        out, have = [], 0
        for _ in range(max_rounds):
            m = max(2 * (n - have), 16) if want == 0 else max(12 * (n - have), 64)
            tabs = self.draw_stratified(rng, m)
            ok = self.split_of(self.group.canonical_numbers(tabs)) == want
            out.append(tabs[ok])
            have += int(ok.sum())
            if have >= n:
                return np.concatenate(out)[:n]
        raise RuntimeError(f"could not draw {n} rules of split {split}")
