"""Hook points every tool can see: PyTorch forward, pre- and backward hooks, global module hooks,
tinyscope backward hooks and nnsight envoys fire; an unwatched hook point is the identity."""
import math

import pytest
import torch
from torch.nn.modules.module import register_module_forward_hook

from tests.core.models.builders import small_transformer


def small(**kw):
    return small_transformer(**{**dict(n_ctx=10), **kw})


def tokens(B=3, T=10, V=7):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(1))


def causal_pattern(q, k):
    T = q.shape[1]
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1)


def test_an_unwatched_hook_point_returns_its_input_itself():
    hp = small().blocks[0].hook_resid_post
    x = torch.randn(2, 3, 16)
    assert hp(x) is x and not hp.has_hooks


def test_a_torch_forward_hook_on_the_pattern_fires_with_the_pattern_and_can_replace_it():
    model, x = small(), tokens()
    _, cache = model.run_with_cache(x, names_filter=["blocks.0.attn.hook_q", "blocks.0.attn.hook_k"])
    seen = []
    handle = model.blocks[0].attn.hook_pattern.register_forward_hook(lambda mod, inp, out: seen.append(out.clone()))
    model(x)
    handle.remove()
    assert len(seen) == 1  # attention took the explicit path because a torch hook watched its pattern
    torch.testing.assert_close(seen[0], causal_pattern(cache["q", 0], cache["k", 0]))

    uniform = torch.ones(10, 10).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)
    handle = model.blocks[0].attn.hook_pattern.register_forward_hook(lambda mod, inp, out: uniform.expand_as(out))
    patched = model(x)
    handle.remove()
    expected = model.run_with_hooks(x, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda p, hook: uniform.expand_as(p))])
    torch.testing.assert_close(patched, expected)
    assert not torch.allclose(patched, model(x), atol=1e-4)
    assert not model.blocks[0].attn.hook_pattern.has_hooks


def test_a_torch_pre_hook_fires_and_can_replace_the_input():
    model, x = small(), tokens()
    clean = model(x)
    calls = []

    def zero_resid(mod, args):
        calls.append(mod.name)
        return (torch.zeros_like(args[0]),)

    handle = model.blocks[1].hook_resid_pre.register_forward_pre_hook(zero_resid)
    zeroed = model(x)
    handle.remove()
    assert calls == ["blocks.1.hook_resid_pre"]
    expected = model.run_with_hooks(x, fwd_hooks=[("blocks.1.hook_resid_pre", lambda t, hook: torch.zeros_like(t))])
    torch.testing.assert_close(zeroed, expected)
    assert not torch.allclose(zeroed, clean, atol=1e-4)


def test_a_torch_full_backward_hook_gets_the_gradient_of_the_hook_output():
    model, x = small(), tokens()
    grads = []
    handle = model.blocks[0].hook_resid_post.register_full_backward_hook(lambda mod, gin, gout: grads.append(gout[0]))
    kept = {}
    model.blocks[0].hook_resid_post.register_forward_hook(lambda mod, inp, out: kept.setdefault("resid", out))
    logits = model(x)
    (expected,) = torch.autograd.grad(logits.square().sum(), kept["resid"], retain_graph=True)
    logits.square().sum().backward()
    handle.remove()
    model.blocks[0].hook_resid_post._forward_hooks.clear()
    assert len(grads) == 1
    torch.testing.assert_close(grads[0], expected)


def test_a_global_module_forward_hook_sees_the_hook_points():
    model, x = small(), tokens()
    names = []
    handle = register_module_forward_hook(lambda mod, inp, out: names.append(getattr(mod, "name", None)))
    try:
        model(x)
    finally:
        handle.remove()
    assert "blocks.0.attn.hook_pattern" in names and "blocks.1.hook_resid_post" in names


def test_tinyscope_backward_hooks_read_and_replace_gradients_and_a_removed_one_does_not_fire():
    model, x = small(), tokens()
    seen = []
    model.add_hook("blocks.0.hook_resid_post", lambda g, hook: seen.append(g.clone()), dir="bwd")
    kept = {}
    model.add_hook("blocks.0.hook_resid_post", lambda t, hook: kept.setdefault("resid", t))
    loss = model(x, return_type="loss")
    (expected,) = torch.autograd.grad(loss, kept["resid"], retain_graph=True)
    loss.backward()
    torch.testing.assert_close(seen[0], expected)
    model.reset_hooks()

    # a backward hook that zeroes the gradient at layer 1's input stops it reaching the embeddings
    model.zero_grad()
    model.run_with_hooks(x, return_type="loss", bwd_hooks=[("blocks.1.hook_resid_pre", lambda g, hook: torch.zeros_like(g))],
                         reset_hooks_end=False).backward()
    model.reset_hooks()
    assert model.W_E.weight.grad.abs().max() == 0

    fired = []
    with pytest.warns(UserWarning, match="reset_hooks_end=False"):
        loss = model.run_with_hooks(x, return_type="loss", bwd_hooks=[("hook_embed", lambda g, hook: fired.append(1))])
    loss.backward()  # the hook was removed with the forward's end, as in TransformerLens
    assert fired == []


def test_run_with_cache_incl_bwd_caches_gradients():
    model, x = small(), tokens()
    loss, cache = model.run_with_cache(x, return_type="loss", incl_bwd=True, detach=False)
    assert "blocks.0.hook_resid_post_grad" in cache and "blocks.0.hook_resid_post" in cache
    assert model.W_E.weight.grad is not None
    model2 = small()
    kept = {}
    model2.add_hook("blocks.0.hook_resid_post", lambda t, hook: kept.setdefault("r", t))
    loss2 = model2(x, return_type="loss")
    (expected,) = torch.autograd.grad(loss2, kept["r"])
    torch.testing.assert_close(cache["blocks.0.hook_resid_post_grad"], expected)


def test_nnsight_reads_and_sets_hook_points():
    nnsight = pytest.importorskip("nnsight")
    model, x = small(), tokens()
    clean = model(x)
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(x):
        pattern = wrapped.blocks[0].attn.hook_pattern.output.save()
        resid = wrapped.blocks[0].hook_resid_post.output.save()
        out = wrapped.output.save()
    _, cache = model.run_with_cache(x)
    torch.testing.assert_close(pattern, cache["pattern", 0])
    torch.testing.assert_close(resid, cache["resid_post", 0])
    torch.testing.assert_close(out, clean)

    with wrapped.trace(x):  # in the order the model runs them, as nnsight requires
        wrapped.blocks[0].hook_resid_post.output = wrapped.blocks[0].hook_resid_post.output * 2
        wrapped.blocks[1].attn.hook_pattern.output = torch.zeros(3, 2, 10, 10)
        patched = wrapped.output.save()
    expected = model.run_with_hooks(x, fwd_hooks=[("blocks.1.attn.hook_pattern", lambda p, hook: torch.zeros_like(p)),
                                                  ("blocks.0.hook_resid_post", lambda r, hook: r * 2)])
    torch.testing.assert_close(patched, expected)
    assert not torch.allclose(patched, clean, atol=1e-3)
    # outside a trace nothing watches: the fast attention path again, and the same logits
    assert not model.blocks[0].attn.hook_pattern.has_hooks
    torch.testing.assert_close(model(x), clean)
