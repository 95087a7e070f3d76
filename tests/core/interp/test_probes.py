import numpy as np
import pytest
import torch

from tinyscope.interp.probes import (
    Fold,
    balanced_accuracy,
    balanced_indices,
    config_probe,
    fit_soft_logreg,
    group_folds,
    kl_rows,
    soft_probe,
    soft_score,
)


def split(n, rng):
    idx = rng.permutation(n)
    return Fold(idx[: n // 2], idx[n // 2: 3 * n // 4], idx[3 * n // 4:])


def test_config_probe_decodes_a_linearly_separable_target_and_not_shuffled_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 10))
    fold = split(len(X), rng)
    # four classes separated by a margin along two directions, plus eight noise features
    y_sep = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0).astype(int)
    Xs = np.concatenate([np.sign(X[:, :2]) * 3 + 0.3 * rng.normal(size=(1200, 2)), X[:, 2:]], axis=1)
    assert config_probe(Xs, y_sep, fold)["balanced_accuracy"] >= 0.99
    shuffled = rng.permutation(y_sep)
    chance = config_probe(Xs, shuffled, fold)["balanced_accuracy"]
    assert abs(chance - 0.25) < 0.08


def test_soft_probe_kl_matches_the_closed_form_with_constant_features():
    # With no informative feature the best probe is the mean distribution q_bar, and its KL is
    # mean_i KL(q_i || q_bar) in closed form.
    rng = np.random.default_rng(1)
    Q = rng.dirichlet([1, 1, 1], size=300)
    X = np.zeros((300, 1))
    W, b = fit_soft_logreg(X, Q, l2=0.0)
    logp = torch.log_softmax(torch.as_tensor(X) @ W + b, -1)
    q_bar = Q.mean(0)
    closed = float(np.mean(np.sum(Q * (np.log(Q) - np.log(q_bar)), axis=1)))
    assert kl_rows(Q, logp).mean().item() == pytest.approx(closed, abs=1e-7)
    kl_unif = float(np.mean(np.sum(Q * (np.log(Q) - np.log(1 / 3)), axis=1)))
    assert soft_score(X, Q, W, b) == pytest.approx(1 - closed / kl_unif, abs=1e-6)


def test_soft_probe_recovers_a_linear_softmax_target():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(900, 5))
    Q = torch.softmax(torch.as_tensor(X @ rng.normal(size=(5, 3))), -1).numpy()
    assert soft_probe(X, Q, split(900, rng), l2s=(1e-6,))["score"] > 0.99


def test_group_folds_are_rule_disjoint_and_rotate():
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(25), 4)
    folds = group_folds(groups, 5, rng)
    assert len(folds) == 5
    tested = []
    for f in folds:
        parts = [set(groups[p]) for p in (f.train, f.val, f.test)]
        assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
        assert [len(p) for p in parts] == [15, 5, 5]
        tested += sorted(parts[2])
    assert sorted(tested) == list(range(25))
    single = group_folds(groups, None, rng)[0]
    assert len(set(groups[single.test])) == 5 and len(set(groups[single.train])) == 15


def test_balanced_indices_and_balanced_accuracy():
    labels = np.array([0] * 50 + [1] * 5 + [2] * 20)
    idx = balanced_indices(labels, 10, np.random.default_rng(0))
    assert np.bincount(labels[idx]).tolist() == [10, 5, 10]
    assert balanced_accuracy(np.array([0, 0, 0, 1]), np.array([0, 0, 0, 0])) == 0.5
