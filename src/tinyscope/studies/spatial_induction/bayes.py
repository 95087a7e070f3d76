"""The Bayes posterior predictive of Theorem 3 / D.3 and the true-rule predictive.

For the cell (t, z) with t >= 1 and parent configuration c = P_{t,z}, counting the cells
(t', z') with t' >= 1 that come earlier in the stream, rho(t', z') < rho(t, z):

    n_c     = #{earlier cells with P_{t',z'} = c},   n_{c,y} = #{those with x_{t',z'} = y}
    P_alpha(y | c) = (n_{c,y} + alpha) / (n_c + V alpha)

which is the optimal prediction at the input position rho(t, z) - 1 (the query that targets
(t, z)). ``alpha = 1`` is the paper's add-one smoothed k-gram; ``alpha = 0`` is the empirical
frequency (the deterministic lookup of Corollary D.4), uniform where n_c = 0.
The query is *resolvable* when n_c >= 1 (Definition 4).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyscope.errors import check
from tinyscope.studies.spatial_induction.evolve import parent_codes
from tinyscope.studies.spatial_induction.lattice import Lattice
from tinyscope.studies.spatial_induction.serialize import Layout


@dataclass
class Predictive:
    """Per-cell predictive distributions of a batch of trajectories.

    probs:      (B, T, *shape, V) float64; uniform at t = 0.
    n_c:        (B, T, *shape) int; earlier occurrences of the cell's parent configuration.
    resolvable: (B, T, *shape) bool; t >= 1 and n_c >= 1.
    """

    probs: np.ndarray
    n_c: np.ndarray
    resolvable: np.ndarray


def kgram_counts(lattice: Lattice, traj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n_c, n_{c,y}) at every cell: shapes (B, T, *shape) and (B, T, *shape, V); zero at t = 0."""
    B, T = traj.shape[:2]
    V, C = lattice.V, lattice.n_configs
    codes = parent_codes(lattice, traj).reshape(B, -1)[:, lattice.volume:]  # (B, M) stream order, t >= 1
    values = traj.reshape(B, -1)[:, lattice.volume:].astype(np.int64)  # (B, M)
    M = codes.shape[1]
    onehot = np.zeros((B, M, C * V), dtype=np.int32)
    np.put_along_axis(onehot, (codes * V + values)[..., None], 1, axis=-1)
    before = np.cumsum(onehot, axis=1) - onehot  # (B, M, C*V) counts strictly earlier
    idx = codes[..., None] * V + np.arange(V)  # (B, M, V)
    n_cy_flat = np.take_along_axis(before, idx, axis=-1)  # (B, M, V)
    n_cy = np.zeros((B, T * lattice.volume, V), dtype=np.int64)
    n_cy[:, lattice.volume:] = n_cy_flat
    n_cy = n_cy.reshape(B, T, *lattice.shape, V)
    return n_cy.sum(-1), n_cy


def posterior_predictive(lattice: Lattice, traj: np.ndarray, alpha: float = 1.0) -> Predictive:
    """Theorem 3 at every cell of trajectories (B, T, *shape), vectorized over the batch."""
    check(alpha >= 0, f"alpha={alpha} must be >= 0")
    V = lattice.V
    n_c, n_cy = kgram_counts(lattice, traj)
    if alpha > 0:
        probs = (n_cy + alpha) / (n_c[..., None] + V * alpha)
    else:
        probs = np.where(n_c[..., None] > 0, n_cy / np.maximum(n_c, 1)[..., None], 1.0 / V)
    resolvable = n_c >= 1
    resolvable[:, 0] = False
    return Predictive(probs, n_c, resolvable)


def true_predictive(lattice: Lattice, traj: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """f(. | P_{t,z}) at every cell (B, T, *shape, V) from the generating ``tables`` (B, C[, V]);
    uniform at t = 0."""
    V = lattice.V
    tables = np.asarray(tables)
    if tables.ndim == 2:
        tables = np.eye(V)[tables]  # (B, C, V)
    codes = parent_codes(lattice, traj)  # (B, T, *shape)
    B = traj.shape[0]
    flat = codes.reshape(B, -1)
    out = tables[np.arange(B)[:, None], np.maximum(flat, 0)]  # (B, T|G|, V)
    out[flat < 0] = 1.0 / V
    return out.reshape(*traj.shape, V)


def stream_predictive(layout: Layout, traj: np.ndarray, alpha: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The posterior predictive at every model input position: probs (B, N - 2, V) (uniform where
    the target is a separator or an initial cell) and resolvable (B, N - 2) bool."""
    pred = posterior_predictive(layout.lattice, traj, alpha)
    probs = layout.to_stream(pred.probs, fill=1.0 / layout.V)
    return probs, layout.to_stream(pred.resolvable, fill=False)
