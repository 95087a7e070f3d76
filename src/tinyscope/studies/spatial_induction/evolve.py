"""Batched evolution of (stochastic) cellular automata on a torus (Definition 1).

x_0 is i.i.d. uniform on [V]; for t >= 1 every cell draws x_{t,z} ~ f(. | P_{t,z})
independently given step t-1. One numpy pass per time step serves the whole batch, each
trajectory with its own rule table.
"""
from __future__ import annotations

import numpy as np

from tinyscope.errors import check
from tinyscope.studies.spatial_induction.lattice import Lattice
from tinyscope.studies.spatial_induction.rules import is_stochastic


def random_initial(rng: np.random.Generator, lattice: Lattice, n: int) -> np.ndarray:
    """``n`` initial states (n, *shape), i.i.d. uniform on [V]."""
    return rng.integers(0, lattice.V, size=(n, *lattice.shape), dtype=np.uint8)


def step(lattice: Lattice, x: np.ndarray, tables: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
    """One synchronous update of states ``x`` (B, *shape) under per-trajectory ``tables``.

    ``tables`` is (B, V^k) (deterministic) or (B, V^k, V) (stochastic, then ``u`` (B, *shape)
    are the uniforms used for inverse-CDF sampling).
    """
    B = x.shape[0]
    codes = lattice.config_codes(x).reshape(B, -1)  # (B, |G|)
    if u is None:
        nxt = np.take_along_axis(tables, codes, axis=1)  # (B, |G|)
    else:
        cdf = np.cumsum(tables, axis=-1)[..., :-1]  # (B, C, V-1)
        rows = cdf[np.arange(B)[:, None], codes]  # (B, |G|, V-1)
        nxt = (u.reshape(B, -1, 1) >= rows).sum(-1)  # (B, |G|)
    return nxt.reshape(x.shape).astype(np.uint8)


def evolve(lattice: Lattice, tables: np.ndarray, T: int, rng: np.random.Generator,
           x0: np.ndarray | None = None) -> np.ndarray:
    """Trajectories (B, T, *shape) of uint8 states.

    tables: (B, V^k) ints, (B, V^k, V) probabilities, or one unbatched table used for all B
            (then B comes from ``x0``, which is required).
    x0:     (B, *shape) initial states; drawn i.i.d. uniform with ``rng`` when None.
    Same ``rng`` state, same bytes.
    """
    check(T >= 1, f"T={T} time steps must be >= 1")
    tables = np.asarray(tables)
    stochastic = is_stochastic(tables, lattice)
    batched = tables.ndim == (3 if stochastic else 2)
    if not batched:
        check(x0 is not None, "an unbatched rule table needs x0 to fix the batch size")
        tables = np.broadcast_to(tables, (len(x0), *tables.shape))
    B = tables.shape[0]
    if x0 is None:
        x0 = random_initial(rng, lattice, B)
    check(x0.shape == (B, *lattice.shape), f"x0 of shape {x0.shape} must be {(B, *lattice.shape)}")
    if not stochastic:
        tables = np.ascontiguousarray(tables, dtype=np.int64)
    traj = np.empty((B, T, *lattice.shape), dtype=np.uint8)
    traj[:, 0] = x0
    for t in range(1, T):
        u = rng.random(size=(B, *lattice.shape)) if stochastic else None
        traj[:, t] = step(lattice, traj[:, t - 1], tables, u)
    return traj


def parent_codes(lattice: Lattice, traj: np.ndarray) -> np.ndarray:
    """Parent-configuration codes (B, T, *shape) of every cell; -1 at t = 0 (no parents)."""
    codes = np.full(traj.shape, -1, dtype=np.int64)
    codes[:, 1:] = lattice.config_codes(traj[:, :-1])
    return codes
