"""Valid deep expressions: the parser accepts depth 5,000, so evaluating, encoding and printing
must too (no Python recursion), and the iterative evaluator equals the recursive definition."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from tinyscope.studies.circuits.enumeration import enumerate_depth, sample_expression
from tinyscope.studies.circuits.grammar import (
    BLANK_SYMBOL,
    GRAMMARS,
    PAPER_GRAMMARS,
    depth,
    encode,
    evaluate,
    evaluate_reference,
    evaluate_tokens,
    parse,
    to_symbols,
    to_text,
)
from tinyscope.studies.circuits.reduction import reduce_all

DEEP = 5_000


def to_symbols_reference(g, e):
    """The recursive definition of the token symbols (what to_symbols was before it was iterative)."""
    if not isinstance(e, tuple):
        return [str(e) if g.name != "boolean" else ("1" if e else "0")]
    op, children = e
    if g.notation == "prefix":
        body = [op] + [s for c in children for s in to_symbols_reference(g, c)]
    elif len(children) == 1:
        body = [op] + to_symbols_reference(g, children[0])
    else:
        body = to_symbols_reference(g, children[0]) + [op] + to_symbols_reference(g, children[1])
    return ["("] + body + [")"] + ([BLANK_SYMBOL] if g.blank_after_close else [])


def chain(g, d: int, rng: np.random.Generator):
    """A random expression of depth ``d`` whose deep operand sits at a random place in each node:
    built bottom-up without recursion, with literal siblings and every operator of the grammar."""
    ops = [(op, k) for op, (arities, _) in g.operators.items() for k in arities]
    e = g.literals[int(rng.integers(len(g.literals)))]
    for _ in range(d):
        op, k = ops[int(rng.integers(len(ops)))]
        kids = [g.literals[int(rng.integers(len(g.literals)))] for _ in range(k)]
        kids[int(rng.integers(k))] = e
        e = (op, tuple(kids))
    return e


def chain_value(g, d: int, rng: np.random.Generator) -> tuple:
    """The chain of :func:`chain` (same draws) and its value, computed bottom-up as it is built."""
    ops = [(op, k) for op, (arities, _) in g.operators.items() for k in arities]
    e = g.literals[int(rng.integers(len(g.literals)))]
    v = int(e)
    for _ in range(d):
        op, k = ops[int(rng.integers(len(ops)))]
        kids = [g.literals[int(rng.integers(len(g.literals)))] for _ in range(k)]
        where = int(rng.integers(k))
        kids[where] = e
        e = (op, tuple(kids))
        v = g.apply(op, [v if i == where else int(c) for i, c in enumerate(kids)])
    return e, v


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_depth_5000_evaluates_from_tree_ids_and_text(name):
    g = GRAMMARS[name]
    e, value = chain_value(g, DEEP, np.random.default_rng(5))
    assert depth(e) == DEEP
    with pytest.raises(RecursionError):  # the recursive definition cannot: this test needs the stack
        evaluate_reference(g, e)
    assert evaluate(g, e) == value
    ids = encode(g, e)
    assert evaluate(g, parse(g, ids)) == value
    assert evaluate_tokens(g, ids) == value
    assert evaluate_tokens(g, to_text(g, e)) == value
    assert np.array_equal(encode(g, parse(g, ids)), ids)  # (deep tuples cannot be compared with ==: CPython recurses)


@pytest.mark.parametrize("name", PAPER_GRAMMARS)
def test_iterative_evaluation_and_symbols_equal_the_recursive_definitions(name):
    g = GRAMMARS[name]
    rng = np.random.default_rng(0)
    exprs = list(enumerate_depth(g, 1)) + [sample_expression(g, rng, d, 0.6) for d in range(1, 9) for _ in range(25)]
    exprs += [chain(g, d, rng) for d in (1, 2, 50, 300) for _ in range(5)] + list(g.literals)
    for e in exprs:
        assert evaluate(g, e) == evaluate_reference(g, e)
        assert to_symbols(g, e) == to_symbols_reference(g, e)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_deep_evaluation_agrees_with_the_reduction_reference(name):
    """The circuit's own step-by-step reduction (the model's target) reaches the same value."""
    g = GRAMMARS[name]
    e = chain(g, 400, np.random.default_rng(3))
    assert reduce_all(g, encode(g, e)) == (evaluate(g, e), 400)


def test_deep_evaluation_leaves_the_recursion_limit_alone():
    limit = sys.getrecursionlimit()
    g = GRAMMARS["boolean"]
    e = chain(g, 3 * limit, np.random.default_rng(1))
    evaluate(g, e), to_symbols(g, e)
    assert sys.getrecursionlimit() == limit
