import math

import pytest
import torch

from tinyscope.models.hooks import act_name
from tinyscope.models.transformer import Transformer, TransformerConfig


def small(**kw):
    torch.manual_seed(0)
    base = dict(vocab_size=7, n_ctx=10, d_model=16, d_head=4, n_heads=[4, 2], d_mlp=[32, 0],
                attn_out_proj=True, norm="pre", final_norm=True, init="torch")
    base.update(kw)
    return Transformer(TransformerConfig(**base))


def tokens(B=3, T=10, V=7):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(1))


def test_act_name_expands_short_names():
    assert act_name("pattern", 0) == "blocks.0.attn.hook_pattern"
    assert act_name("resid_post", 1) == "blocks.1.hook_resid_post"
    assert act_name("post", 1) == "blocks.1.mlp.hook_post"
    assert act_name("embed") == "hook_embed"


def test_cached_pattern_equals_attention_recomputed_from_q_and_k():
    model, x = small(), tokens()
    _, cache = model.run_with_cache(x)
    for layer in range(2):
        q, k = cache["q", layer], cache["k", layer]  # (B, T, H, Dh)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        T = x.shape[1]
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        torch.testing.assert_close(cache["pattern", layer], torch.softmax(scores, -1))
        assert cache["blocks.%d.attn.hook_pattern" % layer] is cache["pattern", layer]


def test_run_with_cache_returns_the_plain_logits_and_filters_names():
    model, x = small(), tokens()
    logits, cache = model.run_with_cache(x, names_filter=lambda n: n.endswith("resid_post"))
    torch.testing.assert_close(logits, model(x))
    assert sorted(cache.keys()) == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    with pytest.raises(KeyError, match="hook_pattern"):
        cache["pattern", 0]


def test_hook_replacing_the_pattern_changes_logits_and_is_removed_afterwards():
    model, x = small(), tokens()
    clean = model(x)

    def uniform(pattern, hook):
        T = pattern.shape[-1]
        mask = torch.ones(T, T).tril()
        return (mask / mask.sum(-1, keepdim=True)).expand_as(pattern)

    patched = model.run_with_hooks(x, fwd_hooks=[("blocks.0.attn.hook_pattern", uniform)])
    assert not torch.allclose(patched, clean, atol=1e-4)
    torch.testing.assert_close(model(x), clean)
    assert not any(hp.has_hooks for hp in model.hook_dict.values())


def test_hooks_are_removed_even_when_the_forward_raises():
    model, x = small(), tokens()

    def boom(t, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        model.run_with_hooks(x, fwd_hooks=[("blocks.1.hook_resid_pre", boom)])
    assert not any(hp.has_hooks for hp in model.hook_dict.values())


def test_filter_function_selects_many_hooks_and_unknown_name_is_an_error():
    model, x = small(), tokens()
    seen = []
    model.run_with_hooks(x, fwd_hooks=[(lambda n: n.endswith("hook_z"), lambda t, hook: seen.append(hook.name))])
    assert seen == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    with pytest.raises(KeyError, match="unknown hook"):
        model.run_with_hooks(x, fwd_hooks=[("blocks.0.attn.hook_nope", lambda t, hook: None)])


def test_a_hook_returning_a_wrong_shape_is_rejected():
    model, x = small(), tokens()
    with pytest.raises(ValueError, match="shape"):
        model.run_with_hooks(x, fwd_hooks=[("hook_embed", lambda t, hook: t[:, :1])])
