"""The model's distance from the Bayes predictive by context count (a diagnostic beyond the paper).

For the query that targets cell (t, z), n_c is the number of earlier cells with the target's parent
configuration (Theorem 3), and the posterior predictive with Dirichlet pseudocount alpha is
P_alpha(y | c) = (n_{c,y} + alpha) / (n_c + V alpha); alpha = 1 is the paper's k-gram. Binned by
n_c, this module reports

* KL(P_1 || q_model), the TF KL of Table 14 restricted to the bin;
* the entropies of q_model and of P_1 (a model that blurs the counts is under-confident at large n_c);
* over all scored queries, KL(P_alpha || q_model) for a grid of alpha, and the alpha closest to the model;
* the error rate, argmax q_model != the true next state: for deterministic rules the diagnostic of
  a match head that needs several precedents of a configuration before it copies (the k-gram is
  exact from n_c = 1 on).

A model that only lacks the pseudocount has a KL that falls like 1/n_c; a KL flat in n_c means the
model's counts themselves are blurred (it does not find the matching precedents exactly).
"""
from __future__ import annotations

import numpy as np
import torch

from tinyscope.studies.spatial_induction.bayes import posterior_predictive
from tinyscope.studies.spatial_induction.construction_sets import QuerySets
from tinyscope.studies.spatial_induction.serialize import Layout

BIN_EDGES = (0, 1, 2, 3, 4, 8, 16, 32)  # lower edges of the n_c bins; the last is open
ALPHAS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)


def bin_labels() -> list[str]:
    labels = []
    for lo, hi in zip(BIN_EDGES, BIN_EDGES[1:] + (None,)):
        labels.append(f"{lo}+" if hi is None else (str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"))
    return labels


def _kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(p || q) along the last axis, with 0 log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
    return terms.sum(-1)


def _entropy(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(p), 0.0).sum(-1)


class CountProfile:
    """Accumulates the per-bin sums over chunks of scored queries; :meth:`result` averages them."""

    def __init__(self, layout: Layout):
        self.layout = layout
        n_bins = len(BIN_EDGES)
        self.n = np.zeros(n_bins, dtype=np.int64)
        self.kl = np.zeros(n_bins)
        self.h_model = np.zeros(n_bins)
        self.h_kgram = np.zeros(n_bins)
        self.kl_alpha = np.zeros(len(ALPHAS))
        self.errors = np.zeros(n_bins, dtype=np.int64)

    def add(self, logits: torch.Tensor, traj: np.ndarray, sets: QuerySets) -> None:
        """``logits`` (B, N, >= V) of the trajectories ``traj`` (B, T, *shape); ``sets`` their queries."""
        V = self.layout.V
        b, p = torch.as_tensor(sets.batch), torch.as_tensor(sets.pos)
        q_model = torch.softmax(logits[b, p, :V].double(), -1).numpy()  # (Q, V)
        lattice = self.layout.lattice
        n_c = self.layout.to_stream(posterior_predictive(lattice, traj).n_c, fill=0)[sets.batch, sets.pos]  # (Q,)
        bins = np.searchsorted(BIN_EDGES, n_c, side="right") - 1  # (Q,)
        for i, alpha in enumerate(ALPHAS):
            pred = posterior_predictive(lattice, traj, alpha).probs  # (B, T, *shape, V)
            q_alpha = self.layout.to_stream(pred, fill=1.0 / V)[sets.batch, sets.pos]  # (Q, V)
            kl = _kl(q_alpha, q_model)  # (Q,)
            self.kl_alpha[i] += kl.sum()
            if alpha == 1.0:
                np.add.at(self.kl, bins, kl)
                np.add.at(self.h_kgram, bins, _entropy(q_alpha))
        np.add.at(self.h_model, bins, _entropy(q_model))
        np.add.at(self.errors, bins, (q_model.argmax(-1) != sets.target).astype(np.int64))
        np.add.at(self.n, bins, 1)

    def result(self) -> dict:
        n = np.maximum(self.n, 1)
        total = max(int(self.n.sum()), 1)
        kl_alpha = self.kl_alpha / total
        return {"bins": bin_labels(), "n_queries": self.n.tolist(),
                "kl_kgram": (self.kl / n).tolist(), "entropy_model": (self.h_model / n).tolist(),
                "entropy_kgram": (self.h_kgram / n).tolist(), "error_rate": (self.errors / n).tolist(),
                "kl_by_alpha": {str(a): float(v) for a, v in zip(ALPHAS, kl_alpha)},
                "closest_alpha": float(ALPHAS[int(np.argmin(kl_alpha))])}


def count_profile_figure(res: dict):
    from tinyscope.interp.mpl import plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(12, 3))
    filled = [i for i, n in enumerate(res["n_queries"]) if n > 0]
    labels = [res["bins"][i] for i in filled]
    ax1.plot(labels, [res["kl_kgram"][i] for i in filled], "o-")
    ax1.set_xlabel("n_c (earlier cells with the target's configuration)")
    ax1.set_ylabel("KL(k-gram || model), nats")
    ax1.set_title(f"closest Dirichlet alpha: {res['closest_alpha']:g}", fontsize=10)
    ax2.plot(labels, [res["entropy_model"][i] for i in filled], "o-", label="model")
    ax2.plot(labels, [res["entropy_kgram"][i] for i in filled], "s--", label="k-gram (alpha = 1)")
    ax2.set_xlabel("n_c")
    ax2.set_ylabel("predictive entropy, nats")
    ax2.legend(fontsize=8)
    if "error_rate" in res:  # absent from results written before it was measured
        ax3.plot(labels, [res["error_rate"][i] for i in filled], "o-")
    ax3.set_xlabel("n_c")
    ax3.set_ylabel("error rate (argmax != next state)")
    for ax in (ax1, ax2, ax3):
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig
