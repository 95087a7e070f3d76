"""Enumeration, counting and sampling of circuit expressions; class balancing and padding.

Depth as in :mod:`tinyscope.studies.circuits.grammar` (0 for a literal, 1 + the deepest child for
a node). Samplers take an explicit ``numpy.random.Generator``.
"""
from __future__ import annotations

from itertools import product
from typing import Callable, Sequence

import numpy as np

from tinyscope.errors import check_choice
from tinyscope.studies.circuits.grammar import Expr, Grammar


def _operand_tuples(pool: Sequence[Expr], arity: int, need: Callable[[tuple], bool]) -> list[tuple]:
    return [c for c in product(pool, repeat=arity) if need(c)]


def enumerate_depth(g: Grammar, d: int) -> list[Expr]:
    """Every expression of depth exactly ``d`` (d = 1 or 2; deeper sets are astronomically large).

    Order is deterministic: operator in vocabulary order, then operands lexicographically.
    """
    if d not in (1, 2):
        raise ValueError(f"enumerate_depth handles depth 1 or 2, got {d}; sample deeper ones")
    lits: list[Expr] = list(g.literals)
    if d == 1:
        pool, need = lits, (lambda c: True)
    else:
        pool = lits + enumerate_depth(g, 1)
        need = (lambda c: any(isinstance(x, tuple) for x in c))
    out = []
    for op, (arities, _) in g.operators.items():
        for k in arities:
            out.extend((op, c) for c in _operand_tuples(pool, k, need))
    return out


def count_depth(g: Grammar, d: int) -> int:
    """Number of expressions of depth exactly ``d`` (closed form, any d; Python ints)."""
    n_lit = len(g.literals)
    at_most = n_lit
    for _ in range(d):
        prev = at_most
        at_most = n_lit + sum(prev ** k for arities, _ in g.operators.values() for k in arities)
    below = n_lit
    for _ in range(d - 1):
        below = n_lit + sum(below ** k for arities, _ in g.operators.values() for k in arities)
    return at_most - (below if d >= 1 else 0)


def balance(values: np.ndarray, how: str = "upsample") -> np.ndarray:
    """Indices that balance a dataset over its classes ``values``.

    ``upsample``: every class repeated cyclically up to the largest class's count (no example is
    dropped); ``downsample``: each class cut to the smallest count (first ones kept); ``none``.
    """
    check_choice("task.balance", how, ("upsample", "downsample", "none"))
    values = np.asarray(values)
    if how == "none":
        return np.arange(len(values))
    groups = [np.flatnonzero(values == v) for v in np.unique(values)]
    size = max(map(len, groups)) if how == "upsample" else min(map(len, groups))
    return np.concatenate([np.resize(idx, size) for idx in groups])


def sample_expression(g: Grammar, rng: np.random.Generator, d: int, p_deep: float = 0.4) -> Expr:
    """A random expression of depth exactly ``d``.

    Operator uniform over the grammar's (operator, operand count) choices; each operand is an
    expression of depth ``d - 1`` with probability ``p_deep``, else a uniform literal, conditioned
    on at least one operand of depth ``d - 1`` (drawn by redrawing the deep/literal pattern).
    The paper says "uniformly sampled" without a generator; truly uniform trees of depth 30 would
    have ~2^30 leaves, so ``p_deep`` sets the size (see docs/circuit.md for the calibration).
    """
    choices = [(op, k) for op, (arities, _) in g.operators.items() for k in arities]
    n_lit = len(g.literals)

    def build(level: int) -> Expr:
        if level == 0:
            return g.literals[int(rng.integers(n_lit))]
        op, k = choices[int(rng.integers(len(choices)))]
        while True:
            deep = rng.random(k) < p_deep
            if deep.any():
                break
        return (op, tuple(build(level - 1) if dp else g.literals[int(rng.integers(n_lit))] for dp in deep))

    return build(int(d))


def sample_expressions(g: Grammar, rng: np.random.Generator, d: int, n: int, p_deep: float = 0.4) -> list[Expr]:
    return [sample_expression(g, rng, d, p_deep) for _ in range(n)]


def pad_batch(g: Grammar, seqs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(B, T) ids padded with BLANK, and the (B,) lengths."""
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    out = np.full((len(seqs), int(lengths.max(initial=1))), g.blank, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, lengths
