"""The coverage filter (App. D.1, App. I.1): keep trajectories whose context transitions
(t = 1 .. T0 - 1, parents at t = 0 .. T0 - 2) contain every one of the V^k configurations, so
that every scored query at t >= T0 is resolvable (Lemma D.1)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from tinyscope.errors import TinyscopeError, check
from tinyscope.studies.spatial_induction.evolve import parent_codes
from tinyscope.studies.spatial_induction.lattice import Lattice


def context_coverage(lattice: Lattice, traj: np.ndarray, T0: int) -> np.ndarray:
    """(B, V^k) bool: configuration c occurs as a parent among steps 1..T0-1."""
    check(2 <= T0 <= traj.shape[1], f"T0={T0} must lie in [2, T={traj.shape[1]}]")
    B = traj.shape[0]
    codes = parent_codes(lattice, traj[:, :T0])[:, 1:].reshape(B, -1)  # (B, (T0-1)|G|)
    seen = np.zeros((B, lattice.n_configs), dtype=bool)
    np.put_along_axis(seen, codes, True, axis=1)
    return seen


def is_covered(lattice: Lattice, traj: np.ndarray, T0: int) -> np.ndarray:
    """(B,) bool: every configuration appears in the context."""
    return context_coverage(lattice, traj, T0).all(-1)


def rejection_sample(draw: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]],
                     accept: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator, n: int,
                     max_rounds: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Draw candidate (rules, trajectories) batches with ``draw(rng, m)`` until ``n`` pass
    ``accept(trajectories)``; returns the first ``n`` accepted, in draw order."""
    rules, trajs, have = [], [], 0
    m = n
    for _ in range(max_rounds):
        r, x = draw(rng, m)
        ok = accept(x)
        rules.append(r[ok])
        trajs.append(x[ok])
        have += int(ok.sum())
        if have >= n:
            return np.concatenate(rules)[:n], np.concatenate(trajs)[:n]
        rate = max(ok.mean(), 1.0 / (4 * m))
        m = int(min(max((n - have) / rate * 1.2, 16), 64 * n + 64))
    raise TinyscopeError(f"coverage filter accepted only {have} of {n} trajectories after {max_rounds} rounds; "
                         "lengthen the context (task.T0) or enlarge the grid")
