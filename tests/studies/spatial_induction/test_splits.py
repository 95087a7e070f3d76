import numpy as np

from tinyscope.studies.spatial_induction.splits import EnumeratedSplits
from tinyscope.studies.spatial_induction.symmetry import eca_canonical, wolfram_class
from tinyscope.studies.spatial_induction.task import CellularConfig, CellularTask


def test_eca_splits_are_70_9_9_disjoint_stratified_and_reproducible():
    s = EnumeratedSplits(seed=3)
    canon = {k: s.canonical(k) for k in ("train", "val", "test")}
    assert [len(canon[k]) for k in ("train", "val", "test")] == [70, 9, 9]
    assert not (set(canon["train"]) & set(canon["val"])) and not (set(canon["val"]) & set(canon["test"]))
    rules = {k: set(s.rules(k).tolist()) for k in canon}
    assert sum(len(r) for r in rules.values()) == 256
    for k, members in rules.items():  # every rule's class lies entirely in its split
        assert {eca_canonical(r) for r in members} == set(canon[k])
    for k in ("val", "test"):  # every Wolfram class is represented in each held-out split
        assert {wolfram_class(c) for c in canon[k]} == {1, 2, 3, 4}
    assert 110 in rules["test"] and 110 not in rules["train"]
    assert [len(rules[k]) for k in ("train", "val", "test")] == [203, 28, 25]  # App. I.1's sizes
    assert EnumeratedSplits(seed=3).assignment == s.assignment
    assert EnumeratedSplits(seed=4).assignment != s.assignment


def test_task_draws_training_rules_only_from_the_training_pool():
    task = CellularTask(CellularConfig(n_val=64, n_test=64))
    batch = task.sample(np.random.default_rng(0), 64)
    numbers = (batch.meta["tables"] * (2 ** np.arange(8))).sum(-1)
    train = set(task.splits.rules("train").tolist())
    assert set(numbers.tolist()) <= train
    test = task.eval_set("test").meta["tables"]
    assert set(((test * (2 ** np.arange(8))).sum(-1)).tolist()) <= set(task.splits.rules("test").tolist())
    val_in = task.eval_set("val_in").meta["tables"]
    assert set(((val_in * (2 ** np.arange(8))).sum(-1)).tolist()) <= train


def test_horizon_curriculum_trains_on_stream_prefixes_and_resumes():
    from tinyscope.studies.spatial_induction.serialize import Layout

    cfg = CellularConfig(curriculum_T=[3, 5], curriculum_steps=[2, 1], n_val=8, n_test=8)
    task = CellularTask(cfg)
    shapes = [task.sample(np.random.default_rng(i), 2).tokens.shape[1] for i in range(4)]
    assert shapes == [Layout(task.lattice, 3).input_length] * 2 + [Layout(task.lattice, 5).input_length, task.n_ctx]
    b = CellularTask(cfg).sample(np.random.default_rng(0), 2)
    short = Layout(task.lattice, 3).serialize(b.meta["traj"])
    assert np.array_equal(b.tokens, short[:, :-1]) and np.array_equal(b.targets, short[:, 1:])
    resumed = CellularTask(cfg)
    resumed.load_state_dict(task.state_dict())
    assert resumed.sample(np.random.default_rng(9), 2).tokens.shape[1] == task.n_ctx


def test_alpha_curriculum_draws_sharper_training_rules_then_the_task_alpha():
    import pytest

    from tinyscope.errors import ConfigError

    cfg = CellularConfig(rules="stochastic", T=6, T0=3, curriculum_T=[4], curriculum_steps=[2],
                         curriculum_alpha=[0.01], n_val=4, n_test=4)
    task = CellularTask(cfg)
    assert [task.train_alpha(i) for i in range(3)] == [0.01, 0.01, 1.0]
    early = [task.sample(np.random.default_rng(i), 64).meta["tables"] for i in range(2)]
    late = task.sample(np.random.default_rng(2), 64).meta["tables"]
    # Dirichlet(0.01) rows are almost one-hot; Dirichlet(1) rows on V = 2 are uniform on [0, 1]
    assert all(np.mean(t.max(-1) > 0.99) > 0.9 for t in early) and np.mean(late.max(-1) > 0.99) < 0.1
    plain = CellularConfig(rules="stochastic", T=6, T0=3, n_val=4, n_test=4)  # no alpha curriculum:
    a = CellularTask(plain).sample(np.random.default_rng(5), 8)           # the draws are unchanged
    b = CellularTask(CellularConfig(**{**plain.__dict__, "curriculum_T": [6], "curriculum_steps": [1],
                                       "curriculum_alpha": [1.0]})).sample(np.random.default_rng(5), 8)
    assert np.array_equal(a.meta["tables"], b.meta["tables"]) and np.array_equal(a.tokens, b.tokens)
    with pytest.raises(ConfigError, match="curriculum_alpha"):
        CellularConfig(curriculum_T=[3], curriculum_steps=[2], curriculum_alpha=[0.1])  # deterministic rules
    with pytest.raises(ConfigError, match="curriculum_alpha"):
        CellularConfig(rules="stochastic", T=6, T0=3, curriculum_T=[3], curriculum_steps=[2], curriculum_alpha=[0.1, 1])
    with pytest.raises(ConfigError, match="train_targets"):
        CellularConfig(train_targets="expected")  # deterministic rules


def test_expected_targets_are_the_rule_law_at_cells_and_one_hot_at_separators():
    import torch

    from tinyscope.studies.spatial_induction.bayes import true_predictive
    from tinyscope.studies.spatial_induction.experiment import soft_target_loss

    cfg = CellularConfig(rules="stochastic", grid=[8], T=6, T0=3, train_targets="expected",
                         curriculum_T=[4], curriculum_steps=[1], n_val=4, n_test=4)
    task = CellularTask(cfg)
    short, full = task.sample(np.random.default_rng(0), 16), task.sample(np.random.default_rng(1), 16)
    assert short.meta["soft_targets"].shape == (*short.tokens.shape, task.vocab_size)
    soft, traj, tables = full.meta["soft_targets"], full.meta["traj"], full.meta["tables"]
    np.testing.assert_allclose(soft.sum(-1), 1.0, rtol=1e-6)
    q = true_predictive(task.lattice, traj, tables)  # (B, T, G, V)
    V, step = task.lattice.V, task.layout.step_tokens
    for b, t, z in [(0, 1, 0), (3, 4, 5), (15, 5, 7), (2, 0, 3)]:  # direct: position of cell (t, z) - 1
        np.testing.assert_allclose(soft[b, t * step + z - 1, :V], q[b, t, z], rtol=1e-6)
    seps = full.targets >= V
    assert np.array_equal(soft[seps].argmax(-1), full.targets[seps]) and np.all(soft[seps].max(-1) == 1)
    # the soft loss is the expectation of the sampled-label loss: equal for one-hot targets
    logits = torch.randn(*full.tokens.shape, task.vocab_size)
    model = lambda tokens: logits  # noqa: E731
    t = full.to_torch()
    hard = torch.nn.functional.cross_entropy(logits[t["loss_mask"]], t["targets"][t["loss_mask"]])
    one_hot = dict(t, soft_targets=torch.nn.functional.one_hot(t["targets"], task.vocab_size).float())
    torch.testing.assert_close(soft_target_loss(model, one_hot), hard)
    assert CellularTask(CellularConfig(rules="stochastic", T=6, T0=3, n_val=4, n_test=4)).sample(
        np.random.default_rng(0), 2).meta.get("soft_targets") is None
