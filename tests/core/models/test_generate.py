"""generate: greedy is the argmax loop, the KV cache changes nothing, a seed fixes a sample."""
import pytest
import torch

from tests.core.models.builders import small_transformer
from tinyscope.errors import InputError


def model_of(**kw):
    return small_transformer(**{**dict(vocab_size=9, n_ctx=16, d_mlp=[32, 32]), **kw})


def prompt(B=3, P=4):
    return torch.randint(0, 9, (B, P), generator=torch.Generator().manual_seed(2))


def test_greedy_generation_is_the_argmax_loop():
    model, x = model_of(), prompt()
    seq = x
    for _ in range(6):
        seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    for cached in (True, False):
        out = model.generate(x, 6, do_sample=False, use_past_kv_cache=cached)
        assert torch.equal(out, seq)
    assert torch.equal(model.generate(x, 6, temperature=0), seq)
    assert torch.equal(model.generate(x[0], 6, do_sample=False), seq[:1])


@pytest.mark.parametrize("cfg", [{}, dict(d_model=8, n_heads=[2], d_mlp=[16], attn_out_proj=False, norm="none",
                                          final_norm=False)])
def test_cached_generation_equals_uncached_greedy_and_sampled(cfg):
    model, x = model_of(**cfg), prompt()
    assert torch.equal(model.generate(x, 10, do_sample=False), model.generate(x, 10, do_sample=False,
                                                                               use_past_kv_cache=False))
    a = model.generate(x, 10, seed=5, temperature=1.5, top_k=4)
    b = model.generate(x, 10, seed=5, temperature=1.5, top_k=4, use_past_kv_cache=False)
    assert torch.equal(a, b)


def test_a_seed_or_generator_fixes_the_sample_and_top_k_1_is_greedy():
    model, x = model_of(), prompt()
    a = model.generate(x, 12, seed=1, temperature=2.0)
    assert torch.equal(a, model.generate(x, 12, generator=torch.Generator().manual_seed(1), temperature=2.0))
    assert not torch.equal(a, model.generate(x, 12, seed=2, temperature=2.0))
    assert torch.equal(model.generate(x, 12, seed=3, top_k=1), model.generate(x, 12, do_sample=False))
    with pytest.raises(InputError, match="seed="):
        model.generate(x, 3)


def test_eos_ends_a_row_and_the_context_bounds_the_length():
    model, x = model_of(), prompt()
    greedy = model.generate(x, 8, do_sample=False)
    eos = int(greedy[0, 5])
    out = model.generate(x, 8, do_sample=False, eos_token_id=eos)
    first = (out[0, 4:] == eos).nonzero()[0, 0] + 4
    assert (out[0, first:] == eos).all()
    with pytest.raises(InputError, match="n_ctx"):
        model.generate(x, 13, do_sample=False)


def test_hooks_see_every_step_of_generation():
    model, x = model_of(), prompt()
    lengths = []
    with model.hooks([("blocks.0.hook_resid_post", lambda t, hook: lengths.append(t.shape[1]))]):
        out = model.generate(x, 3, do_sample=False)
    assert lengths == [4, 5, 6]  # a watched model decodes without the KV cache, so its hooks run
    assert torch.equal(out, model.generate(x, 3, do_sample=False))
