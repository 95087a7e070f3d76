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


# ----------------------------------------------------------------------------- the Most-Freq diagnosis
def phase_trace_figure(data: dict, title: str = "Most-Freq: unwrapped relay phases") -> "Figure":
    """Per layer, the most count-like channel's unwrapped phase ``Phi`` (lineage 0 of the first
    prompt of each length) against the position; dotted: multiples of 2 pi (where the readout
    wraps)."""
    import math

    from tinyscope.interp.mpl import plt

    per_len, top = data["per_len"], data["top"]
    fig, axes = plt.subplots(1, len(top), figsize=(4 * len(top), 3.3), squeeze=False)
    for ax, (layer, ch, _, r2) in zip(axes[0], top):
        lo, hi = 0.0, 0.0
        for T, (_, phases) in sorted(per_len.items()):
            trace = phases[layer]["trace"][:, ch]  # (T',)
            W = len(phases[layer]["phi"][0])
            pos = range(0, len(trace), W)
            ax.plot(list(pos), trace[::W], lw=1.2, label=f"T={T}")
            lo, hi = min(lo, trace.min()), max(hi, trace.max())
        for k in range(math.floor(lo / (2 * math.pi)), math.ceil(hi / (2 * math.pi)) + 1):
            ax.axhline(2 * math.pi * k, ls=":", color="gray", lw=0.7)
        ax.set(xlabel="position t (lineage 0)", ylabel="unwrapped phase (rad)",
               title=f"layer {layer}, channel {ch} (R²={r2:.2f})")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def phase_count_figure(data: dict, id_lengths: list[int],
                       title: str = "Most-Freq: lineage-end phase against the fitted count") -> "Figure":
    """Per layer, the most count-like channel: each lineage-end phase against the count
    combination the ID fit finds (``a . N / W``), by length; shaded: the ID range of the phase,
    dashed: that range shifted by one turn (a phase there reads like an ID phase)."""
    import math

    import numpy as np

    from tinyscope.interp.mpl import plt

    per_len, top = data["per_len"], data["top"]
    fig, axes = plt.subplots(1, len(top), figsize=(4 * len(top), 3.3), squeeze=False)
    for ax, (layer, ch, coef, r2) in zip(axes[0], top):
        id_phi = np.concatenate([per_len[T][1][layer]["phi"][..., ch].ravel() for T in id_lengths if T in per_len])
        lo, hi = np.percentile(id_phi, (0.5, 99.5))
        for T, (counts, phases) in sorted(per_len.items()):
            phi = phases[layer]["phi"][..., ch]  # (n, W)
            W = phi.shape[1]
            x = (counts @ coef[:-1] + coef[-1]) / W  # (n,) the fitted per-lineage phase
            ax.scatter(np.repeat(x, W), phi.ravel(), s=2, alpha=0.3, label=f"T={T}")
        ax.axhspan(lo, hi, color="gray", alpha=0.15)
        for k in (-1, 1):
            ax.axhline(lo + k * 2 * math.pi, ls="--", color="gray", lw=0.7)
            ax.axhline(hi + k * 2 * math.pi, ls="--", color="gray", lw=0.7)
        ax.set(xlabel="fitted a·N / W (rad)", ylabel="lineage-end phase (rad)",
               title=f"layer {layer}, channel {ch} (R²={r2:.2f})")
        ax.legend(fontsize=7, markerscale=4)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def aliasing_figure(numbers: dict, title: str = "Most-Freq: phase aliasing by length") -> "Figure":
    """Per layer, the count-like channels' span in turns and their aliased fraction against the length."""
    from tinyscope.interp.mpl import plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.3))
    for rec in numbers["layers"]:
        Ts = [int(T) for T in rec["by_length"]]
        label = f"layer {rec['layer']} ({rec['n_count_like']} count-like)"
        a.plot(Ts, [rec["by_length"][str(T)]["turns"] for T in Ts], "o-", label=label)
        b.plot(Ts, [100 * rec["by_length"][str(T)]["aliased"] for T in Ts], "o-", label=label)
    a.axhline(1, ls=":", color="gray")
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("source length T")
    a.set(ylabel="span of the phase (turns)")
    b.set(ylabel="aliased lineage ends (%)")
    a.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def kept_gap_figure(numbers: dict, title: str = "Most-Freq: plain vs kept-gap evaluation sets") -> "Figure":
    """Exact and top-1 accuracy against the length on the plain sets and on sets that keep the
    reference length's relative count gaps."""
    from tinyscope.interp.mpl import plt

    rows = numbers["by_length"]
    Ts = sorted(int(T) for T in rows)
    fig, ax = plt.subplots(figsize=(5, 3.3))
    for name, style in (("plain", "-"), ("kept", "--")):
        for metric, marker in (("exact", "o"), ("top1", "s")):
            ax.plot(Ts, [100 * rows[str(T)][name][metric] for T in Ts], style, marker=marker,
                    label=f"{metric}, {'kept gaps of T=' + str(numbers['reference']) if name == 'kept' else 'plain sampler'}")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="source length T", ylabel="accuracy (%)", title=title, ylim=(-2, 102))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
