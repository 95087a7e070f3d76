"""N-bit parity data and the feed-forward stacks of the parity probe (batched fast path vs modules)."""
import itertools

import numpy as np
import pytest
import torch

from tinyscope.studies.ncffn.bit_parity import all_bits, parity, sample_bits, signed
from tinyscope.studies.ncffn.ffn_stack import PARITY_BASES, FeedForwardStack
from tinyscope.studies.ncffn.parity_bases import (
    BatchedStacks,
    format_table,
    min_params_table,
    plot_parity,
    train_parity_batch,
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


def test_sweep_solves_small_parity_and_tables():
    rows = train_parity_batch("swiglu", 3, 1, [2, 4], [0], max_steps=400)
    assert any(r["accuracy"] == 1.0 for r in rows)
    rows += train_parity_batch("bilinear", 3, 1, [2], [0], max_steps=50)
    table = min_params_table(rows)
    assert {t["basis"] for t in table} == {"swiglu", "bilinear"}
    sw = next(t for t in table if t["basis"] == "swiglu")
    assert sw["min_params"] == min(r["params"] for r in rows if r["basis"] == "swiglu" and r["accuracy"] == 1.0)
    assert "swiglu" in format_table(table)
    assert plot_parity(rows).axes
