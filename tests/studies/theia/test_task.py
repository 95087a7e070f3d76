"""Kleene K3 tables, the record generator, the diagnostic harnesses, the probes' Bayes ceilings
and the mod-3 chain, each against a direct (slow, per-record) definition."""
import itertools

import numpy as np
import pytest

from tinyscope.studies.theia.task import (
    CHAIN,
    F_,
    FOUR_DOMAIN,
    KLEENE_OPS,
    PUBLIC_CHAIN_OPS,
    RULES_12,
    RULES_39,
    T_,
    TABLES,
    U_,
    KleeneConfig,
    KleeneTask,
    RecordSpec,
    chain_labels,
    evaluate_records,
    force_rule,
    has_unknown_ceiling,
    kleene_direct,
    logic_tables,
    rule_seed,
    sample_chains,
    sample_records,
)

# The tables as printed in seed003-details Sec. 1.2 (rows: first operand, columns: second; order F, T, U).
PAPER_TABLES = {
    "AND": "FFF FTU FUU", "OR": "FTU TTT UTU", "IMPLIES": "TTT FTU UTU", "IFF": "TFU FTU UUU",
}
CODE = {"F": F_, "T": T_, "U": U_}


def test_tables_match_min_max_one_minus_definition():
    for op in KLEENE_OPS + ("XOR",):
        for x, y in itertools.product((F_, T_, U_), repeat=2):
            assert TABLES[op][x, y] == kleene_direct(op, x, y), (op, x, y)


def test_tables_match_the_papers_printed_tables():
    for op, rows in PAPER_TABLES.items():
        expected = np.array([[CODE[ch] for ch in row] for row in rows.split()])
        assert (TABLES[op] == expected).all(), op
    assert [TABLES["NOT"][x, 0] for x in (F_, T_, U_)] == [T_, F_, U_]


def test_public_code_logic_differs_only_in_u_implies_t_and_xor():
    ops, tables = logic_tables("public_code")
    assert ops == PUBLIC_CHAIN_OPS and "NOT" not in ops
    imp = tables[ops.index("IMPLIES")]
    diff = np.argwhere(imp != TABLES["IMPLIES"])
    assert diff.tolist() == [[U_, T_]] and imp[U_, T_] == U_ and TABLES["IMPLIES"][U_, T_] == T_


def slow_label(rec, spec: RecordSpec):
    """One record, evaluated field by field with plain Python."""
    a, b, arith, d, rel = (int(v) for v in rec[:5])
    S, op = [int(v) for v in rec[5:26]], int(rec[26])
    a_unk, b_unk, d_unk, s_unk = (bool(v) for v in rec[27:31])
    if spec.arith == "clamped":
        c = [min(a + b, 20), abs(a - b), min(a * b, 20), a % b][arith]
        c = max(0, min(20, c))
    else:
        c = [a + b, a - b, a * b, a // (b if b else 1)][arith]
    c_unk = a_unk or b_unk
    name = spec.relations[rel]
    holds = {"GT": c > d, "LT": c < d, "EQ": c == d, "GTE": c >= d, "LTE": c <= d, "NEQ": c != d}[name]
    v_ord = U_ if (c_unk or d_unk) else (T_ if holds else F_)
    v_set = U_ if (c_unk or s_unk) else (T_ if S[c % 21] else F_)
    op_name = spec.ops[op]
    value = kleene_direct(op_name, v_ord, v_set)
    if spec.logic == "public_code" and op_name == "IMPLIES" and (v_ord, v_set) == (U_, T_):
        value = U_
    return value


@pytest.mark.parametrize("spec", [FOUR_DOMAIN, CHAIN, RecordSpec(**{**CHAIN.__dict__, "logic": "public_code"})],
                         ids=["four_domain", "chain", "chain_public_code"])
def test_generator_label_equals_direct_evaluation(spec):
    x = sample_records(np.random.default_rng(7), 3000, spec)
    labels = evaluate_records(x, spec)["label"]
    assert [slow_label(r, spec) for r in x] == labels.tolist()


def test_record_distribution_and_determinism():
    x = sample_records(np.random.default_rng(3), 40_000)
    assert x[:, 0].min() == 1 and x[:, 0].max() == 20 and x[:, 3].min() == 0 and x[:, 3].max() == 20
    assert np.all(np.abs(x[:, 27:31].mean(0) - 0.15) < 0.01)
    assert abs(x[:, 5:26].mean() - 0.5) < 0.01
    assert np.array_equal(x, sample_records(np.random.default_rng(3), 40_000))
    y = sample_records(np.random.default_rng(3), 1000, CHAIN)
    assert y[:, 0].min() == 0 and y[:, 0].max() == 19


@pytest.mark.parametrize("false_via", ["LT", "GT"])
def test_harness_forces_each_operand_value(false_via):
    for rule in RULES_39:
        x = force_rule(np.random.default_rng(0), 400, rule, false_via=false_via)
        v = evaluate_records(x)
        assert not v["c_unk"].any()
        assert (v["val_ord"] == rule.va).all(), rule.name
        if rule.op != "NOT":
            assert (v["val_set"] == rule.vb).all(), rule.name
        assert (v["label"] == rule.expected()).all(), rule.name


def test_authors_harness_fixes_the_not_set_operand_and_the_unknown_order_operand():
    for rule in RULES_39:
        x = force_rule(np.random.default_rng(0), 400, rule, harness="authors")
        v = evaluate_records(x)
        assert (v["val_ord"] == rule.va).all() and (v["label"] == rule.expected()).all(), rule.name
        assert (v["val_set"] == (T_ if rule.op == "NOT" else rule.vb)).all(), rule.name
        assert (x[:, 30] == (rule.vb == U_ and rule.op != "NOT")).all(), rule.name    # s_unk only when forced
        if rule.va == U_:                                   # rel GTE, d = max(0, c - 1), as the code
            assert (x[:, 4] == FOUR_DOMAIN.relations.index("GTE")).all()
            assert (x[:, 3] == np.maximum(0, v["c"] - 1)).all()
    # tinyscope's harness leaves the NOT rules' set, and a U operand's d and relation, as drawn
    x = force_rule(np.random.default_rng(0), 2000, RULES_39[-1])
    assert x[:, 30].any() and len(np.unique(x[:, 4])) == 6
    assert rule_seed(RULES_39[-1], 7, 38, "authors") == [7, 102]           # NOT U: 100 + va
    assert rule_seed(RULES_39[9], 7, 9, "authors") == [7, 9]               # OR F F: 1*9 + 0 + 0
    assert rule_seed(RULES_39[9], 7, 9, "tinyscope") == [7, 9]


def test_rule_sets():
    assert len(RULES_12) == 12 and len(RULES_39) == 39 and len({r.name for r in RULES_39}) == 39
    assert {r.name: r.expected() for r in RULES_12} == {
        "F∧U": F_, "T∧U": U_, "U∧F": F_, "U∧T": U_, "T∨U": T_, "F∨U": U_, "U∨T": T_, "U∨F": U_,
        "F→U": T_, "T→U": U_, "T↔U": U_, "F↔U": U_}


def test_has_unknown_bayes_ceilings_exact():
    q = 0.85
    assert has_unknown_ceiling("arith") == pytest.approx((1 - q**2) + q**2 * q**2, abs=1e-12)
    assert has_unknown_ceiling("order") == pytest.approx((1 - q**3) + q**3 * q, abs=1e-12)
    assert has_unknown_ceiling("set") == pytest.approx((1 - q**3) + q**3 * q, abs=1e-12)
    assert has_unknown_ceiling("logic") == pytest.approx(1.0, abs=1e-12)
    assert [round(has_unknown_ceiling(b), 4) for b in ("arith", "order", "set", "logic")] == [0.7995, 0.9079, 0.9079, 1.0]


def test_has_unknown_ceiling_matches_monte_carlo():
    rng = np.random.default_rng(0)
    f = rng.random((200_000, 4)) < 0.3
    hu = f.any(1)
    c_unk = f[:, 0] | f[:, 1]
    # Bayes rule at the order boundary: predict HU if c or d is Unknown, else the likelier of s_unk.
    pred = c_unk | f[:, 2] | (0.3 > 0.5)
    assert abs((pred == hu).mean() - has_unknown_ceiling("order", 0.3)) < 0.005


def test_chain_labels_are_running_sums_mod_3():
    data = sample_chains(np.random.default_rng(1), 50, 20)
    for local, labels in zip(data["local"], data["labels"]):
        y = None
        for t in range(20):
            y = local[t] if t == 0 else (y + local[t]) % 3
            assert labels[t] == y
    assert np.array_equal(chain_labels(np.array([[2, 2, 2, 1]])), np.array([[2, 1, 0, 1]]))
    assert np.array_equal(data["local"].reshape(-1), evaluate_records(data["records"].reshape(-1, 31), CHAIN)["label"])


def test_task_batches():
    task = KleeneTask(KleeneConfig(n_test=100, n_train=500))
    b = task.sample(np.random.default_rng(0), 64)
    assert b.tokens.shape == (64, 31) and (b.targets[:, -1] == b.meta["label"]).all() and b.loss_mask[:, -1].all()
    assert task.eval_fingerprint() == KleeneTask(KleeneConfig(n_test=100, n_train=500)).eval_fingerprint()
    with pytest.raises(ValueError):
        KleeneConfig(p_unk=1.5)
