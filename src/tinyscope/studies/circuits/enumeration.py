"""Enumeration, counting and sampling of circuit expressions; class balancing and padding.

Depth as in :mod:`tinyscope.studies.circuits.grammar` (0 for a literal, 1 + the deepest child for
a node). Samplers take an explicit ``numpy.random.Generator``.
"""
from __future__ import annotations

from itertools import product
from typing import Callable, Sequence

import numpy as np

from tinyscope.errors import check_choice
from tinyscope.studies.circuits.grammar import Expr, Grammar, encode

MAX_ENUMERATED = 10_000_000  # enumerate_depth refuses larger sets (listops-lra depth 1: 4.4e10)


def _operand_tuples(pool: Sequence[Expr], arity: int, need: Callable[[tuple], bool]) -> list[tuple]:
    return [c for c in product(pool, repeat=arity) if need(c)]


def enumerate_depth(g: Grammar, d: int) -> list[Expr]:
    """Every expression of depth exactly ``d`` (d = 1 or 2; deeper sets are astronomically large).

    Order is deterministic: operator in vocabulary order, then operands lexicographically.
    """
    if d not in (1, 2):
        raise ValueError(f"enumerate_depth handles depth 1 or 2, got {d}; sample deeper ones")
    if count_depth(g, d) > MAX_ENUMERATED:
        raise ValueError(f"{g.name} has {count_depth(g, d):,} expressions of depth {d}; sample them instead")
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


def subproblem_key(e: Expr) -> tuple:
    """The bag of a depth-1 expression: its operator and the sorted multiset of its operands
    (what the per-cluster attention hands the MLP, so expressions with one key are one lookup case)."""
    return (e[0], tuple(sorted(e[1])))


def subproblem_weights(g: Grammar, exprs: Sequence[Expr]) -> np.ndarray:
    """Integer repeat counts that make every depth-1 sub-problem (bag) equally frequent.

    A bag shared by ``c`` depth-1 expressions (``(4+5)`` and ``(5+4)``: c = 2; ``(4+4)``: c = 1)
    weighs ``round(c_max / c)``; an expression's weight is the product over the depth-1 spans it
    reduces in one step (its depth-1 sub-expressions; itself at depth 1). Without it a bag with
    repeated operands is reduced half as often as the others in the enumerated depth-1/2 sets.
    """
    counts: dict[tuple, int] = {}
    for e in enumerate_depth(g, 1):
        k = subproblem_key(e)
        counts[k] = counts.get(k, 0) + 1
    top = max(counts.values())
    w_bag = {k: max(1, round(top / c)) for k, c in counts.items()}

    def weight(e: Expr) -> int:
        w, stack = 1, [e]
        while stack:
            node = stack.pop()
            if not isinstance(node, tuple):
                continue
            if all(not isinstance(c, tuple) for c in node[1]):
                w *= w_bag[subproblem_key(node)]
            else:
                stack.extend(node[1])
        return w

    return np.array([weight(e) for e in exprs], dtype=np.int64)


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


def mean_tokens_by_depth(g: Grammar, p_deep: float, max_depth: int = 30) -> np.ndarray:
    """(max_depth + 1,) exact mean token counts of :func:`sample_expression` at depths 0..max_depth:

        s(0) = 1,  s(d) = mean over (operator, k) of [o(op, k) + n(k) s(d-1) + (k - n(k))],

    with o(op, k) the node's own tokens (parentheses, operator, ListOps' zero-vector token) and
    n(k) = k p / (1 - (1 - p)^k) the expected operands of depth d - 1 given at least one."""
    own = [(k, len(encode(g, (op, tuple(g.literals[0] for _ in range(k))))) - k)
           for op, (arities, _) in g.operators.items() for k in arities]
    n_deep = {k: k * p_deep / (1 - (1 - p_deep) ** k) for k, _ in own}
    s = [1.0]
    for _ in range(max_depth):
        s.append(float(np.mean([o + n_deep[k] * s[-1] + (k - n_deep[k]) for k, o in own])))
    return np.array(s)


def sample_expressions(g: Grammar, rng: np.random.Generator, d: int, n: int, p_deep: float = 0.4) -> list[Expr]:
    return [sample_expression(g, rng, d, p_deep) for _ in range(n)]


def sample_lra_expression(g: Grammar, rng: np.random.Generator, max_depth: int = 10, max_args: int = 10,
                          value_p: float = 0.25) -> Expr:
    """A random ListOps expression drawn the way the Long Range Arena generator draws them: below
    ``max_depth`` each operand is an operation with probability ``value_p`` (else a uniform digit),
    an operation takes a uniform operator and a uniform number of operands in 2..``max_args``; the
    root is always an operation. (LRA also keeps only sequences of 500-2,000 tokens; filter on
    length to match that.)"""
    ops = list(g.operators)

    def node(level: int) -> Expr:
        k = int(rng.integers(2, max_args + 1))
        kids = tuple(node(level + 1) if level < max_depth and rng.random() < value_p else int(rng.integers(10))
                     for _ in range(k))
        return (ops[int(rng.integers(len(ops)))], kids)

    return node(1)


def pad_batch(g: Grammar, seqs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(B, T) ids padded with BLANK, and the (B,) lengths."""
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    out = np.full((len(seqs), int(lengths.max(initial=1))), g.blank, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, lengths
