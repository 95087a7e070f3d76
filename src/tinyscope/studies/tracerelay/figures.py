"""TraceRelay figures: validation curves (Fig. 5 style) and accuracy against length (Figs. 2-4).

Each function takes data (metrics.jsonl records or results.json metrics, fractions) and returns
a matplotlib Figure; saving is the caller's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def validation_figure(records: list[dict], title: str) -> "Figure":
    """ID validation accuracy per length and their mean against the update (Fig. 5 style)."""
    from tinyscope.interp.mpl import plt

    evals = [r for r in records if r.get("split") == "eval"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    keys = sorted({k for r in evals for k in r if k.startswith("acc@")}, key=lambda k: int(k[4:]))
    steps = [r["step"] for r in evals]
    for k in keys:
        ax.plot(steps, [100 * r.get(k, float("nan")) for r in evals], lw=1, alpha=0.7, label=f"T={k[4:]}")
    ax.plot(steps, [100 * r.get("id_acc", float("nan")) for r in evals], "k-", lw=2, label="ID mean")
    ax.axhline(99, ls="--", color="gray", lw=1)
    ax.set(xlabel="update", ylabel="accuracy (%)", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def curves_figure(histories: dict[str, list[dict]], metrics: tuple[str, ...] = ("acc@256", "id_acc"),
                  title: str = "Equal Repeats: phase inheritance on / off") -> "Figure":
    """Validation curves of several runs on one axis (Fig. 5 style): for each run label, each
    metric in percent against the update; 1/3 chance and the 99% stopping line dotted."""
    from tinyscope.interp.mpl import plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    styles = ["-", "--", ":", "-."]
    for color, (label, records) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], histories.items()):
        evals = [r for r in records if r.get("split") == "eval"]
        for style, metric in zip(styles, metrics):
            ax.plot([r["step"] for r in evals], [100 * r.get(metric, float("nan")) for r in evals], style,
                    color=color, lw=1.5, label=f"{label}: {metric}")
    ax.axhline(100 / 3, ls=":", color="gray", lw=1)
    ax.axhline(99, ls="--", color="gray", lw=1)
    ax.set(xlabel="update", ylabel="validation accuracy (%)", title=title, ylim=(0, 100))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def length_figure(metrics: dict, n_classes: int | None, title: str) -> "Figure":
    """Final accuracy against evaluation length (Figs. 2-4 style), with the 1/n chance line."""
    from tinyscope.interp.mpl import plt

    lengths = sorted(int(k[4:]) for k in metrics if k.startswith("acc@"))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(lengths, [100 * metrics[f"acc@{T}"] for T in lengths], "o-")
    if n_classes:
        ax.axhline(100 / n_classes, ls=":", color="gray")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="length T", ylabel="accuracy (%)", title=title)
    fig.tight_layout()
    return fig
