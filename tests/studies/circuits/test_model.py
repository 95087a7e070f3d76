"""The looped circuit transformer: parameter counts, fast paths vs references, hooks, STEs, halting."""
import numpy as np
import pytest
import torch

from tinyscope.models.utils import count_parameters
from tinyscope.studies.circuits.construction import construct
from tinyscope.studies.circuits.enumeration import pad_batch, sample_expression
from tinyscope.studies.circuits.grammar import BOOLEAN, LISTOPS, encode, grammar, parse
from tinyscope.studies.circuits.model import (
    CircuitConfig,
    CircuitTransformer,
    binarize,
    gated_argmax,
    ternarize,
)


@pytest.mark.parametrize("name, expected", [("boolean", 280), ("arithmetic", 924), ("listops", 4416)])
def test_parameter_counts_match_the_paper(name, expected):
    assert count_parameters(CircuitTransformer(CircuitConfig(grammar=name))) == expected


def _random_batch(g, n=6, d=4, seed=0):
    rng = np.random.default_rng(seed)
    seqs = [encode(g, sample_expression(g, rng, int(rng.integers(1, d + 1)), 0.5)) for _ in range(n)]
    return torch.from_numpy(pad_batch(g, seqs)[0])


@pytest.mark.parametrize("name", ["boolean", "listops"])
def test_fast_attention_equals_dense_reference(name):
    torch.manual_seed(0)
    model = CircuitTransformer(CircuitConfig(grammar=name, init_std=1.0))
    tokens = _random_batch(grammar(name))
    x = model.embed(tokens)
    for _ in range(3):  # several different masks: use the construction's and random ones
        ids = model.cluster_ids((torch.rand(tokens.shape) > 0.4).float())
        assert torch.allclose(model.attend(x, ids), model.attend_reference(x, ids), atol=1e-5)


def test_cluster_ids_number_contiguous_spans():
    P = torch.tensor([[0, 1, 1, 0, 0, 1, 0, 1, 1, 1]], dtype=torch.float)
    assert CircuitTransformer.cluster_ids(P).tolist() == [[0, 1, 1, 0, 0, 2, 0, 3, 3, 3]]


@pytest.mark.parametrize("name", ["boolean", "listops"])
def test_fast_and_reference_paths_give_the_same_run(name):
    model = construct(name)
    tokens = _random_batch(grammar(name), n=8, d=6, seed=1)
    with torch.no_grad():
        fast = model.run(tokens)
        model.use_fast = False
        slow = model.run(tokens)
    assert torch.equal(fast.state, slow.state) and torch.equal(fast.iterations, slow.iterations)


def test_batched_run_equals_single_runs():
    model = construct("listops")
    rng = np.random.default_rng(3)
    seqs = [encode(LISTOPS, sample_expression(LISTOPS, rng, d, 0.4)) for d in (1, 3, 5, 2)]
    tokens = torch.from_numpy(pad_batch(LISTOPS, seqs)[0])
    with torch.no_grad():
        batched = model.run(tokens)
        for i, s in enumerate(seqs):
            single = model.run(torch.from_numpy(s)[None])
            assert torch.equal(single.readout[0], batched.readout[i])
            assert single.iterations.item() == batched.iterations[i].item() == [1, 3, 5, 2][i]


def test_hooks_cache_every_iteration():
    model = construct("boolean")
    tokens = torch.from_numpy(encode(BOOLEAN, parse(BOOLEAN, "((1∧(∼0))∨0)")))[None]  # depth 3, T = 12
    _, cache = model.run_with_cache(tokens)
    assert cache["hook_depth"].shape == (3, 1, 12, 2)
    assert cache["mask"].shape == (3, 1, 12) and cache["cluster"].shape == (3, 1, 12)
    assert cache["hook_attn"].shape == (3, 1, 12, 7) and cache["mlp"].shape == (3, 1, 12, 7)
    # iteration 0 masks exactly the innermost span "(∼0)" (positions 4..7)
    assert cache["mask"][0, 0].nonzero().flatten().tolist() == [4, 5, 6, 7]
    # A1 is the depth after each token: the maximum 3 is reached at the innermost "("
    assert cache["depth"][0, 0, :, 0].max().item() == 3


def test_hooks_can_intervene():
    model = construct("boolean")
    tokens = torch.from_numpy(encode(BOOLEAN, parse(BOOLEAN, "(1∧1)")))[None]
    flip = lambda y, hook: y[..., [0, 1, 3, 2, 4, 5, 6]]  # swap the "1" and "0" outputs
    with torch.no_grad():
        assert model(tokens)[0, 2] == 1
        out = model.run_with_hooks(tokens, fwd_hooks=[("hook_mlp", flip)])
    assert out[0, 3] == 1 and out[0, 2] == 0


def test_straight_through_estimators():
    g = torch.tensor([-0.7, -0.2, 0.3, 0.9], requires_grad=True)
    t = ternarize(g)
    assert t.tolist() == [-1, 0, 0, 1]
    t.sum().backward()
    assert torch.equal(g.grad, torch.ones(4))  # identity gradient
    w = torch.tensor([-1.0, 2.0], requires_grad=True)
    b = binarize(w)
    assert b.tolist() == [0, 1]
    b.sum().backward()
    s = torch.sigmoid(w.detach())
    assert torch.allclose(w.grad, s * (1 - s))


def test_gated_argmax():
    z = torch.tensor([[0.3, 1.2, -1.0], [-0.1, -0.5, -2.0]])
    assert gated_argmax(z).tolist() == [[0, 1, 0], [0, 0, 0]]


def test_training_step_has_gradients_on_every_parameter():
    torch.manual_seed(0)
    model = CircuitTransformer(CircuitConfig(grammar="boolean"))
    tokens = _random_batch(BOOLEAN, n=8, d=2)
    out = model.step(model.embed(tokens))
    out.soft.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.g_pe.grad.abs().sum() > 0 and model.w_q.grad.abs().sum() > 0


def test_halting_cap_and_flag():
    model = CircuitTransformer(CircuitConfig(grammar="boolean", max_iterations=2))
    with torch.no_grad():
        model.g_pe.copy_(torch.tensor([1.0, -1, 0, 0, 0, 0, 0]))
    tokens = torch.from_numpy(encode(BOOLEAN, parse(BOOLEAN, "(((1∧1)∧1)∧1)")))[None]
    with torch.no_grad():
        out = model.run(tokens)
    assert out.iterations.item() <= 2


def test_bad_token_ids_are_rejected():
    model = CircuitTransformer(CircuitConfig())
    with pytest.raises(ValueError, match=r"\[0, 7\]"):
        model(torch.tensor([[0, 9, 1]]))


def test_soft_routing_gradient_keeps_the_forward_and_reaches_switched_off_queries():
    """routing_grad='soft': same forward as 'weights'; the backward is that of the attention with
    sigmoid(W_Q), sigmoid(W_K), so queries get a gradient even when every hard key is off."""
    tokens = _random_batch(grammar("arithmetic"), n=8, d=1)
    grads = {}
    for mode in ("weights", "soft"):
        torch.manual_seed(0)
        model = CircuitTransformer(CircuitConfig(grammar="arithmetic", routing_grad=mode))
        with torch.no_grad():
            model.w_k.fill_(-1.0)  # every key off: S = 0 inside every span
        x = model.embed(tokens)
        ids = model.cluster_ids(model.reduction_mask(model.depth_encoding(x)))
        H = model.attend(x, ids)
        assert H.abs().max() == 0  # the forward is the hard routing's
        (H * torch.randn_like(H, generator=torch.Generator().manual_seed(1))).sum().backward()
        grads[mode] = (model.w_q.grad.clone(), model.w_k.grad.clone())
        if mode == "soft":  # the gradient is that of the all-sigmoid attention
            wq = torch.sigmoid(model.w_q.detach()).requires_grad_()
            wk = torch.sigmoid(model.w_k.detach()).requires_grad_()
            Hs = model._attend_dense(x, ids, wq, wk)
            (Hs * torch.randn_like(Hs, generator=torch.Generator().manual_seed(1))).sum().backward()
            sq, sk = torch.sigmoid(model.w_q.detach()), torch.sigmoid(model.w_k.detach())
            assert torch.allclose(grads[mode][0], wq.grad * sq * (1 - sq), atol=1e-6)
            assert torch.allclose(grads[mode][1], wk.grad * sk * (1 - sk), atol=1e-6)
    assert grads["weights"][0].abs().max() == 0  # the per-weight estimator: no gradient to the queries
    assert grads["soft"][0].abs().max() > 0
    with pytest.raises(Exception, match="routing_grad"):
        CircuitConfig(grammar="arithmetic", routing_grad="gumbel")


def test_mlp_init_small_or_torch_default():
    torch.manual_seed(0)
    small = CircuitTransformer(CircuitConfig(grammar="arithmetic"))
    torch.manual_seed(0)
    default = CircuitTransformer(CircuitConfig(grammar="arithmetic", mlp_init="torch"))
    assert small.mlp_in.bias.abs().max() == 0 and abs(small.mlp_in.weight.std().item() - 0.1) < 0.02
    bound = 1 / 14 ** 0.5  # nn.Linear: uniform(+-1/sqrt(fan_in)) for the weight and the bias
    assert 0.5 * bound < default.mlp_in.bias.abs().max() <= bound
    assert torch.equal(small.w_q, default.w_q)  # the thresholded logits start alike either way
    with pytest.raises(Exception, match="mlp_init"):
        CircuitConfig(grammar="arithmetic", mlp_init="xavier")
