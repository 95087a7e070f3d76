import numpy as np
import pytest
import torch

from tinyscope.studies.log_icot.model import (
    ConstrainedParityConfig,
    ConstrainedParityTransformer,
    set_tree_attention,
    tree_children,
    tree_level_mask,
)
from tinyscope.studies.log_icot.task import Parity, ParityConfig, encode, removal_schedule


def test_tree_children():
    assert tree_children(8) == [(0, 1), (2, 3), (4, 5), (6, 7), (0, 1), (2, 3), (4, 5)]


@pytest.mark.parametrize("with_tokens", [True, False])
def test_tree_level_mask_allows_only_the_level_below(with_tokens):
    n, k = 10, 8
    T = n + k - 1
    m1, m2, m3 = (tree_level_mask(n, k, lvl, with_tokens) for lvl in (1, 2, 3))
    assert set(np.flatnonzero(m1.any(1))) == {n, n + 1, n + 2, n + 3}  # level-1 slots query
    assert set(np.flatnonzero(m1.any(0))) == set(range(n))  # ... the bits' token channel
    assert set(np.flatnonzero(m2.any(1))) == {n + 4, n + 5}
    expect = {T + n + j for j in range(4)} | ({n + 1 + j for j in range(4)} if with_tokens else set())
    assert set(np.flatnonzero(m2.any(0))) == expect
    assert set(np.flatnonzero(m3.any(1))) == {n + 6}
    for m in (m1, m2, m3):  # causal on both channels
        q, key = np.nonzero(m)
        assert np.all(key % T <= q)


@pytest.mark.parametrize("n,k,removal", [(12, 4, "icot"), (20, 8, "logicot"), (30, 16, "direct")])
def test_hand_set_tree_computes_every_node_in_one_pass(n, k, removal):
    task = Parity(ParityConfig(n=n, k=k, subset_seed=2))
    model = ConstrainedParityTransformer(ConstrainedParityConfig(), n, k)
    set_tree_attention(model, task.subset)
    bits, nodes = task.draw(np.random.default_rng(0), 256)
    for removed in removal_schedule(k, removal):
        batch = encode(bits, nodes, task.layout(removed))
        logits = model(torch.from_numpy(batch.tokens))  # (B, T, 2)
        pred = logits[:, n:].argmax(-1).numpy()  # (B, k-1): every slot, supervised or not
        assert np.array_equal(pred, nodes)


def test_gradient_training_finds_the_tree_under_logicot():
    torch.manual_seed(0)
    n, k = 10, 4
    task = Parity(ParityConfig(n=n, k=k, subset_seed=5))
    model = ConstrainedParityTransformer(ConstrainedParityConfig(), n, k)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for removed in removal_schedule(k, "logicot"):
        for _ in range(100):
            b = task.sample(rng, 128, removed).to_torch()
            logits = model(b["tokens"])[b["loss_mask"]]  # (N, 2)
            loss = torch.nn.functional.cross_entropy(logits, b["targets"][b["loss_mask"]])
            opt.zero_grad()
            loss.backward()
            opt.step()
    bits, nodes = task.draw(np.random.default_rng(2), 512)
    tokens = torch.from_numpy(encode(bits, nodes, task.layout(removal_schedule(k, "direct")[0])).tokens)
    answer = model(tokens)[:, -1].argmax(-1).numpy()
    assert np.mean(answer == nodes[:, -1]) > 0.99
    top = model.blocks[0].scores.detach()[n].topk(2).indices.sort().values.tolist()
    assert top == task.subset[:2].tolist()


def test_rejects_the_drop_layout():
    model = ConstrainedParityTransformer(ConstrainedParityConfig(), 10, 4)
    with pytest.raises(ValueError, match="blank layout"):
        model(torch.zeros(2, 11, dtype=torch.long))
