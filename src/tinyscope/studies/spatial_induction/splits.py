"""Rule pools for train / val-out / test, disjoint at the canonical level (App. I.1).

* Enumerable spaces (ECA: 256 rules, 88 classes): canonical classes are stratified (ECA: by
  Wolfram class) and split per stratum; each class is then expanded to its rules.
* Spaces too large to enumerate (3^27, 2^32): materialized, stratified pools of App. I.1's
  sizes, see :mod:`.pools`.

Named rules can be held out of training: their classes go to the test split.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.studies.spatial_induction.symmetry import eca_classes, wolfram_class

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
    split 70 / 9 / 9, stratified by Wolfram class, ``holdout`` classes forced into test).

    Each held-out split takes one class per Wolfram class and the rest in proportion to class
    sizes (:func:`_allocate`); the classes are drawn uniformly within each stratum. App. I.1
    also fixes the sizes after orbit expansion (203 / 28 / 25 rules) without listing the classes:
    with ``rule_counts`` set, draw ``a`` = 0, 1, ... uses the stream (seed, 12, a) and the first
    draw whose expanded sizes equal ``rule_counts`` is kept (None keeps draw 0)."""

    seed: int = 0
    n_val: int = 9
    n_test: int = 9
    holdout: tuple[int, ...] = (110,)
    classes: dict = field(default_factory=eca_classes)
    rule_counts: tuple[int, int, int] | None = (203, 28, 25)
    max_draws: int = 10_000

    def __post_init__(self):
        strata: dict[int, list[int]] = {}
        for canon in sorted(self.classes):
            strata.setdefault(wolfram_class(canon), []).append(canon)
        forced = {min(self._class_of(h)) for h in self.holdout}
        val_q = _allocate({s: len(v) for s, v in strata.items()}, self.n_val)
        test_q = _allocate({s: len(v) for s, v in strata.items()}, self.n_test)
        for draw in range(self.max_draws):
            rng = np.random.default_rng([int(self.seed), 12, draw])
            self.assignment: dict[int, str] = {}
            for s, members in strata.items():
                members = list(rng.permutation(members))
                pinned = [c for c in members if c in forced]
                free = [c for c in members if c not in forced]
                n_test_free = max(test_q[s] - len(pinned), 0)
                test = pinned + free[:n_test_free]
                val = free[n_test_free:n_test_free + val_q[s]]
                for c in members:
                    self.assignment[int(c)] = "test" if c in test else "val" if c in val else "train"
            self.draw = draw
            if self.rule_counts is None or tuple(len(self.rules(k)) for k in SPLITS) == tuple(self.rule_counts):
                return
        raise ValueError(f"no stratified split of seed {self.seed} gives {self.rule_counts} rules in {self.max_draws} draws")

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
