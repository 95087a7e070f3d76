"""Circuit-expression grammars: tokenizer, exact evaluator, parser errors, enumeration, sampling."""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from tinyscope.studies.circuits.enumeration import balance, count_depth, enumerate_depth, sample_expression
from tinyscope.studies.circuits.grammar import (
    ARITHMETIC,
    BOOLEAN,
    GRAMMARS,
    LISTOPS,
    ParseError,
    depth,
    encode,
    evaluate,
    evaluate_tokens,
    parse,
    to_symbols,
    to_text,
    tokenize,
)
from tinyscope.studies.circuits.reduction import reduce_all, reduce_once
from tinyscope.studies.circuits.task import LogicTask, LogicTaskConfig


@pytest.mark.parametrize("text, value", [
    ("((1∧0)∨(∼0))", 1), ("(1∧(0∨(∼1)))", 0), ("(∼(∼1))", 1), ("1", 1), ("((1&1)|(~1))", 1),
])
def test_boolean_values(text, value):
    assert evaluate_tokens(BOOLEAN, text) == value


@pytest.mark.parametrize("text, value", [("((3+4)*5)", 5), ("(9*9)", 1), ("((9+9)+(2*3))", 4), ("7", 7)])
def test_arithmetic_values(text, value):
    assert evaluate_tokens(ARITHMETIC, text) == value


@pytest.mark.parametrize("text, value", [
    ("(MED 1 9)", 1), ("(MED 9 1)", 1), ("(MED 3 1 2)", 2), ("(MED 5 5 1)", 5), ("(SM 9 9 9)", 7),
    ("(MAX 3 (MIN 4 5) (MED 1 2 9))", 4), ("(min 7 (sm 5 6))", 1),
])
def test_listops_values(text, value):
    assert evaluate_tokens(LISTOPS, text) == value


def test_vocabularies_follow_the_paper():
    assert BOOLEAN.symbols == ("(", ")", "1", "0", "∧", "∨", "∼") and BOOLEAN.D == 7
    assert ARITHMETIC.D == 14 and ARITHMETIC.symbols[-2:] == ("+", "*")
    assert LISTOPS.D == 16 and LISTOPS.symbols[-4:] == ("MAX", "MIN", "SM", "MED")


def test_listops_gets_a_blank_after_every_close():
    ids = tokenize(LISTOPS, "(MAX 3 (MIN 4 5))")
    closes = np.flatnonzero(ids == 1)
    assert len(closes) == 2 and np.all(ids[closes + 1] == LISTOPS.blank)
    assert not np.any(tokenize(BOOLEAN, "((1∧0)∨1)") == BOOLEAN.blank)


@pytest.mark.parametrize("g, text, position, reason", [
    (BOOLEAN, "((1∧0)", 0, "never closed"),
    (BOOLEAN, "(1∧0))", 5, "no matching"),
    (BOOLEAN, "(1∧x)", 3, "unknown symbol"),
    (BOOLEAN, "(1∧)", 2, "wrong arity"),
    (BOOLEAN, "(∼1 0)", 1, "wrong arity"),
    (BOOLEAN, "((1))", 1, "doubled parentheses"),
    (BOOLEAN, "(1∧0∨1)", 4, "second operator"),
    (BOOLEAN, "1∧0", 1, "outside parentheses"),
    (ARITHMETIC, "(3+)", 2, "wrong arity"),
    (ARITHMETIC, "(+ 3 4)", 1, "infix"),
    (LISTOPS, "(MAX 3)", 1, "wrong arity"),
    (LISTOPS, "(MAX 1 2 3 4)", 1, "wrong arity"),
    (LISTOPS, "(FOO 1 2)", 1, "unknown symbol"),
    (LISTOPS, "(3 MAX 4)", 3, "prefix"),
])
def test_malformed_expressions_name_position_and_reason(g, text, position, reason):
    with pytest.raises(ParseError) as err:
        parse(g, text)
    assert err.value.position == position
    assert reason in err.value.reason and f"position {position}" in str(err.value)


def test_token_id_errors_use_token_positions():
    ids = list(encode(BOOLEAN, ("∧", (1, 0))))[:-1]  # drop the closing parenthesis
    with pytest.raises(ParseError, match="position 0: unbalanced"):
        parse(BOOLEAN, ids)
    with pytest.raises(ParseError, match="position 2: unknown token id 99"):
        parse(BOOLEAN, [0, 2, 99, 3, 1])


def expressions(g, max_depth=4):
    """Hypothesis strategy: random expressions of ``g`` up to ``max_depth``."""
    lits = st.sampled_from(g.literals)

    def extend(children):
        options = [st.tuples(st.just(op), st.lists(children, min_size=k, max_size=k).map(tuple))
                   for op, (arities, _) in g.operators.items() for k in arities]
        return st.one_of(*options)

    return st.recursive(lits, extend, max_leaves=12)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(list(GRAMMARS.values())).flatmap(lambda g: st.tuples(st.just(g), expressions(g))))
def test_text_and_ids_round_trip(ge):
    g, e = ge
    assert parse(g, to_text(g, e)) == e
    assert parse(g, encode(g, e)) == e
    assert np.array_equal(tokenize(g, to_text(g, e)), encode(g, e))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(list(GRAMMARS.values())).flatmap(lambda g: st.tuples(st.just(g), expressions(g))))
def test_reduction_reaches_the_value_in_depth_steps(ge):
    g, e = ge
    value, steps = reduce_all(g, encode(g, e))
    assert value == evaluate(g, e) and steps == depth(e)


def test_reduce_once_on_a_known_case():
    ids = encode(BOOLEAN, parse(BOOLEAN, "((1∧0)∨(∼0))"))
    out = reduce_once(BOOLEAN, ids)
    B = BOOLEAN.blank
    # ( _ _ 0 _ _ ∨ _ 1 _ _ )
    assert out.tolist() == [0, B, B, 3, B, B, 5, B, 2, B, B, 1]


@pytest.mark.parametrize("g, n1, n2", [(BOOLEAN, 10, 290), (ARITHMETIC, 200, 88000), (LISTOPS, 4400, None)])
def test_enumeration_is_complete_and_exact(g, n1, n2):
    one = enumerate_depth(g, 1)
    assert len(one) == n1 == count_depth(g, 1) and len(set(one)) == n1
    assert all(depth(e) == 1 for e in one)
    if n2 is not None:
        two = enumerate_depth(g, 2)
        assert len(two) == n2 == count_depth(g, 2) and len(set(two)) == n2
        assert all(depth(e) == 2 for e in two)


def test_count_depth_matches_a_slow_count():
    # slow count: expressions of depth <= 2 built by brute force for the Boolean grammar
    lits = [1, 0]
    le1 = lits + enumerate_depth(BOOLEAN, 1)
    le2 = lits + [("∼", (a,)) for a in le1] + [(op, (a, b)) for op in "∧∨" for a in le1 for b in le1]
    assert len(le2) - len(le1) == count_depth(BOOLEAN, 2)
    assert count_depth(LISTOPS, 2) == 343142272000


@pytest.mark.parametrize("how", ["upsample", "downsample"])
def test_balance_equalises_classes(how):
    values = np.array([evaluate(ARITHMETIC, e) for e in enumerate_depth(ARITHMETIC, 1)])
    idx = balance(values, how)
    counts = Counter(values[idx].tolist())
    assert len(set(counts.values())) == 1 and len(counts) == 10
    if how == "upsample":
        assert set(idx.tolist()) == set(range(len(values)))


@pytest.mark.parametrize("g", list(GRAMMARS.values()), ids=list(GRAMMARS))
def test_sampler_hits_the_depth(g):
    rng = np.random.default_rng(0)
    for d in (1, 2, 3, 7, 12):
        for _ in range(5):
            e = sample_expression(g, rng, d, p_deep=0.3)
            assert depth(e) == d


def test_depth1_sampler_matches_its_exact_distribution():
    """Slow count: the probability of each depth-1 Boolean expression under the generator."""
    rng = np.random.default_rng(1)
    n = 6000
    draws = Counter(sample_expression(BOOLEAN, rng, 1) for _ in range(n))
    exprs = enumerate_depth(BOOLEAN, 1)
    # operator uniform over the 3 (operator, arity) choices, operands uniform
    expected = np.array([(1 / 3) * (0.5 ** len(e[1])) for e in exprs]) * n
    stat = chisquare([draws[e] for e in exprs], expected)
    assert stat.pvalue > 1e-3


def test_sampler_mean_size_matches_its_recurrence():
    """Mean token count at depth d equals the closed-form expectation of the generator."""
    p, d = 0.42, 6
    sizes = {0: 1.0}
    for level in range(1, d + 1):
        total = 0.0
        for k in (2, 2, 1):
            m = k * p / (1 - (1 - p) ** k)  # expected deep operands given at least one
            total += 3 + m * sizes[level - 1] + (k - m)
        sizes[level] = total / 3
    rng = np.random.default_rng(2)
    lengths = [len(to_symbols(BOOLEAN, sample_expression(BOOLEAN, rng, d, p))) for _ in range(3000)]
    se = np.std(lengths) / np.sqrt(len(lengths))
    assert abs(np.mean(lengths) - sizes[d]) < 4 * se
    from tinyscope.studies.circuits.enumeration import mean_tokens_by_depth

    assert np.allclose(mean_tokens_by_depth(BOOLEAN, p, d), [sizes[i] for i in range(d + 1)])


def test_subproblem_balance_makes_every_depth1_bag_equally_frequent():
    from tinyscope.studies.circuits.enumeration import subproblem_key, subproblem_weights

    one = enumerate_depth(ARITHMETIC, 1)
    w = subproblem_weights(ARITHMETIC, one)
    assert w[one.index(("+", (4, 4)))] == 2 and w[one.index(("+", (4, 5)))] == 1  # (4+5), (5+4) share a bag
    bags = Counter(subproblem_key(e) for e, k in zip(one, w) for _ in range(k))
    assert set(bags.values()) == {2} and len(bags) == 110
    deep = ("*", (("+", (4, 4)), ("+", (9, 9))))
    assert subproblem_weights(ARITHMETIC, [deep, ("+", (("*", (2, 3)), 7))]).tolist() == [4, 1]
    task = LogicTask(LogicTaskConfig(grammar="boolean", subproblem_balance=True))
    spans = Counter(subproblem_key(e) for e in task.depth1)
    assert len(set(spans.values())) == 1  # Boolean: (1∧0) and (0∧1) share a bag, (1∧1) is alone


def test_subproblem_balance_weighs_listops_bags_by_their_orderings():
    from tinyscope.studies.circuits.enumeration import subproblem_key, subproblem_weights

    one = enumerate_depth(LISTOPS, 1)
    w = dict(zip(one, subproblem_weights(LISTOPS, one).tolist()))
    # 3 distinct operands: 6 orderings share a bag (the largest count); (2 2 2) has one, (3 3 8) three
    assert w[("SM", (2, 2, 2))] == 6 and w[("SM", (3, 3, 8))] == 2 and w[("SM", (1, 2, 3))] == 1
    assert w[("MAX", (4, 5))] == 3 and w[("MAX", (4, 4))] == 6
    bags = Counter(subproblem_key(e) for e in one for _ in range(w[e]))
    assert set(bags.values()) == {6} and len(bags) == 4 * (220 + 55)
    assert LogicTask(LogicTaskConfig(grammar="listops", subproblem_balance=True, balance="none",
                                     depth2_samples=10)).phase_sizes()[0] == 4 * 6 * (220 + 55)
