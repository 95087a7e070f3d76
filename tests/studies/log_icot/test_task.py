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
    encode,
    encode_ahead,
    node_children,
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
    with pytest.raises(ConfigError, match="blank_ahead"):
        ParityConfig(n=10, k=4, blank_ahead=1.0)
    with pytest.raises(ConfigError, match="removal=blank"):
        ParityConfig(n=10, k=4, blank_ahead=0.5, removal="drop")
    assert set(CURRICULA) == {"direct", "cot", "icot", "logicot"}


def test_node_children_are_the_tree_below():
    """Each node's value is the XOR of its children's (or of its two selected bits at level 1)."""
    for k in (2, 4, 8, 16):
        task = Parity(ParityConfig(n=k + 3, k=k))
        bits, nodes = task.draw(np.random.default_rng(0), 64)
        chosen = bits[:, task.subset]
        for j, children in enumerate(node_children(k)):
            if children:
                assert np.array_equal(nodes[:, j], nodes[:, children[0]] ^ nodes[:, children[1]])
            else:
                assert np.array_equal(nodes[:, j], chosen[:, 2 * j] ^ chosen[:, 2 * j + 1])


def slow_lookahead_row(bits_row, nodes_row, task, now, ahead):
    """One look-ahead sample written out by hand: the next stage's tokens; a target at every node
    the current stage keeps whose children the next stage does not newly remove."""
    n, k = task.n, task.k
    tokens = [*bits_row, SEP] + [BLANK] * (k - 2)
    for j in range(k - 2):
        if j not in ahead:
            tokens[n + 1 + j] = nodes_row[j]
    children = node_children(k)
    new = set(ahead) - set(now)
    mask = [False] * (n + k - 1)
    targets = [0] * (n + k - 1)
    for j in range(k - 1):
        if j not in now and not new & set(children[j]):
            mask[n + j], targets[n + j] = True, nodes_row[j]
    return tokens, targets, mask


@pytest.mark.parametrize("k", [4, 8, 16])
def test_blank_ahead_mixes_lookahead_samples_per_row(k):
    """blank_ahead = 0.5: every row is either the stage's own sample or the hand-written look-ahead
    one; both kinds occur; the bits drawn are those of blank_ahead = 0 (the coins come after)."""
    schedule = removal_schedule(k, "logicot")
    task = Parity(ParityConfig(n=k + 6, k=k, blank_ahead=0.5))
    plain = Parity(ParityConfig(n=k + 6, k=k))
    for now, ahead in zip(schedule, schedule[1:]):
        batch = task.sample(np.random.default_rng([3, len(now)]), 64, now, ahead=ahead)
        own = plain.sample(np.random.default_rng([3, len(now)]), 64, now, ahead=ahead)
        assert np.array_equal(batch.meta["bits"], own.meta["bits"])
        kinds = []
        for i in range(64):
            row = (list(batch.tokens[i]), list(batch.targets[i]), list(batch.loss_mask[i]))
            mine = (list(own.tokens[i]), list(own.targets[i]), list(own.loss_mask[i]))
            look = slow_lookahead_row(batch.meta["bits"][i], batch.meta["nodes"][i], task, now, ahead)
            assert row in (mine, look)
            kinds.append(row == look)
        assert 0 < sum(kinds) < 64


def test_blank_ahead_at_k_8_stage_1_supervises_the_level_2_slots_only():
    """k = 8, stage 1 (level 1 removed) ahead of stage 2 (levels 1-2): level-2 tokens blank; the loss
    on nodes 4 and 5 (computed in-layer from level 1) and not on the answer (its children are gone)."""
    task = Parity(ParityConfig(n=12, k=8))
    s1, s2 = removal_schedule(8, "logicot")[1:3]
    bits, nodes = task.draw(np.random.default_rng(1), 16)
    look = encode_ahead(bits, nodes, task.layout(s1), task.layout(s2))
    assert np.array_equal(look.tokens, encode(bits, nodes, task.layout(s2)).tokens)
    assert np.flatnonzero(look.loss_mask[0]).tolist() == [12 + 4, 12 + 5]
    assert np.array_equal(look.targets[:, [16, 17]], nodes[:, [4, 5]])


def test_blank_ahead_zero_keeps_every_training_stream():
    """The default draws no coins: a run without look-ahead is the byte stream it was before."""
    task = Parity(ParityConfig(n=12, k=4))
    a = task.sample(np.random.default_rng(7), 32, (0, 1), ahead=None)
    b = task.sample(np.random.default_rng(7), 32, (0, 1), ahead=(0, 1))
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.loss_mask, b.loss_mask)
