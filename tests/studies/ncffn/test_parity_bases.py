"""N-bit parity data and the feed-forward stacks of the parity probe (batched fast path vs modules)."""
import itertools

import numpy as np
import pytest
import torch

from tinyscope.errors import TinyscopeError
from tinyscope.models.utils import count_parameters
from tinyscope.studies.ncffn.bit_parity import all_bits, parity, sample_bits, signed
from tinyscope.studies.ncffn.ffn_stack import PARITY_BASES, FeedForwardStack
from tinyscope.studies.ncffn.parity_bases import (
    BatchedStacks,
    ParitySweepConfig,
    basis_widths,
    cell_specs,
    format_table,
    min_params_table,
    plot_parity,
    train_parity_batch,
    train_parity_cell,
)


def test_parity_data_against_a_direct_count():
    bits = all_bits(5)
    assert bits.shape == (32, 5) and len({tuple(r) for r in bits}) == 32
    slow = [sum(int(b) for b in f"{i:05b}") % 2 for i in range(32)]
    assert parity(bits).tolist() == slow
    assert [tuple(r) for r in bits] == list(itertools.product([0, 1], repeat=5))
    x = signed(bits)
    assert np.array_equal(np.prod(x, axis=1) < 0, parity(bits) == 1)  # parity = sign of the product
    s = sample_bits(np.random.default_rng(0), 1000, 7)
    assert s.shape == (1000, 7) and abs(s.mean() - 0.5) < 0.05


@pytest.mark.parametrize("basis", PARITY_BASES)
def test_batched_stacks_equal_the_modules(basis):
    stacks = []
    for width, seed in [(3, 0), (8, 1), (5, 2)]:
        torch.manual_seed(seed)
        stacks.append(FeedForwardStack(6, basis, width, depth=2))
    batched = BatchedStacks(stacks)
    x = torch.from_numpy(signed(all_bits(6)))
    got = batched(x)  # (3, 64)
    for e, stack in enumerate(stacks):
        torch.testing.assert_close(got[e], stack(x), rtol=1e-5, atol=1e-5)


def test_masked_channels_stay_frozen():
    torch.manual_seed(0)
    stacks = [FeedForwardStack(4, "nc_bool", 2, 1), FeedForwardStack(4, "nc_bool", 6, 1)]
    batched = BatchedStacks(stacks)
    x = torch.from_numpy(signed(all_bits(4)))
    batched(x).sum().backward()
    masked = batched.mask[0, 0, 0] == 0  # channels of the narrow model that do not exist
    assert masked.any() and batched.W_out.grad[0, 0][masked].abs().sum() == 0


@pytest.mark.parametrize("bases", [("gelu", "nc", "nc_bool"), ("swiglu", "bilinear")])
def test_one_batch_mixes_the_bases_of_a_family(bases):
    stacks = []
    for i, basis in enumerate(bases * 2):
        torch.manual_seed(i)
        stacks.append(FeedForwardStack(5, basis, 4 + 2 * i, depth=2))
    x = torch.from_numpy(signed(all_bits(5)))
    got = BatchedStacks(stacks)(x)  # (E, 32)
    for e, stack in enumerate(stacks):
        torch.testing.assert_close(got[e], stack(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(TinyscopeError, match="one family"):
        BatchedStacks([FeedForwardStack(5, "gelu", 2, 1), FeedForwardStack(5, "swiglu", 2, 1)])


def test_fully_boolean_ladder_has_even_widths_only():
    # an odd fully-Boolean width keeps one GELU channel: it would not be fully Boolean
    layer = FeedForwardStack(4, "nc_bool", 5, 1).layers[0]
    assert (layer.n_smooth, layer.n_pairs) == (1, 2)
    assert basis_widths("nc_bool", [1, 2, 3, 4, 6]) == [2, 4, 6] and basis_widths("gelu", [1, 2]) == [1, 2]
    cfg = ParitySweepConfig(n_bits=[3], bases=["gelu", "nc_bool", "bilinear"], seeds=[0, 1])
    specs = cell_specs(cfg, 3)
    assert sorted(specs) == ["gated", "two_matrix"]
    assert {w for b, w, _ in specs["two_matrix"] if b == "nc_bool"} == {2, 4, 6}  # dense 1..2N, even
    assert {w for b, w, _ in specs["two_matrix"] if b == "gelu"} == set(range(1, 7))
    with pytest.raises(TinyscopeError, match="solve_share"):
        ParitySweepConfig(solve_share=0.0)
    with pytest.raises(TinyscopeError, match="bases"):
        ParitySweepConfig(bases=["relu"])


def test_two_fuzzy_pairs_represent_8_bit_parity():
    """One fully Boolean layer of width 4 (two pairs, 85 parameters) fits 8-bit parity: with s the
    number of ones, each pair's A and A·B are steps of s, and s - 2 * (steps at 0.5, 2.5, 4.5, 6.5)
    alternates in sign, so the capacity is there at 85 parameters."""
    stack = FeedForwardStack(8, "nc_bool", 4, 1)
    layer, k = stack.layers[0], 20.0
    assert count_parameters(stack) == 85 and (layer.n_smooth, layer.n_pairs) == (0, 2)
    with torch.no_grad():
        # s = 4 - sum(x) / 2 on x = 1 - 2b; a step at t has pre-activation k (s - t); rows [A0, A1, B0, B1]
        for row, t in enumerate([0.5, 4.5, 2.5, 6.5]):
            layer.W_in.weight[row] = -k / 2
            layer.W_in.bias[row] = k * (4 - t)
        # post = [A0B0, A1B1, A0(1-B0), A1(1-B1)]; sum of the four steps = 2 AB + A(1-B) per pair
        layer.W_out.weight.zero_()
        layer.W_out.bias.zero_()
        layer.W_out.weight[0] = torch.tensor([2.0, 2.0, 1.0, 1.0]) * 4  # times 2 / readout weight 0.5
        stack.readout.weight.fill_(0.5)  # 0.5 sum(x) = 4 - s
        stack.readout.bias.fill_(-4.5)  # logit = 2 * steps - s - 0.5 > 0 exactly when s is odd
    bits = all_bits(8)
    pred = stack(torch.from_numpy(signed(bits))) > 0
    assert torch.equal(pred, torch.from_numpy(parity(bits) == 1))


def test_sweep_solves_small_parity_and_tables():
    rows = train_parity_batch("swiglu", 3, 1, [2, 4], [0], max_steps=400)
    assert any(r["accuracy"] == 1.0 for r in rows)
    rows += train_parity_batch("bilinear", 3, 1, [2], [0], max_steps=50)
    table = min_params_table(rows, solve_share=1.0, n_boot=50)
    assert {t["basis"] for t in table} == {"swiglu", "bilinear"}
    sw = next(t for t in table if t["basis"] == "swiglu")
    assert sw["params"] == min(r["params"] for r in rows if r["basis"] == "swiglu" and r["accuracy"] == 1.0)
    assert "swiglu" in format_table(table)
    assert plot_parity(rows).axes


def test_a_cell_trains_every_basis_width_and_seed():
    cfg = ParitySweepConfig(n_bits=[2], depths=[1], widths=[1, 2], seeds=[0, 1], max_steps=30)
    rows = train_parity_cell(cfg, 2, 1)
    got = {(r["basis"], r["width"], r["seed"]) for r in rows}
    want = {(b, w, s) for b in cfg.bases for w in basis_widths(b, [1, 2]) for s in (0, 1)}
    assert got == want and len(rows) == len(want)
