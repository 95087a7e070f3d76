"""Symmetries of rule tables, canonical forms and the 88 ECA classes (App. I.1, REFERENCE.md).

A group element g = (M, pi) pairs a lattice map M (a d x d integer matrix permuting the
neighbourhood offsets: identity, the 1D reflection, or the dihedral group D4 in 2D) with a
permutation pi of the states. It maps rule f to the rule whose trajectories are those of f
with every state relabelled by pi and space transformed by M:

    f'(c') = pi( f( pi^-1(c'_{sigma(1)}), ..., pi^-1(c'_{sigma(k)}) ) ),   M delta_j = delta_{sigma(j)}.

For ECAs the reflection maps bit i to bit D[i] (D = 0,4,2,6,1,5,3,7) and complementation sets
bit i to 1 - bit (7 - i), giving 88 classes. The canonical form of a rule is the member of its
orbit with the smallest rule number (:func:`.rules.number_of`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.studies.spatial_induction.lattice import ELEMENTARY, Lattice
from tinyscope.studies.spatial_induction.rules import numbers_of, table_from_number

SPATIAL = ("none", "reflection", "d4")
STATES = ("none", "complement", "all")


def _spatial_maps(name: str, dim: int) -> list[np.ndarray]:
    eye = np.eye(dim, dtype=np.int64)
    if name == "none":
        return [eye]
    if name == "reflection":
        flip = eye.copy()
        flip[-1, -1] = -1  # reflect the innermost axis (the only axis in 1D)
        return [eye, flip]
    check(dim == 2, f"symmetry spatial='d4' needs a 2D lattice, got dimension {dim}")
    rot = np.array([[0, -1], [1, 0]])
    flip = np.array([[1, 0], [0, -1]])
    out = []
    for r in range(4):
        R = np.linalg.matrix_power(rot, r)
        out += [R, R @ flip]
    return out


def _state_perms(name: str, V: int) -> list[np.ndarray]:
    if name == "none":
        return [np.arange(V)]
    if name == "complement":
        return [np.arange(V), np.arange(V)[::-1].copy()]
    return [np.array(p) for p in itertools.permutations(range(V))]


@dataclass(frozen=True)
class SymmetryGroup:
    """The group spatial x states acting on rule tables of ``lattice`` (a parameter of every
    split; runs record ``name``). ECA: reflection x complement; paper V=3: states='all'
    (S_3); paper 2D von Neumann: states='complement' (public code: d4 x complement)."""

    lattice: Lattice
    spatial: str = "reflection"
    states: str = "complement"

    def __post_init__(self):
        check_choice("symmetry.spatial", self.spatial, SPATIAL)
        check_choice("symmetry.states", self.states, STATES)

    @property
    def name(self) -> str:
        return f"{self.spatial}x{self.states}"

    @cached_property
    def elements(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each element as (src, pi, pi_inv): f'[c'] = pi[f[src[c']]]."""
        lat = self.lattice
        offsets = [tuple(o) for o in lat.offsets]
        digits = lat.decode(np.arange(lat.n_configs))  # (C, k)
        powers = lat.V ** np.arange(lat.k - 1, -1, -1)
        out = []
        for M in _spatial_maps(self.spatial, lat.dim):
            images = [tuple(int(a) for a in M @ np.array(o)) for o in offsets]
            check(set(images) == set(offsets), f"symmetry {self.spatial} does not map the neighbourhood to itself")
            sigma = np.array([offsets.index(im) for im in images])
            for pi in _state_perms(self.states, lat.V):
                pi_inv = np.argsort(pi)
                src_digits = pi_inv[digits[:, sigma]]  # (C, k)
                out.append(((src_digits * powers).sum(-1), pi, pi_inv))
        return out

    def __len__(self) -> int:
        return len(self.elements)

    def orbit(self, tables: np.ndarray) -> np.ndarray:
        """All images (G, ..., C) of deterministic tables (..., C)."""
        tables = np.asarray(tables)
        return np.stack([pi[tables[..., src]] for src, pi, _ in self.elements])

    def orbit_stochastic(self, tables: np.ndarray) -> np.ndarray:
        """All images (G, ..., C, V) of stochastic tables (..., C, V)."""
        tables = np.asarray(tables)
        return np.stack([tables[..., src, :][..., pi_inv] for src, _, pi_inv in self.elements])

    def canonical_numbers(self, tables: np.ndarray) -> np.ndarray:
        """Rule number of the canonical (smallest-number) member of each table's orbit; uint64."""
        check(self.lattice.n_configs * np.log2(self.lattice.V) < 64,
              "canonical numbers need V^(V^k) < 2^64; use canonical_tables for larger rule spaces")
        return numbers_of(self.orbit(tables), self.lattice.V).min(0)

    def canonical_tables(self, tables: np.ndarray) -> np.ndarray:
        """Canonical member (..., C) of each orbit: lexicographically smallest from the highest code down."""
        orbit = self.orbit(tables)  # (G, ..., C)
        keys = orbit[..., ::-1]
        flat = keys.reshape(len(self), -1, keys.shape[-1])  # (G, n, C)
        best = np.zeros(flat.shape[1], dtype=np.int64)
        for i in range(flat.shape[1]):
            best[i] = min(range(len(self)), key=lambda g: tuple(flat[g, i]))
        chosen = orbit.reshape(len(self), -1, orbit.shape[-1])[best, np.arange(flat.shape[1])]
        return chosen.reshape(np.asarray(tables).shape)


# ------------------------------------------------------------------ elementary classes
ECA_GROUP_LATTICE = Lattice((3,), ELEMENTARY, 2)
WOLFRAM_CLASS_I = (0, 8, 32, 40, 128, 136, 160, 168)
WOLFRAM_CLASS_III = (18, 22, 30, 45, 60, 90, 105, 122, 126, 146, 150)
WOLFRAM_CLASS_IV = (41, 54, 106, 110)


def eca_group() -> SymmetryGroup:
    return SymmetryGroup(ECA_GROUP_LATTICE, "reflection", "complement")


def eca_canonical(number: int) -> int:
    """Smallest rule number in the class of ECA ``number`` under {id, R, C, RC}."""
    return int(eca_group().canonical_numbers(table_from_number(number))[()])


def eca_classes() -> dict[int, list[int]]:
    """The 88 ECA equivalence classes: canonical number -> sorted member numbers."""
    canon = eca_group().canonical_numbers(np.stack([table_from_number(n) for n in range(256)]))
    classes: dict[int, list[int]] = {}
    for n, c in enumerate(canon.tolist()):
        classes.setdefault(int(c), []).append(n)
    return classes


def wolfram_class(number: int) -> int:
    """Wolfram behavioural class 1..4 of ECA ``number`` (through its canonical representative)."""
    c = eca_canonical(number)
    if c in WOLFRAM_CLASS_I:
        return 1
    if c in WOLFRAM_CLASS_III:
        return 3
    if c in WOLFRAM_CLASS_IV:
        return 4
    return 2
