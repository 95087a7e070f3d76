"""Rule tables (Sec. 3.1, App. I.1).

A deterministic rule is an integer table ``f`` of shape (V^k,): ``f[code]`` is the next state of a
cell whose parent configuration has base-V ``code`` (see :mod:`.lattice`). A stochastic rule is a
table ``p`` of shape (V^k, V) whose rows are distributions f(. | c); the deterministic rules are
the alpha -> 0 corner, and :func:`as_stochastic` turns one into one-hot rows.

Rule numbers generalize Wolfram's: ``number = sum_c f[c] V^c``, so bit ``c`` of an ECA number is
the image of configuration ``c``.
"""
from __future__ import annotations

import numpy as np

from tinyscope.errors import check
from tinyscope.studies.spatial_induction.lattice import ELEMENTARY, MOORE, Lattice


def table_from_number(number: int, V: int = 2, k: int = 3) -> np.ndarray:
    """The deterministic table (V^k,) of rule ``number`` (base-V digits, least significant = code 0)."""
    n_configs = V ** k
    check(0 <= int(number) < V ** n_configs, f"rule number {number} must lie in [0, {V}^{n_configs})")
    number = int(number)
    out = np.empty(n_configs, dtype=np.int64)
    for c in range(n_configs):
        number, out[c] = divmod(number, V)
    return out


def number_of(table: np.ndarray, V: int = 2) -> int:
    """Inverse of :func:`table_from_number` for one table (a Python int: 3^27 rules overflow nothing)."""
    return sum(int(y) * V ** c for c, y in enumerate(np.asarray(table).tolist()))


def numbers_of(tables: np.ndarray, V: int = 2) -> np.ndarray:
    """Rule numbers of a batch of tables (..., V^k) as uint64 (needs V^(V^k) < 2^64)."""
    tables = np.asarray(tables, dtype=np.uint64)
    powers = np.uint64(V) ** np.arange(tables.shape[-1], dtype=np.uint64)
    return (tables * powers).sum(-1, dtype=np.uint64)


def wolfram(number: int) -> np.ndarray:
    """Elementary rule ``number`` in 0..255: ``f[4 l + 2 c + r]`` = bit of the number."""
    check(0 <= int(number) <= 255, f"Wolfram rule {number} must lie in 0..255")
    return table_from_number(number, 2, 3)


def stavskaya(p: float) -> np.ndarray:
    """Stavskaya's probabilistic CA on the elementary neighbourhood, 0/1 convention of Mendonca:
    with probability ``p`` the next state is 1, otherwise it is ``x[i-1] AND x[i]`` (the right
    neighbour is ignored). Returns the stochastic table (8, 2)."""
    check(0 <= p <= 1, f"Stavskaya p={p} must lie in [0, 1]")
    digits = Lattice((3,), ELEMENTARY, 2).decode(np.arange(8))  # (8, 3) = (l, c, r)
    p_one = p + (1 - p) * (digits[:, 0] & digits[:, 1])  # (8,)
    return np.stack([1 - p_one, p_one], axis=-1)


def game_of_life() -> np.ndarray:
    """Conway's Life (B3/S23) on the Moore neighbourhood in :data:`MOORE` order; table (512,)."""
    digits = Lattice((3, 3), MOORE, 2).decode(np.arange(512))  # (512, 9)
    centre = digits[:, 4]
    alive_neighbours = digits.sum(-1) - centre
    return ((alive_neighbours == 3) | ((centre == 1) & (alive_neighbours == 2))).astype(np.int64)


def random_deterministic(rng: np.random.Generator, n: int, V: int, k: int) -> np.ndarray:
    """``n`` tables (n, V^k) with i.i.d. uniform entries: uniform over all V^(V^k) rules."""
    return rng.integers(0, V, size=(n, V ** k), dtype=np.int64)


def dirichlet_tables(rng: np.random.Generator, n: int, V: int, k: int, alpha: float = 1.0) -> np.ndarray:
    """``n`` stochastic tables (n, V^k, V) with independent Dirichlet(alpha 1_V) rows (Def. 1)."""
    check(alpha > 0, f"Dirichlet alpha={alpha} must be > 0")
    g = rng.gamma(alpha, size=(n, V ** k, V))
    g_sum = g.sum(-1, keepdims=True)
    # alpha << 1 can underflow every gamma draw of a row to 0: fall back to a uniform pick
    empty = g_sum[..., 0] == 0
    if empty.any():
        g[empty] = np.eye(V)[rng.integers(0, V, size=int(empty.sum()))]
        g_sum = g.sum(-1, keepdims=True)
    return g / g_sum


def as_stochastic(tables: np.ndarray, V: int) -> np.ndarray:
    """One-hot rows (..., V^k, V) of deterministic tables (..., V^k)."""
    return np.eye(V)[np.asarray(tables)]


def is_stochastic(tables: np.ndarray, lattice: Lattice) -> bool:
    """True for (..., V^k, V) probability tables, False for (..., V^k) integer tables."""
    tables = np.asarray(tables)
    if tables.shape[-1] == lattice.V and tables.ndim >= 2 and tables.shape[-2] == lattice.n_configs \
            and tables.dtype.kind == "f":
        return True
    check(tables.shape[-1] == lattice.n_configs,
          f"rule tables of shape {tables.shape} do not fit {lattice.n_configs} configurations")
    return False


def near(tables: np.ndarray, references: np.ndarray, radius: float) -> np.ndarray:
    """Which stochastic ``tables`` (n, C, V) lie within ``radius`` of some reference (R, C, V) in
    the sup norm max_{c,y} |p(y | c) - r(y | c)|: a boolean mask (n,)."""
    tables, references = np.asarray(tables, dtype=float), np.asarray(references, dtype=float)
    if not len(references):
        return np.zeros(len(tables), dtype=bool)
    dist = np.abs(tables[:, None] - references[None]).max(axis=(-2, -1))  # (n, R)
    return (dist < radius).any(-1)


NAMED_RULES = {"rule110": lambda: wolfram(110), "rule30": lambda: wolfram(30), "rule90": lambda: wolfram(90),
               "stavskaya": lambda: stavskaya(0.29), "life": game_of_life}
