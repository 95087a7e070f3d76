"""One circuit step on token ids, and reduction to the answer (the plain reference of the model's loop).

The nesting depth of a token is counted with ``(`` = +1 and ``)`` = -1; the *deepest spans* are
the maximal runs of tokens at the greatest depth. One step replaces every deepest span by
BLANKs, with the span's value at its operator's position.
"""
from __future__ import annotations

import numpy as np

from tinyscope.studies.circuits.grammar import CLOSE, OPEN, Grammar


def nesting(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(depth after each token, depth before each token): the paper's A1 and A2 for G_PE = diag(1, -1, 0...)."""
    step = (tokens == OPEN).astype(np.int64) - (tokens == CLOSE).astype(np.int64)  # (T,)
    after = np.cumsum(step)  # (T,)
    return after, after - step


def reduce_once(g: Grammar, tokens: np.ndarray) -> np.ndarray:
    """One circuit step on token ids: every deepest parenthesised span becomes BLANKs with its
    value at the operator's position (the training target). A sequence without parentheses is
    returned unchanged. This is the plain reference the model's iteration must equal."""
    tokens = np.asarray(tokens, dtype=np.int64)
    after, before = nesting(tokens)
    level = np.maximum(after, before)  # (T,)
    top = int(level.max(initial=0))
    out = tokens.copy()
    if top == 0:
        return out
    masked = level == top
    edges = np.flatnonzero(np.diff(np.concatenate([[0], masked.astype(np.int8), [0]])))
    for start, stop in zip(edges[::2], edges[1::2]):
        span = tokens[start:stop]
        ops = [i for i, t in enumerate(span) if g.is_op_id(t)]
        values = [g.id_value(t) for t in span if g.is_literal_id(t)]
        out[start:stop] = g.blank
        if ops:
            op_pos = start + ops[0]
            out[op_pos] = g.literal_id(g.apply(g.symbols[span[ops[0]]], values))
    return out


def reduce_all(g: Grammar, tokens: np.ndarray) -> tuple[int, int]:
    """Reduce until no parentheses remain; returns (value, number of steps) (reference halting)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    steps = 0
    while np.any((tokens == OPEN) | (tokens == CLOSE)):
        tokens = reduce_once(g, tokens)
        steps += 1
    lit = [t for t in tokens if g.is_literal_id(t)]
    if len(lit) != 1:
        raise ValueError(f"reduction left {len(lit)} literals; the input was not one well-formed expression")
    return g.id_value(lit[0]), steps
