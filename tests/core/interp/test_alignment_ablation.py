import numpy as np
import pytest
import torch

from tinyscope.interp.ablation import isolated_rows_logits, zero_and_renormalize
from tinyscope.interp.alignment import attention_mass, summarize
from tinyscope.models.transformer import Transformer, TransformerConfig


def test_alignment_of_a_hand_made_pattern_equals_the_known_mass():
    pattern = torch.zeros(2, 2, 4, 4)
    pattern[1, 0, 3] = torch.tensor([0.1, 0.2, 0.3, 0.4])
    pattern[1, 1, 3] = torch.tensor([0.5, 0.0, 0.5, 0.0])
    targets = np.array([[True, False, True, False]])
    mass = attention_mass(pattern, np.array([1]), np.array([3]), targets)
    np.testing.assert_allclose(mass, [[0.4, 1.0]])
    s = summarize(mass)
    assert s["layer"] == pytest.approx(0.7) and s["per_head"] == pytest.approx([0.4, 1.0])


def two_layer(seed=0):
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(vocab_size=5, n_ctx=12, d_model=16, d_head=4, n_heads=[4, 1], d_mlp=[0, 32],
                                         attn_out_proj=True, norm="pre", init="torch"))


def test_empty_ablation_leaves_logits_unchanged_and_a_real_one_changes_them():
    model, x = two_layer(), torch.randint(0, 5, (3, 12), generator=torch.Generator().manual_seed(0))
    clean = model(x)
    batch, pos = np.array([0, 1, 2]), np.array([11, 7, 9])
    none = np.zeros((3, 12), dtype=bool)
    same = model.run_with_hooks(x, fwd_hooks=[("blocks.0.attn.hook_pattern", zero_and_renormalize(batch, pos, none))])
    torch.testing.assert_close(same, clean)
    drop = np.zeros((3, 12), dtype=bool)
    drop[:, :5] = True
    changed = model.run_with_hooks(x, fwd_hooks=[("blocks.1.attn.hook_pattern", zero_and_renormalize(batch, pos, drop))])
    assert not torch.allclose(changed[batch, pos], clean[batch, pos], atol=1e-4)
    others = np.ones((3, 12), dtype=bool)
    others[batch, pos] = False
    torch.testing.assert_close(changed[torch.from_numpy(others)], clean[torch.from_numpy(others)])


def test_renormalized_rows_sum_to_one_and_the_dropped_keys_are_zero():
    p = torch.softmax(torch.randn(2, 3, 6, 6).masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), -1e9), -1)
    keys = np.zeros((2, 6), dtype=bool)
    keys[0, [1, 3]] = True
    keys[1, [0]] = True
    out = zero_and_renormalize(np.array([0, 1]), np.array([5, 4]), keys)(p)
    torch.testing.assert_close(out[0, :, 5].sum(-1), torch.ones(3))
    torch.testing.assert_close(out[1, :, 4].sum(-1), torch.ones(3))
    assert (out[0, :, 5, [1, 3]] == 0).all() and (out[1, :, 4, 0] == 0).all()
    torch.testing.assert_close(out[0, :, 4], p[0, :, 4])  # other rows untouched


def test_isolated_row_ablation_equals_one_forward_per_query():
    model = two_layer(1)
    x = torch.randint(0, 5, (2, 12), generator=torch.Generator().manual_seed(3))
    batch, pos = np.array([0, 0, 1, 1]), np.array([6, 10, 8, 11])
    keys = np.zeros((4, 12), dtype=bool)
    for i, n in enumerate(pos):
        keys[i, max(0, n - 4):n - 1] = True
    fast = isolated_rows_logits(model, x, [("blocks.0.attn.hook_pattern", zero_and_renormalize(batch, pos, keys))], 1)
    for i in range(4):
        one = zero_and_renormalize(batch[i:i + 1], pos[i:i + 1], keys[i:i + 1])
        slow = model.run_with_hooks(x, fwd_hooks=[("blocks.0.attn.hook_pattern", one)])
        torch.testing.assert_close(fast[batch[i], pos[i]], slow[batch[i], pos[i]], atol=1e-5, rtol=1e-5)
    simultaneous = model.run_with_hooks(x, fwd_hooks=[("blocks.0.attn.hook_pattern",
                                                       zero_and_renormalize(batch, pos, keys))])
    assert not torch.allclose(simultaneous[0, 10], fast[0, 10], atol=1e-6)  # the isolation matters


def test_dropping_scores_equals_zeroing_the_pattern_and_survives_underflow():
    from tinyscope.interp.ablation import drop_keys

    model, x = two_layer(2), torch.randint(0, 5, (2, 12), generator=torch.Generator().manual_seed(4))
    batch, pos = np.array([0, 1]), np.array([9, 11])
    keys = np.zeros((2, 12), dtype=bool)
    keys[0, [2, 5, 9]] = True
    keys[1, :6] = True
    a = model.run_with_hooks(x, fwd_hooks=[("blocks.1.attn.hook_pattern", zero_and_renormalize(batch, pos, keys))])
    b = model.run_with_hooks(x, fwd_hooks=[("blocks.1.attn.hook_attn_scores", drop_keys(batch, pos, keys))])
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    inf = float("-inf")
    scores = torch.tensor([[[[0.0, inf, inf], [0.0, 0.0, inf], [5e3, -5e3, 0.0]]]])  # (1, 1, 3, 3), causal
    keep_first = np.array([[True, False, False]])
    out = torch.softmax(drop_keys(np.array([0]), np.array([0]), keep_first)(scores), -1)
    torch.testing.assert_close(out[0, 0, 0], torch.softmax(scores[0, 0, 0], -1))  # nothing left: unchanged
    out = torch.softmax(drop_keys(np.array([0]), np.array([2]), keep_first)(scores), -1)
    torch.testing.assert_close(out[0, 0, 2], torch.tensor([0.0, 0.0, 1.0]))  # pattern would underflow to 0
