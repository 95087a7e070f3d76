import itertools

import numpy as np
import pytest

from tinyscope.errors import ConfigError
from tinyscope.studies.log_icot.task import (
    BLANK,
    CURRICULA,
    SEP,
    Parity,
    ParityConfig,
    draw_subset,
    node_levels,
    parity_tree,
    removal_schedule,
)


def slow_tree(bits_row, subset):
    """Recursive XOR tree, one row at a time: the nodes of each level, bottom-up, left to right."""
    level = [int(bits_row[i]) for i in sorted(subset)]
    nodes = []
    while len(level) > 1:
        level = [level[2 * i] ^ level[2 * i + 1] for i in range(len(level) // 2)]
        nodes.extend(level)
    return nodes


@pytest.mark.parametrize("n,k", [(6, 2), (10, 4), (20, 8), (30, 16)])
def test_tree_and_answer_match_direct_xor(n, k):
    rng = np.random.default_rng(n * k)
    task = Parity(ParityConfig(n=n, k=k, subset_seed=3))
    bits, nodes = task.draw(rng, 300)
    assert nodes.shape == (300, k - 1)
    direct = np.bitwise_xor.reduce(bits[:, task.subset], axis=1)
    np.testing.assert_array_equal(nodes[:, -1], direct)
    for r in range(0, 300, 37):
        assert list(nodes[r]) == slow_tree(bits[r], task.subset)


def test_all_inputs_enumerated_for_a_small_instance():
    n, subset = 5, [0, 2, 3, 4]
    bits = np.array(list(itertools.product([0, 1], repeat=n)), dtype=np.int64)
    nodes = parity_tree(bits, subset)
    assert np.array_equal(nodes[:, -1], bits[:, subset].sum(1) % 2)
    assert np.array_equal(nodes[:, 0], bits[:, 0] ^ bits[:, 2])
    assert np.array_equal(nodes[:, 1], bits[:, 3] ^ bits[:, 4])


def test_subset_is_fixed_by_seed_and_sorted():
    a, b = draw_subset(30, 16, 7), draw_subset(30, 16, 7)
    assert np.array_equal(a, b) and len(set(a.tolist())) == 16 and np.all(np.diff(a) > 0)
    assert not np.array_equal(a, draw_subset(30, 16, 8))
    assert list(Parity(ParityConfig(n=10, k=4, subset=[9, 1, 4, 2])).subset) == [1, 2, 4, 9]


def test_node_levels():
    assert node_levels(8).tolist() == [1, 1, 1, 1, 2, 2, 3]
    assert node_levels(16).tolist().count(4) == 1 and len(node_levels(16)) == 15


@pytest.mark.parametrize("k", [4, 8, 16])
def test_schedules_remove_exactly_the_intended_nodes(k):
    L = k.bit_length() - 1
    level = node_levels(k)
    assert removal_schedule(k, "cot") == [()]
    assert removal_schedule(k, "direct") == [tuple(range(k - 2))]
    icot = removal_schedule(k, "icot")
    assert len(icot) == k - 1
    for s, removed in enumerate(icot):
        assert removed == tuple(range(s))  # one more token per stage, in CoT order
    log = removal_schedule(k, "logicot")
    assert len(log) == L
    for stage, removed in enumerate(log):
        assert set(removed) == {j for j in range(k - 1) if level[j] <= stage}  # whole levels, bottom-up
    assert log[-1] == icot[-1] == removal_schedule(k, "direct")[0]  # all end with the answer alone
    assert len(icot) / len(log) == (k - 1) / L


@pytest.mark.parametrize("removed", [(), (0,), (0, 1, 2, 3), (0, 1, 2, 3, 4, 5)])
def test_blank_placeholders_keep_positions_aligned(removed):
    n, k = 12, 8
    task = Parity(ParityConfig(n=n, k=k, subset_seed=1))
    rng = np.random.default_rng(0)
    batch = task.sample(rng, 64, removed)
    nodes = batch.meta["nodes"]
    assert batch.tokens.shape == (64, n + k - 1)  # same length at every stage
    assert np.array_equal(batch.tokens[:, :n], batch.meta["bits"]) and np.all(batch.tokens[:, n] == SEP)
    for j in range(k - 1):
        slot = n + j
        supervised = j not in removed
        assert np.all(batch.loss_mask[:, slot] == supervised)
        if supervised:
            assert np.array_equal(batch.targets[:, slot], nodes[:, j])
        if j < k - 2:  # the token after node j's slot is node j, or a blank
            expect = np.full(64, BLANK) if j in removed else nodes[:, j]
            assert np.array_equal(batch.tokens[:, slot + 1], expect)
    assert batch.loss_mask.sum(1).tolist() == [k - 1 - len(removed)] * 64


def test_drop_removal_moves_kept_tokens_left():
    n, k = 10, 8
    task = Parity(ParityConfig(n=n, k=k, subset_seed=1, removal="drop"))
    batch = task.sample(np.random.default_rng(0), 16, (0, 1, 2, 3))
    nodes = batch.meta["nodes"]
    assert batch.tokens.shape == (16, n + 1 + 2)  # two level-2 tokens, then the answer is predicted
    assert np.array_equal(batch.tokens[:, n + 1:], nodes[:, 4:6])
    assert np.array_equal(batch.targets[:, n:], nodes[:, 4:])
    assert batch.loss_mask[:, n:].all() and not batch.loss_mask[:, :n].any()
    assert task.sample(np.random.default_rng(0), 4, (0, 1, 2, 3, 4, 5)).tokens.shape == (4, n + 1)


def test_same_rng_same_bytes_and_fixed_sets():
    task = Parity(ParityConfig(n=12, k=4, n_val=50, n_test=60))
    a = task.sample(np.random.default_rng([5, 1]), 32, (0,))
    b = task.sample(np.random.default_rng([5, 1]), 32, (0,))
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.targets, b.targets)
    assert task.eval_batch("val").tokens.shape == (50, 15) and len(task.fixed("test")[0]) == 60
    assert not np.array_equal(task.fixed("val")[0], task.fixed("test")[0][:50])
    assert task.eval_fingerprint() == Parity(ParityConfig(n=12, k=4, n_val=50, n_test=60)).eval_fingerprint()


def test_bad_configs_are_rejected():
    with pytest.raises(ConfigError, match="power of two"):
        ParityConfig(n=10, k=6)
    with pytest.raises(ConfigError, match="task.n"):
        ParityConfig(n=4, k=8)
    with pytest.raises(ConfigError, match="subset"):
        ParityConfig(n=10, k=4, subset=[1, 1, 2, 3])
    with pytest.raises(ConfigError, match="answer"):
        Parity(ParityConfig(n=10, k=4)).layout([2])
    assert set(CURRICULA) == {"direct", "cot", "icot", "logicot"}
