"""Figures of the compiled circuits: measured KL to the Bayes posterior against Theorem 9's
budget as the Layer-2 scale beta grows, and positional width against grid size (Lemma 6)."""
from __future__ import annotations

import numpy as np

from tinyscope.studies.spatial_induction.bayes import stream_predictive
from tinyscope.studies.spatial_induction.constructions.dedicated_heads import construction_one
from tinyscope.studies.spatial_induction.task import CellularTask


def max_kl(task: CellularTask, batch, circuit) -> float:
    """Largest KL(Bayes || B4) over resolvable scored cells of ``batch`` (float64 model)."""
    circuit.model.double()
    out = circuit.predictive(batch.tokens).numpy()
    q, resolvable = stream_predictive(task.layout, batch.meta["traj"], alpha=circuit.params.alpha or 1.0)
    kl = (q * (np.log(q) - np.log(out))).sum(-1)[batch.loss_mask & resolvable]
    return float(kl.max())


def kl_vs_beta(task: CellularTask, batch, build=construction_one,
               kappas=(1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001)) -> dict:
    """For each budget kappa: the recipe's beta and Lambda, and the measured largest KL."""
    rows = []
    for kappa in kappas:
        c = build(task.layout, stochastic=True, kappa=kappa)
        rows.append({"kappa": kappa, "beta": c.params.beta, "Lambda": c.params.Lambda, "max_kl": max_kl(task, batch, c)})
    return {"rows": rows}


def kl_vs_beta_figure(data: dict):
    from tinyscope.interp.mpl import plt

    rows = data["rows"]
    beta = [r["beta"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.semilogy(beta, [r["kappa"] for r in rows], "k--o", ms=3, label="budget kappa (Theorem 9)")
    ax.semilogy(beta, [max(r["max_kl"], 1e-16) for r in rows], "o-", color="tab:red", label="measured max KL(Bayes || B4)")
    ax.set_xlabel("Layer-2 scale beta (recipe of App. H.7)")
    ax.set_ylabel("KL")
    ax.legend(fontsize=8)
    ax.set_title("compiled circuit vs the Bayes posterior", fontsize=10)
    fig.tight_layout()
    return fig


def widths_table_figure(rows: list[dict]):
    """A table figure: grid, |G|, d_p, d_model, Lambda, accuracy."""
    from tinyscope.interp.mpl import plt

    cols = ["grid", "|G|", "d_p", "d_model", "Lambda", "TF cell acc"]
    fig, ax = plt.subplots(figsize=(6, 0.4 + 0.3 * len(rows)))
    ax.axis("off")
    cells = [[r["grid"], r["volume"], r["d_p"], r["d_model"], f"{r['Lambda']:.0f}", f"{r['acc']:.4f}"] for r in rows]
    ax.table(cellText=cells, colLabels=cols, loc="center")
    ax.set_title("positional width against grid size (Lemma 6)", fontsize=10)
    fig.tight_layout()
    return fig
