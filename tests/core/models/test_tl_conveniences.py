"""TransformerLens's conveniences on the core Transformer: hook management, return types,
stop_at_layer, one-sequence input, and the cache's residual-stream decompositions."""
import pytest
import torch
import torch.nn.functional as F

from tinyscope.errors import InputError
from tinyscope.models.lens import logit_lens
from tinyscope.models.transformer import Transformer, TransformerConfig


def small(**kw):
    torch.manual_seed(0)
    base = dict(vocab_size=7, n_ctx=10, d_model=16, d_head=4, n_heads=[4, 2], d_mlp=[32, 0],
                attn_out_proj=True, attn_out_bias=True, norm="pre", final_norm=True)
    base.update(kw)
    return Transformer(TransformerConfig(**base))


def minimal_like():
    """No norms, no output projection (identity W_O), learned positions, two layers."""
    return small(d_model=8, d_head=4, n_heads=[2, 2], d_mlp=[16, 16], attn_out_proj=False, attn_out_bias=False,
                 norm="none", final_norm=False)


def tokens(B=3, T=10, V=7):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(1))


def no_hooks(model):
    return not any(hp.has_hooks for hp in model.hook_dict.values())


# ---------------------------------------------------------------- hook management
def test_add_hook_stays_until_reset_and_permanent_hooks_survive_a_plain_reset():
    model, x = small(), tokens()
    seen = []
    model.add_hook("blocks.0.hook_resid_post", lambda t, hook: seen.append("tmp"))
    model.add_hook(lambda n: n.endswith("hook_z"), lambda t, hook: seen.append(hook.layer()), is_permanent=True)
    model(x)
    model(x)
    assert seen == [0, "tmp", 1] * 2
    model.reset_hooks()
    seen.clear()
    model(x)
    assert seen == [0, 1]  # the permanent hooks stay
    model.reset_hooks(including_permanent=True)
    assert no_hooks(model)


def test_run_with_hooks_removes_only_its_own_hooks_even_when_the_forward_raises():
    model, x = small(), tokens()
    kept = []
    model.add_perma_hook("hook_embed", lambda t, hook: kept.append(1))
    model.add_hook("blocks.1.hook_resid_post", lambda t, hook: kept.append(2))

    def boom(t, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        model.run_with_hooks(x, fwd_hooks=[("blocks.1.hook_resid_pre", boom)])
    assert not model.blocks[1].hook_resid_pre.has_hooks
    model(x)
    assert kept == [1, 1, 2]  # one call before the raise, then both on the clean run
    with model.hooks(fwd_hooks=[("hook_embed", lambda t, hook: kept.append("outer"))]):
        model.run_with_hooks(x, fwd_hooks=[("hook_embed", lambda t, hook: kept.append("inner"))])
        kept.clear()
        model(x)
        assert kept == [1, "outer", 2]  # the inner context's hook is gone, the outer one stays
    model.reset_hooks(including_permanent=True)
    assert no_hooks(model)


def test_hook_layer_and_bad_directions():
    model = small()
    assert model.hook_dict["blocks.1.attn.hook_pattern"].layer() == 1
    with pytest.raises(InputError, match="not inside a layer"):
        model.hook_dict["hook_embed"].layer()
    with pytest.raises(InputError, match="dir="):
        model.add_hook("hook_embed", lambda t, hook: None, dir="sideways")


# ---------------------------------------------------------------- forward's arguments
def test_return_types_and_the_next_token_loss():
    model, x = small(), tokens()
    logits = model(x)
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 7), x[:, 1:].reshape(-1))
    torch.testing.assert_close(model(x, return_type="loss"), expected)
    both = model(x, return_type="both")
    torch.testing.assert_close(both[0], logits)
    torch.testing.assert_close(both[1], expected)
    per = model(x, return_type="loss", loss_per_token=True)
    assert per.shape == (3, 9)
    torch.testing.assert_close(per.mean(), expected)
    assert model(x, return_type=None) is None
    with pytest.raises(InputError, match="return_type"):
        model(x, return_type="probs")
    with pytest.raises(InputError, match="d_vocab_out"):
        small(d_vocab_out=3)(x, return_type="loss")


def test_stop_at_layer_returns_the_residual_entering_that_layer():
    model, x = small(), tokens()
    _, cache = model.run_with_cache(x)
    torch.testing.assert_close(model(x, stop_at_layer=0), cache["resid_pre", 0])
    torch.testing.assert_close(model(x, stop_at_layer=1), cache["resid_pre", 1])
    torch.testing.assert_close(model(x, stop_at_layer=-1), cache["resid_pre", 1])
    torch.testing.assert_close(model(x, stop_at_layer=2), cache["resid_post", 1])
    seen = []
    model.run_with_hooks(x, stop_at_layer=1, fwd_hooks=[(lambda n: True, lambda t, hook: seen.append(hook.name))])
    assert not any(n.startswith("blocks.1") for n in seen) and "blocks.0.hook_resid_post" in seen
    with pytest.raises(InputError, match="stop_at_layer"):
        model(x, stop_at_layer=3)


def test_one_sequence_is_a_batch_of_one():
    model, x = small(), tokens()
    torch.testing.assert_close(model(x[0]), model(x[:1]))
    _, cache = model.run_with_cache(x[0], remove_batch_dim=True)
    assert cache["resid_post", 1].shape == (10, 16) and not cache.has_batch_dim


# ---------------------------------------------------------------- the cache
def test_negative_layers_values_items_and_pos_slice():
    model, x = small(), tokens()
    _, cache = model.run_with_cache(x)
    assert cache["resid_post", -1] is cache["blocks.1.hook_resid_post"]
    assert cache["pattern", -2] is cache["blocks.0.attn.hook_pattern"]
    assert ("resid_post", -1) in cache
    assert list(cache.values()) == [cache[k] for k in cache.keys()]
    assert dict(cache.items()) == cache.cache_dict
    _, last = model.run_with_cache(x, pos_slice=-1)
    torch.testing.assert_close(last["resid_post", 1], cache["resid_post", 1][:, -1])
    torch.testing.assert_close(last["z", 0], cache["z", 0][:, -1])


@pytest.mark.parametrize("build", [small, minimal_like])
def test_decompose_resid_sums_to_the_stream_it_decomposes(build):
    model, x = build(), tokens()
    _, cache = model.run_with_cache(x)
    stack, labels = cache.decompose_resid(return_labels=True)
    torch.testing.assert_close(stack.sum(0), cache["resid_post", -1], atol=1e-5, rtol=1e-5)
    assert labels[:3] == ["embed", "pos_embed", "0_attn_out"] and labels[-1].startswith("1_")
    torch.testing.assert_close(cache.decompose_resid(layer=1).sum(0), cache["resid_pre", 1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cache.decompose_resid(layer=1, mlp_input=True).sum(0), cache["resid_mid", 1],
                               atol=1e-5, rtol=1e-5)
    attn = cache.decompose_resid(mode="attn", incl_embeds=False, return_labels=True)
    assert all(label.endswith("attn_out") for label in attn[1])


def test_accumulated_resid_and_the_logit_lens_end_at_the_models_logits():
    model, x = small(), tokens()
    logits, cache = model.run_with_cache(x)
    stack, labels = cache.accumulated_resid(return_labels=True)
    assert labels == ["0_pre", "1_pre", "final_post"]
    torch.testing.assert_close(stack[1], cache["resid_pre", 1])
    torch.testing.assert_close(stack[-1], cache["resid_post", -1])
    mids = cache.accumulated_resid(incl_mid=True, return_labels=True)[1]
    assert mids == ["0_pre", "0_mid", "1_pre", "1_mid", "final_post"]
    normed = cache.accumulated_resid(apply_ln=True)
    torch.testing.assert_close(model.W_U(normed[-1]), logits)
    torch.testing.assert_close(normed[0], model.ln_final(cache["resid_pre", 0]))  # each entry its own statistics
    lens, lens_labels = cache.logit_lens(return_labels=True)
    assert lens.shape == (3, 3, 10, 7) and lens_labels == labels
    torch.testing.assert_close(lens[-1], logits)
    torch.testing.assert_close(logit_lens(model, cache["resid_pre", 1]), lens[1])


def test_apply_ln_to_stack_is_the_cached_normalisation_shared_by_every_term():
    model, x = small(), tokens()
    _, cache = model.run_with_cache(x)
    terms = cache.decompose_resid(apply_ln=True)
    resid = cache["resid_post", -1]
    torch.testing.assert_close(terms.sum(0), F.layer_norm(resid, (16,), eps=model.ln_final.eps), atol=1e-5, rtol=1e-5)
    at1 = cache.decompose_resid(layer=1, apply_ln=True).sum(0)
    torch.testing.assert_close(at1, F.layer_norm(cache["resid_pre", 1], (16,), eps=1e-5), atol=1e-5, rtol=1e-5)
    last = cache.apply_ln_to_stack(cache.decompose_resid(pos_slice=-1), pos_slice=-1).sum(0)
    torch.testing.assert_close(last, F.layer_norm(resid[:, -1], (16,), eps=1e-5), atol=1e-5, rtol=1e-5)
    plain = minimal_like()
    _, c2 = plain.run_with_cache(x)
    stack = c2.decompose_resid()
    assert torch.equal(c2.apply_ln_to_stack(stack), stack)  # no norm: unchanged


@pytest.mark.parametrize("build", [small, minimal_like])
def test_stack_head_results_sum_with_the_bias_to_the_attention_output(build):
    model, x = build(), tokens()
    _, cache = model.run_with_cache(x)
    stack, labels = cache.stack_head_results(return_labels=True)
    heads = model.cfg.n_heads
    assert stack.shape == (sum(heads), 3, 10, model.cfg.d_model)
    assert labels[:heads[0] + 1] == [f"L0H{h}" for h in range(heads[0])] + ["L1H0"]
    for layer in range(2):
        attn = model.blocks[layer].attn
        bias = attn.W_O.bias if attn.W_O is not None and attn.W_O.bias is not None else 0.0
        start = sum(heads[:layer])
        total = stack[start:start + heads[layer]].sum(0) + bias
        torch.testing.assert_close(total, cache["attn_out", layer], atol=1e-5, rtol=1e-5)
    assert cache.stack_head_results(layer=1).shape[0] == heads[0]
    with_rest, rest_labels = cache.stack_head_results(incl_remainder=True, return_labels=True)
    assert rest_labels[-1] == "remainder"
    torch.testing.assert_close(with_rest.sum(0), cache["resid_post", -1], atol=1e-5, rtol=1e-5)


def test_the_helpers_need_the_model_and_valid_layers():
    model, x = small(), tokens()
    _, cache = model.run_with_cache(x)
    with pytest.raises(InputError, match="layer"):
        cache.accumulated_resid(layer=5)
    with pytest.raises(KeyError, match="hook_resid_pre"):
        model.run_with_cache(x, names_filter="hook_embed")[1].accumulated_resid()
    cache.model = None
    with pytest.raises(InputError, match="run_with_cache"):
        cache.decompose_resid()
