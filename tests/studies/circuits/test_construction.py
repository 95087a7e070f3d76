"""The hand-set circuit transformer is an exact evaluator; evaluator = model = construction."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyscope.models.utils import count_parameters
from tinyscope.studies.circuits.construction import bag_table, compare_weights, construct, routing_matrices
from tinyscope.studies.circuits.enumeration import pad_batch, sample_expression
from tinyscope.studies.circuits.grammar import GRAMMARS, encode, evaluate, grammar
from tinyscope.studies.circuits.model import CircuitConfig, CircuitTransformer
from tinyscope.studies.circuits.reduction import reduce_once

NAMES = ["boolean", "arithmetic", "listops"]


@pytest.mark.parametrize("name, n_params", [("boolean", 280), ("arithmetic", 924), ("listops", 4416)])
def test_construction_has_the_paper_shape(name, n_params):
    model = construct(name)
    assert count_parameters(model) == n_params
    pe = model.pe_values()
    assert pe[0] == 1 and pe[1] == -1 and not pe[2:].any()


@pytest.mark.parametrize("name", NAMES)
def test_mlp_lookup_is_exact_on_every_depth1_bag(name):
    g, model = grammar(name), construct(name)
    H, labels = bag_table(g)
    with torch.no_grad():
        logits = model.mlp_logits(torch.tensor(H, dtype=torch.float32))
        zero = model.mlp_logits(torch.zeros(g.D))
    assert torch.equal(logits.argmax(-1), torch.tensor(labels)) and (logits.max(-1).values > 0).all()
    assert (zero < 0).all()  # rows with no attention output stay BLANK


@pytest.mark.parametrize("name", NAMES)
def test_one_iteration_equals_the_reference_reduction(name):
    g, model = grammar(name), construct(name)
    rng = np.random.default_rng(0)
    seqs = [encode(g, sample_expression(g, rng, int(rng.integers(1, 6)), 0.5)) for _ in range(12)]
    tokens, _ = pad_batch(g, seqs)
    expected, _ = pad_batch(g, [reduce_once(g, s) for s in seqs])
    with torch.no_grad():
        state = model.step(model.embed(torch.from_numpy(tokens))).state
    expected_x = torch.nn.functional.one_hot(torch.from_numpy(expected), g.D + 1)[..., :g.D].float()
    assert torch.equal(state, expected_x)


@pytest.mark.parametrize("name, per_depth", [("boolean", 12), ("arithmetic", 8), ("listops", 6)])
def test_exact_answers_and_halting_across_depths(name, per_depth):
    g, model = grammar(name), construct(name)
    rng = np.random.default_rng(1)
    for d in (1, 2, 3, 5, 8, 12, 16, 20, 30):
        n = per_depth if d <= 12 else 2
        exprs = [sample_expression(g, rng, d, {"boolean": 0.42, "arithmetic": 0.37, "listops": 0.25}[name])
                 for _ in range(n)]
        tokens, _ = pad_batch(g, [encode(g, e) for e in exprs])
        with torch.no_grad():
            out = model.run(torch.from_numpy(tokens))
        answers = [g.literals[i] for i in out.readout[:, 2:2 + g.n_classes].argmax(-1).tolist()]
        assert answers == [evaluate(g, e) for e in exprs], f"depth {d}"
        assert (out.readout.sum(-1) == 1).all()  # exactly one token survives
        assert out.iterations.tolist() == [d] * n and out.halted.all()


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(NAMES), depth=st.integers(1, 7), seed=st.integers(0, 2 ** 32 - 1),
       p_deep=st.floats(0.2, 0.7))
def test_property_evaluator_equals_model_equals_construction(name, depth, seed, p_deep):
    """Evaluator = construction (sparse loop) = the same weights run through the dense reference loop."""
    g, model = grammar(name), construct(name)
    e = sample_expression(g, np.random.default_rng(seed), depth, p_deep)
    tokens = torch.from_numpy(encode(g, e))[None]
    reference = CircuitTransformer(CircuitConfig(grammar=name))
    reference.load_state_dict(model.state_dict())
    reference.use_fast = False
    with torch.no_grad():
        fast, dense = model.run(tokens), reference.run(tokens)
    value = g.literals[int(fast.readout[0, 2:2 + g.n_classes].argmax())]
    assert value == evaluate(g, e)
    assert torch.equal(fast.state, dense.state) and fast.iterations.item() == dense.iterations.item() == depth


def test_compare_weights_reports_equality_for_the_construction():
    model = construct("boolean")
    cmp = compare_weights(model)
    assert cmp["pe_equal"] and cmp["w_q_equal"] and cmp["w_k_equal"]
    permuted = construct("boolean")
    with torch.no_grad():  # the routing dimensions have no order: a column permutation is the same circuit
        permuted.w_q.copy_(permuted.w_q[:, [2, 0, 3, 1]])
        permuted.w_k.copy_(permuted.w_k[:, [2, 0, 3, 1]])
        permuted.g_pe.copy_(torch.tensor([1.0, 1, 0, 0, 0, 0, 0]))
    cmp = compare_weights(permuted)
    assert cmp["w_q_equal"] and cmp["w_k_equal"] and not cmp["pe_equal"]


def test_routing_builds_the_bag_of_tokens_at_the_operator():
    wq, wk = routing_matrices(GRAMMARS["listops"])
    assert wq.shape == wk.shape == (16, 5)
    scores = wq @ wk.T  # (D, D): q_i . k_j
    ops, digits = range(12, 16), range(2, 12)
    for i in ops:
        assert all(scores[i, j] == 1 for j in digits) and scores[i, i] == 1
        assert all(scores[i, j] == 0 for j in ops if j != i)
    assert not scores[:12].any() and not scores[:, :2].any()
