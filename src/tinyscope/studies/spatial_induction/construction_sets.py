"""The positions a gather-and-match construction predicts, for every scored query of a batch of
cellular-automaton streams (spatial-induction paper, App. I.5-I.6, Definition 2).

Query ``n`` is the input position that predicts the cell (t, z) = unrho(n + 1) with t >= T0. The
token at ``n`` has the (virtual) address (t, kappa) with kappa = z - u_d (App. C.1).

* Layer-1 routing cells: the cells (t - 1, kappa + u) for u in U = D_K u (D_K + u_d), the
  neighbourhoods of the query's own cell and of the target cell, one step back.
* Layer-2 matching precedents: the earlier cells m <= n, of steps t' >= 1, whose parent
  configuration equals the target's, P_{t',z'} = P_{t,z}.
* Controls (App. I.6): L1 random cells are drawn from the other cells of step t - 1; L2 random
  cells from the completed non-matching cells (m <= n, t' >= 1, P_{t',z'} != P_{t,z}).
* Partial matches (a diagnostic beyond the paper): for every completed cell, the number of the k
  parent cells in which its configuration agrees with the target's (k on the matching precedents).

All sets are boolean masks over the model's input positions, shape (Q, N_in).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyscope.studies.spatial_induction.evolve import parent_codes
from tinyscope.studies.spatial_induction.serialize import Layout


@dataclass
class QuerySets:
    """Scored queries of a batch and their predicted position sets.

    batch, pos:     (Q,) trajectory index and input position of each query.
    target:         (Q,) true next cell state; config: (Q,) the target's parent configuration code.
    routing:        (Q, N_in) L1 routing cells;   routing_pool: (Q, N_in) other cells of step t - 1.
    matching:       (Q, N_in) L2 matching precedents; matching_pool: (Q, N_in) non-matching completed cells.
    agreement:      (Q, N_in) int8, parent cells agreeing with the target's configuration (0..k) at
                    completed cells, -1 elsewhere.
    """

    batch: np.ndarray
    pos: np.ndarray
    target: np.ndarray
    config: np.ndarray
    routing: np.ndarray
    routing_pool: np.ndarray
    matching: np.ndarray
    matching_pool: np.ndarray
    agreement: np.ndarray

    def __len__(self) -> int:
        return len(self.pos)


def routing_positions(layout: Layout, T0: int) -> tuple[np.ndarray, np.ndarray]:
    """The scored queries (q,) and their routing cells rho(t - 1, kappa + u), u in U in the order
    of ``Lattice.routing_set()``, wrapped on the torus: (q, |U|) input positions."""
    queries = np.flatnonzero(layout.eval_mask(T0))  # (q,) input positions with a cell target at t >= T0
    t_q, kappa, _ = layout.unrho(queries)  # virtual address of the query token
    U = np.asarray(layout.lattice.routing_set())  # (|U|, d)
    cells = (kappa[:, None, :] + U[None]) % np.asarray(layout.lattice.shape)  # (q, |U|, d)
    return queries, layout.rho((t_q - 1)[:, None], cells)  # (q,), (q, |U|)


def query_sets(layout: Layout, traj: np.ndarray, T0: int) -> QuerySets:
    """Routing and matching sets of every scored query of trajectories (B, T, *shape)."""
    lat = layout.lattice
    B, N = traj.shape[0], layout.input_length
    queries, routing_pos = routing_positions(layout, T0)  # (q,), (q, |U|)
    t_tgt, z_tgt, _ = layout.unrho(queries + 1)  # (q,), (q, d)
    t_q = layout.unrho(queries)[0]

    # L1: the routing cells of each query
    routing = np.zeros((len(queries), N), dtype=bool)
    np.put_along_axis(routing, routing_pos, True, axis=1)
    step_cells = layout.cell_positions()  # (T, *shape)
    prev_step = np.zeros((len(queries), N + 1), dtype=bool)
    prev_step[np.arange(len(queries))[:, None], step_cells.reshape(layout.T, -1)[t_q - 1]] = True
    routing_pool = prev_step[:, :N] & ~routing

    # L2: earlier cells with the same parent configuration as the target.
    codes = parent_codes(lat, traj)  # (B, T, *shape), -1 at t = 0
    code_at = np.full((B, N + 1), -1, dtype=np.int64)  # configuration of the cell at each stream position
    code_at[:, step_cells.ravel()] = codes.reshape(B, -1)
    code_at = code_at[:, :N]
    z_index = tuple(z_tgt[:, i] for i in range(lat.dim))
    tgt_code = codes[:, t_tgt, *z_index]  # (B, q)
    tgt_state = traj[:, t_tgt, *z_index]  # (B, q)
    causal = np.arange(N)[None, :] <= queries[:, None]  # (q, N) keys visible from each query
    completed = (code_at >= 0)[:, None, :] & causal[None]  # (B, q, N) cells of t' >= 1 at m <= n
    match = completed & (code_at[:, None, :] == tgt_code[:, :, None])  # (B, q, N)
    pool = completed & ~match
    key_digits, tgt_digits = lat.decode(np.maximum(code_at, 0)), lat.decode(tgt_code)  # (B, N, k), (B, q, k)
    agreement = np.zeros(match.shape, dtype=np.int8)  # (B, q, N)
    for j in range(lat.k):
        agreement += key_digits[:, None, :, j] == tgt_digits[:, :, None, j]
    agreement[~completed] = -1

    Q = B * len(queries)
    return QuerySets(
        batch=np.repeat(np.arange(B), len(queries)),
        pos=np.tile(queries, B),
        target=tgt_state.reshape(Q).astype(np.int64),
        config=tgt_code.reshape(Q),
        routing=np.broadcast_to(routing, (B, *routing.shape)).reshape(Q, N),
        routing_pool=np.broadcast_to(routing_pool, (B, *routing_pool.shape)).reshape(Q, N),
        matching=match.reshape(Q, N),
        matching_pool=pool.reshape(Q, N),
        agreement=agreement.reshape(Q, N),
    )


def random_subsets(pool: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """For each row, ``counts[i]`` positions drawn uniformly without replacement from ``pool[i]``.

    Returns (mask (Q, N), ok (Q,)); rows whose pool is smaller than their count get an empty mask
    and ok = False (App. I.6: those queries are left unmodified and counted).
    """
    keys = np.where(pool, rng.random(pool.shape), -1.0)  # (Q, N) random keys on the pool
    order = np.argsort(-keys, axis=1)
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(pool.shape[1])[None].repeat(len(pool), 0), axis=1)
    ok = pool.sum(1) >= counts
    mask = (ranks < counts[:, None]) & pool & ok[:, None]
    return mask, ok
