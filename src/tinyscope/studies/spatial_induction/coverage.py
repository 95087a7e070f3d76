"""The coverage filter (App. D.1, App. I.1): keep trajectories whose context transitions
(t = 1 .. T0 - 1, parents at t = 0 .. T0 - 2) contain every one of the V^k configurations, so
that every scored query at t >= T0 is resolvable (Lemma D.1).

The rule of a trajectory is drawn once from its pool and kept; only the initial state (and, for
stochastic rules, the evolution noise) is redrawn, at most ``tries`` times. A deterministic rule is
*coverage-feasible* (for a lattice and T0) when one of ``tries`` initial states drawn from a stream
fixed by its rule number covers the context; that witness makes feasibility a property of the
rule, so infeasible rules can leave an evaluation pool up front instead of being reweighted by
their acceptance rate.
"""
from __future__ import annotations

import numpy as np

from tinyscope.studies.spatial_induction.evolve import evolve, parent_codes
from tinyscope.studies.spatial_induction.lattice import Lattice
from tinyscope.studies.spatial_induction.rules import numbers_of

DEFAULT_TRIES = 64
WITNESS_TAG = 0xC0FE  # the feasibility stream, apart from every sampling stream


def context_coverage(lattice: Lattice, traj: np.ndarray, T0: int) -> np.ndarray:
    """(B, V^k) bool: configuration c occurs as a parent among steps 1..T0-1."""
    from tinyscope.errors import check

    check(2 <= T0 <= traj.shape[1], f"T0={T0} must lie in [2, T={traj.shape[1]}]")
    B = traj.shape[0]
    codes = parent_codes(lattice, traj[:, :T0])[:, 1:].reshape(B, -1)  # (B, (T0-1)|G|)
    seen = np.zeros((B, lattice.n_configs), dtype=bool)
    np.put_along_axis(seen, codes, True, axis=1)
    return seen


def is_covered(lattice: Lattice, traj: np.ndarray, T0: int) -> np.ndarray:
    """(B,) bool: every configuration appears in the context."""
    return context_coverage(lattice, traj, T0).all(-1)


def cover(lattice: Lattice, tables: np.ndarray, T: int, T0: int, rng: np.random.Generator,
          tries: int = DEFAULT_TRIES, x0_fallback: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories (n, T, *shape) of the given rules, each rule kept: its initial state is
    redrawn from ``rng`` until the context is covered, at most ``tries`` times. Returns
    (trajectories, covered (n,) bool). Rules still uncovered start from ``x0_fallback`` (n, *shape)
    where given (a feasibility witness), else keep their last draw and covered = False."""
    tables = np.asarray(tables)
    n = len(tables)
    traj = np.zeros((n, T, *lattice.shape), dtype=np.uint8)
    ok = np.zeros(n, dtype=bool)
    todo = np.arange(n)
    for _ in range(tries):
        if not len(todo):
            break
        x = evolve(lattice, tables[todo], T, rng)  # (m, T, *shape)
        hit = is_covered(lattice, x, T0)
        traj[todo] = x
        ok[todo[hit]] = True
        todo = todo[~hit]
    if x0_fallback is not None and len(todo):  # a witness of the rule itself
        traj[todo] = evolve(lattice, tables[todo], T, rng, x0=x0_fallback[todo])
        ok[todo] = is_covered(lattice, traj[todo], T0)
    return traj, ok


def _witness_states(lattice: Lattice, numbers: np.ndarray, attempt: int) -> np.ndarray:
    """Initial states (n, *shape) of attempt ``attempt`` of the feasibility stream of each rule
    number: the base-V digits of words splitmix64(splitmix64(number ^ tag) + attempt, word)."""
    from tinyscope.studies.spatial_induction.splits import splitmix64

    V, cells = lattice.V, lattice.volume
    per_word = int(np.floor(63 / np.log2(V)))  # base-V digits one 64-bit word carries
    n_words = -(-cells // per_word)
    with np.errstate(over="ignore"):
        key = splitmix64(splitmix64(numbers.astype(np.uint64) ^ np.uint64(WITNESS_TAG)) + np.uint64(attempt))
        words = splitmix64(key[:, None] * np.uint64(n_words) + np.arange(n_words, dtype=np.uint64))  # (n, W)
    powers = np.uint64(V) ** np.arange(per_word, dtype=np.uint64)  # (D,)
    digits = (words[:, :, None] // powers) % np.uint64(V)  # (n, W, D)
    return digits.reshape(len(numbers), -1)[:, :cells].astype(np.uint8).reshape(len(numbers), *lattice.shape)


def _neighbour_index(lattice: Lattice) -> np.ndarray:
    """(k, |G|): flat index of cell z + delta_j for every flat cell z."""
    grid = np.indices(lattice.shape).reshape(lattice.dim, -1).T  # (|G|, d)
    shape = np.asarray(lattice.shape)
    out = []
    for delta in lattice.offsets:
        z = (grid + np.asarray(delta)) % shape
        out.append(np.ravel_multi_index(z.T, lattice.shape))
    return np.stack(out)


def context_covered(lattice: Lattice, tables: np.ndarray, x0: np.ndarray, T0: int) -> np.ndarray:
    """(n,) bool: the deterministic rules' contexts from ``x0`` (n, *shape) cover every configuration
    (the same test as :func:`is_covered` on ``evolve(..., x0=x0)``, on flat index arrays)."""
    n, C = len(tables), lattice.n_configs
    nbr = _neighbour_index(lattice)  # (k, |G|)
    powers = lattice.V ** np.arange(lattice.k - 1, -1, -1, dtype=np.int64)  # (k,)
    x = x0.reshape(n, -1).astype(np.int64)  # (n, |G|)
    seen = np.zeros(n * C, dtype=bool)
    offset = (np.arange(n, dtype=np.int64) * C)[:, None]  # (n, 1)
    for _ in range(T0 - 1):
        codes = x[:, nbr[0]] * powers[0]  # (n, |G|)
        for j in range(1, len(nbr)):
            codes += x[:, nbr[j]] * powers[j]
        seen[(codes + offset).ravel()] = True
        x = np.take_along_axis(tables, codes, axis=1)  # (n, |G|)
    return seen.reshape(n, C).all(-1)


def feasibility(lattice: Lattice, tables: np.ndarray, T0: int, tries: int = DEFAULT_TRIES,
                group=None) -> tuple[np.ndarray, np.ndarray]:
    """Coverage-feasibility of deterministic rules (n, V^k): (feasible (n,) bool, witness initial
    states (n, *shape), the first covering one of the tested rule's own stream; meaningless where
    not feasible). Depends only on the rule, the lattice, T0 and ``tries``. With a symmetry
    ``group`` the canonical member of each rule's orbit is tested (and witnessed): the chance
    that a uniform initial state covers the context is the same for every member of an orbit, so
    feasibility is then a property of the class."""
    tables = np.ascontiguousarray(tables, dtype=np.int64)
    n = len(tables)
    if group is not None and n:
        canon = numbers_of(group.orbit(tables), lattice.V).min(0)  # (n,)
        powers = np.uint64(lattice.V) ** np.arange(tables.shape[1], dtype=np.uint64)
        tables = ((canon[:, None] // powers) % np.uint64(lattice.V)).astype(np.int64)
    numbers = numbers_of(tables, lattice.V)
    found = np.zeros(n, dtype=bool)
    witness = np.zeros((n, *lattice.shape), dtype=np.uint8)
    todo = np.arange(n)
    for attempt in range(tries):
        if not len(todo):
            break
        x0 = _witness_states(lattice, numbers[todo], attempt)
        hit = context_covered(lattice, tables[todo], x0, T0)
        witness[todo[hit]] = x0[hit]
        found[todo[hit]] = True
        todo = todo[~hit]
    return found, witness
