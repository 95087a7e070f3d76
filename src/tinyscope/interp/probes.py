"""Linear probes on frozen activations (spatial-induction paper, App. I.7).

* :func:`config_probe`: logistic regression (L2, L-BFGS) on hard labels, scored by balanced
  accuracy (macro-averaged recall); the regularization strength C is chosen on a validation fold.
* :func:`soft_probe`: multinomial logistic regression fitted with L-BFGS on soft labels q, i.e. it
  minimizes mean KL(q || softmax(W x + b)) + l2 ||W||^2 (equal to soft cross-entropy up to the
  constant entropy of q); scored as 1 - KL(q || probe) / KL(q || uniform).
* :func:`balanced_indices`: stratified subsampling so that every label (or label pair) has the
  same number of points.
* :func:`group_folds`: splits disjoint by group (rule): a rotating k-fold over groups (ECA's 25
  test rules: 5 groups of 5, each fold 15/5/5) or one fixed 60/20/20 split.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

DEFAULT_CS = (0.01, 0.1, 1.0, 10.0)
DEFAULT_L2 = (1e-4, 1e-3, 1e-2)


@dataclass
class Fold:
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def group_folds(groups: np.ndarray, n_folds: int | None, rng: np.random.Generator) -> list[Fold]:
    """Index folds with disjoint groups. ``n_folds`` = None: one 60/20/20 split of the groups;
    otherwise a rotating split: fold i tests group-block i, validates on block i+1, trains on the rest."""
    uniq = rng.permutation(np.unique(groups))
    if n_folds is None:
        n = len(uniq)
        n_val = n_test = max(1, round(0.2 * n))
        blocks = [uniq[n_val + n_test:], uniq[:n_val], uniq[n_val:n_val + n_test]]
        return [Fold(*(np.flatnonzero(np.isin(groups, b)) for b in blocks))]
    if len(uniq) < 3 or n_folds < 3:
        raise ValueError(f"a rotating split needs >= 3 groups and folds, got {len(uniq)} groups, {n_folds} folds")
    blocks = np.array_split(uniq, n_folds)
    folds = []
    for i in range(n_folds):
        test, val = blocks[i], blocks[(i + 1) % n_folds]
        train = np.concatenate([blocks[j] for j in range(n_folds) if j not in (i, (i + 1) % n_folds)])
        folds.append(Fold(*(np.flatnonzero(np.isin(groups, b)) for b in (train, val, test))))
    return folds


def balanced_indices(labels: np.ndarray, per_label: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``per_label`` indices of each distinct label (all of a rarer label), shuffled."""
    out = []
    for lab in np.unique(labels):
        idx = np.flatnonzero(labels == lab)
        out.append(rng.choice(idx, size=min(per_label, len(idx)), replace=False))
    return rng.permutation(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    labels = np.unique(y_true)
    return float(np.mean([np.mean(y_pred[y_true == lab] == lab) for lab in labels]))


def _standardize(train: np.ndarray, *others: np.ndarray):
    mu, sd = train.mean(0), train.std(0) + 1e-6
    return [(x - mu) / sd for x in (train, *others)]


def config_probe(X: np.ndarray, y: np.ndarray, fold: Fold, Cs=DEFAULT_CS, max_iter: int = 500) -> dict:
    """Balanced accuracy on the fold's test part of a logistic regression with C chosen on its val part."""
    from sklearn.linear_model import LogisticRegression

    Xtr, Xva, Xte = _standardize(X[fold.train], X[fold.val], X[fold.test])
    ytr, yva, yte = y[fold.train], y[fold.val], y[fold.test]
    if len(np.unique(ytr)) < 2:
        only = np.unique(ytr)[0]
        return {"balanced_accuracy": balanced_accuracy(yte, np.full_like(yte, only)), "C": None}
    best = None
    for C in Cs:
        clf = LogisticRegression(C=C, max_iter=max_iter).fit(Xtr, ytr)
        score = balanced_accuracy(yva, clf.predict(Xva))
        if best is None or score > best[0]:
            best = (score, C)
    clf = LogisticRegression(C=best[1], max_iter=max(max_iter, 2500)).fit(Xtr, ytr)  # the final refit
    return {"balanced_accuracy": balanced_accuracy(yte, clf.predict(Xte)), "C": best[1], "val_score": best[0]}


def kl_rows(q: np.ndarray | torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """KL(q_i || p_i) per row, p given by its log-probabilities."""
    q = torch.as_tensor(q, dtype=logp.dtype)
    return (q * (torch.log(q.clamp_min(1e-12)) - logp)).sum(-1)


def fit_soft_logreg(X: np.ndarray, Q: np.ndarray, l2: float, max_iter: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """W (D, V), b (V) minimizing mean KL(Q || softmax(X W + b)) + l2 ||W||^2 by L-BFGS (float64)."""
    x = torch.as_tensor(X, dtype=torch.float64)
    q = torch.as_tensor(Q, dtype=torch.float64)
    W = torch.zeros(x.shape[1], q.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(q.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=max_iter, tolerance_grad=1e-7, tolerance_change=1e-10,
                            history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = kl_rows(q, torch.log_softmax(x @ W + b, -1)).mean() + l2 * (W * W).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return W.detach(), b.detach()


def soft_score(X: np.ndarray, Q: np.ndarray, W: torch.Tensor, b: torch.Tensor) -> float:
    """1 - KL(q || probe) / KL(q || uniform), KLs averaged over points."""
    x = torch.as_tensor(X, dtype=torch.float64)
    logp = torch.log_softmax(x @ W + b, -1)
    V = Q.shape[1]
    kl_probe = kl_rows(Q, logp).mean()
    kl_unif = kl_rows(Q, torch.full_like(logp, -np.log(V))).mean()
    return float(1.0 - kl_probe / kl_unif.clamp_min(1e-12))


def soft_probe(X: np.ndarray, Q: np.ndarray, fold: Fold, l2s=DEFAULT_L2, max_iter: int = 200) -> dict:
    """The k-gram predictive-distribution probe, regularization chosen on the val part."""
    Xtr, Xva, Xte = _standardize(X[fold.train], X[fold.val], X[fold.test])
    best = None
    for l2 in l2s:
        W, b = fit_soft_logreg(Xtr, Q[fold.train], l2, max_iter)
        score = soft_score(Xva, Q[fold.val], W, b)
        if best is None or score > best[0]:
            best = (score, l2, W, b)
    return {"score": soft_score(Xte, Q[fold.test], best[2], best[3]), "l2": best[1], "val_score": best[0]}
