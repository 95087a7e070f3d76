"""Padded batches: attention_mask (B, T), 1 = real token, padding on the left or the right.
A padded row's logits at its real positions equal the unpadded row's, on both attention paths."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.core.models.builders import small_transformer
from tinyscope.errors import InputError

PAD = 0
LENGTHS = [10, 4, 7]


def model_of(**kw):
    return small_transformer(**kw)


def rows():
    g = torch.Generator().manual_seed(3)
    return [torch.randint(1, 7, (n,), generator=g) for n in LENGTHS]


def padded(side: str, T: int = 11):
    """The rows padded to T on ``side``: tokens (B, T), mask (B, T), and where each row's real tokens are."""
    tokens = torch.full((len(LENGTHS), T), PAD)
    mask = torch.zeros(len(LENGTHS), T, dtype=torch.long)
    spans = []
    for b, row in enumerate(rows()):
        start = T - len(row) if side == "left" else 0
        tokens[b, start:start + len(row)] = row
        mask[b, start:start + len(row)] = 1
        spans.append(slice(start, start + len(row)))
    return tokens, mask, spans


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("cfg", [{}, dict(d_model=8, n_heads=[2, 2], d_mlp=[16, 16], attn_out_proj=False,
                                          norm="none", final_norm=False)])
def test_padded_rows_give_the_unpadded_logits_at_real_positions(side, fast, cfg):
    model = model_of(**cfg)
    model.use_fast_attention(fast)
    tokens, mask, spans = padded(side)
    logits = model(tokens, attention_mask=mask)
    assert torch.isfinite(logits).all()
    for b, row in enumerate(rows()):
        torch.testing.assert_close(logits[b, spans[b]], model(row[None])[0], atol=1e-5, rtol=1e-5)


def test_both_paths_agree_on_a_padded_batch_and_a_non_causal_model():
    for cfg in ({}, dict(causal=False)):
        model = model_of(**cfg)
        tokens, mask, _ = padded("left")
        fast = model(tokens, attention_mask=mask)
        model.use_fast_attention(False)
        torch.testing.assert_close(model(tokens, attention_mask=mask), fast, atol=1e-5, rtol=1e-5)
    model = model_of(causal=False)
    tokens, mask, spans = padded("right")
    out = model(tokens, attention_mask=mask)
    for b, row in enumerate(rows()):  # bidirectional: padding on the right must not leak in either
        torch.testing.assert_close(out[b, spans[b]], model(row[None])[0], atol=1e-5, rtol=1e-5)


def test_masked_keys_get_no_attention_and_pad_queries_none_at_all():
    model = model_of()
    tokens, mask, spans = padded("left")
    _, cache = model.run_with_cache(tokens, attention_mask=mask)
    pattern = cache["pattern", 0]  # (B, H, T, T)
    keys_masked = ~mask.bool()[:, None, None, :]
    assert pattern.masked_select(keys_masked.expand_as(pattern)).abs().max() == 0
    real_rows = mask.bool()[:, None, :, None].expand_as(pattern)
    torch.testing.assert_close(pattern.sum(-1)[real_rows[..., 0]], torch.ones(int(real_rows[..., 0].sum())))
    assert pattern[1, :, :spans[1].start].abs().max() == 0  # a left pad has no real key before it
    assert torch.isinf(cache["attn_scores", 0][1, :, -1, :spans[1].start]).all()  # masked scores, pre-softmax


def test_the_loss_of_a_padded_batch_counts_pairs_of_real_tokens():
    model = model_of()
    for side in ("left", "right"):
        tokens, mask, _ = padded(side)
        logits = model(tokens, attention_mask=mask)
        pairs = (mask[:, :-1] * mask[:, 1:]).bool()
        expected = F.cross_entropy(logits[:, :-1][pairs], tokens[:, 1:][pairs])
        torch.testing.assert_close(model(tokens, return_type="loss", attention_mask=mask), expected)
    total = sum(F.cross_entropy(model(r[None])[0, :-1], r[1:], reduction="sum") for r in rows())
    unpadded = total / sum(n - 1 for n in LENGTHS)
    torch.testing.assert_close(model(tokens, return_type="loss", attention_mask=mask), unpadded, atol=1e-5, rtol=1e-5)


def test_a_full_mask_is_the_unmasked_model_and_bad_masks_are_refused():
    model = model_of()
    tokens, mask, _ = padded("right")
    assert torch.equal(model(tokens, attention_mask=torch.ones_like(mask)), model(tokens))
    with pytest.raises(InputError, match="attention_mask"):
        model(tokens, attention_mask=mask[:, :-1])
    with pytest.raises(InputError, match="attention_mask"):
        model(tokens, attention_mask=mask * 2)


def test_a_model_with_a_sequence_quantifier_takes_right_padding_only():
    model = model_of()
    model.blocks[0].add_quant(nn.Linear(16, 16))  # position-wise, so right padding changes nothing
    model.setup_hooks()
    tokens, mask, spans = padded("right")
    out = model(tokens, attention_mask=mask)
    torch.testing.assert_close(out[1, spans[1]], model(rows()[1][None])[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(InputError, match="pad on the right"):
        model(*padded("left")[:1], attention_mask=padded("left")[1])


@pytest.mark.parametrize("fast", [True, False])
def test_a_left_padded_batch_has_finite_gradients_equal_to_the_unpadded_rows(fast):
    model = model_of()
    model.use_fast_attention(fast)
    tokens, mask, _ = padded("left")
    model(tokens, return_type="loss", attention_mask=mask).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    assert all(torch.isfinite(g).all() for g in grads.values())
    model.zero_grad()
    total = sum(F.cross_entropy(model(r[None])[0, :-1], r[1:], reduction="sum") for r in rows())
    (total / sum(n - 1 for n in LENGTHS)).backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)
