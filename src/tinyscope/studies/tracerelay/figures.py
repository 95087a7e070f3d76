"""TraceRelay figures: one run's validation curves and accuracy against length; over the runs
of a folder (`tinyscope report DIR`, registered below), Figs. 2-5 with mean ± sample SD over
seeds; and the Most-Freq diagnosis of :mod:`.analysis`.

Each function takes data (metrics.jsonl records or results.json metrics, fractions) and returns
a matplotlib Figure; saving is the caller's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinyscope.report.folder_figures import FolderFigure, register_figure

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
        turns = range(math.floor(lo / (2 * math.pi)), math.ceil(hi / (2 * math.pi)) + 1)
        for k in turns if len(turns) <= 24 else ():  # denser lines would hide the trace
            ax.axhline(2 * math.pi * k, ls=":", color="gray", lw=0.7)
        ax.set(xlabel="position t (lineage 0)", ylabel="unwrapped phase (rad)",
               title=f"layer {layer}, channel {ch} (composition R²={r2:.2f})")
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
               title=f"layer {layer}, channel {ch} (composition R²={r2:.2f})")
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


def rescaled_figure(numbers: dict, title: str = "Most-Freq: increments rescaled by T_ref / T") -> "Figure":
    """Greedy exact accuracy at each OOD length with each set of layers' increments rescaled,
    on the plain sets (solid bars) and the kept-gap sets (hatched)."""
    from tinyscope.interp.mpl import plt

    rows, labels = numbers["by_length"], list(numbers["variants"])
    Ts = sorted(int(T) for T in rows)
    fig, axes = plt.subplots(1, len(Ts), figsize=(3.6 * len(Ts), 3.3), sharey=True, squeeze=False)
    width = 0.4
    for ax, T in zip(axes[0], Ts):
        for k, (name, hatch) in enumerate((("plain", None), ("kept", "//"))):
            xs = [i + (k - 0.5) * width for i in range(len(labels))]
            ax.bar(xs, [100 * rows[str(T)][name][v]["exact"] for v in labels], width, hatch=hatch,
                   color=f"C{k}", label="plain sampler" if name == "plain" else f"kept gaps of T={numbers['reference']}")
        ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=7)
        ax.set(title=f"T = {T}", ylim=(0, 102))
    axes[0][0].set_ylabel("greedy exact (%)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- over runs and seeds
def _width(run) -> int:
    widths = run.value("model.d_trace")
    return int(widths[len(widths) // 2])


def _stat(values: list[float]) -> tuple[float, float]:
    """Mean and sample SD (0 for one value), ignoring missing values."""
    import numpy as np

    v = np.array([x for x in values if x is not None and x == x], float)
    if not len(v):
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def seed_groups(runs: list, experiments: tuple[str, ...]) -> dict[str, list]:
    """Runs of ``experiments`` grouped by experiment, preset and d_c (widest first), labelled
    ``d_c=16, cpu`` (with ``, off`` for the no-inheritance ablation)."""
    groups: dict[tuple, list] = {}
    for r in runs:
        if r.experiment in experiments:
            groups.setdefault((experiments.index(r.experiment), r.preset, -_width(r)), []).append(r)
    return {f"d_c={-w}, {p}" + (", off" if e else ""): rs for (e, p, w), rs in sorted(groups.items())}


def _shade_ood(ax, id_max: int | None, lengths: list[int]) -> None:
    import math

    if id_max is not None and lengths and max(lengths) > id_max:
        first = min(T for T in lengths if T > id_max)
        ax.axvspan(math.sqrt(id_max * first), max(lengths) * 1.25, color="0.9", zorder=0)
        ax.set_xlim(right=max(lengths) * 1.25)


def _length_curves(ax, groups: dict[str, list], family: str, id_max: int | None) -> list[int]:
    """Mean ± sample SD over the seeds of each group of ``family@T`` (percent) against T."""
    lengths = sorted({int(k.split("@")[1]) for rs in groups.values() for r in rs for k in r.metrics
                      if k.startswith(family + "@") and k.split("@")[1].isdigit()})
    for label, rs in groups.items():
        stats = [_stat([r.metrics.get(f"{family}@{T}") for r in rs]) for T in lengths]
        ax.errorbar(lengths, [100 * m for m, _ in stats], yerr=[100 * s for _, s in stats], marker="o", ms=4,
                    capsize=3, lw=1.5, label=f"{label} (n={len(rs)})")
    ax.set_xscale("log", base=2)
    if lengths:
        ax.set_xticks(lengths, [str(T) for T in lengths])
        ax.minorticks_off()
    _shade_ood(ax, id_max, lengths)
    ax.set_xlabel("evaluation length T")
    ax.grid(alpha=0.3)
    return lengths


def _id_max(runs: list) -> int | None:
    edges = [max(r.value("eval.id_lengths")) for r in runs if r.value("eval.id_lengths")]
    return min(edges) if edges else None


def most_freq_length_figure(runs: list) -> "Figure":
    """Fig. 4: (a) greedy exact ranking + EOS and (b) top-1 against the length, mean ± sample SD
    over seeds per d_c, with the three shortcut baselines on the same inputs; shaded: OOD."""
    from tinyscope.interp.mpl import plt

    groups = seed_groups(runs, ("tracerelay-most-freq",))
    every = [r for rs in groups.values() for r in rs]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (family, base, name) in zip(axes, (("acc", "exact", "(a) exact ranking + EOS"), ("top1", "top1", "(b) top-1"))):
        lengths = _length_curves(ax, groups, family, _id_max(every))
        for key, label, style in (("suffix32", "suffix frequency (32)", ":"), ("first", "first appearance", "-."),
                                  ("fixed", "fixed order", "--")):
            pts = [(T, _stat([r.metrics.get(f"base_{key}_{base}@{T}") for r in every])[0]) for T in lengths]
            pts = [(T, v) for T, v in pts if v == v]
            if pts:
                ax.plot([T for T, _ in pts], [100 * v for _, v in pts], style, color="gray", lw=1, label=label)
        ax.set(ylabel="accuracy (%)", title=name, ylim=(-2, 102))
        ax.legend(fontsize=7)
    fig.suptitle("Most-Freq: greedy generation, mean ± sample SD over seeds (shaded: OOD)", fontsize=10)
    fig.tight_layout()
    return fig


def equal_repeats_length_figure(runs: list) -> "Figure":
    """Fig. 2: accuracy against the length with and without phase inheritance, mean ± sample SD
    over seeds per d_c; dotted: the 1/3 chance reference; shaded: OOD."""
    from tinyscope.interp.mpl import plt

    groups = seed_groups(runs, ("tracerelay-equal-repeats", "tracerelay-equal-repeats-no-inheritance"))
    fig, ax = plt.subplots(figsize=(6, 3.8))
    _length_curves(ax, groups, "acc", _id_max([r for rs in groups.values() for r in rs]))
    ax.axhline(100 / 3, ls=":", color="gray")
    ax.set(ylabel="accuracy (%)", title="Equal Repeats: phase inheritance on / off (mean ± sample SD)", ylim=(0, 102))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def dyck_figure(runs: list, length: int = 4096) -> "Figure":
    """Fig. 3: (a) close accuracy against the length; (b) by matching distance and (c) by
    pre-close depth at ``length``; mean ± sample SD over seeds per d_c, dotted: 1/8 chance."""
    import numpy as np

    from tinyscope.interp.mpl import plt
    from tinyscope.studies.tracerelay.task import DISTANCE_BINS, distance_bin_label

    groups = seed_groups(runs, ("tracerelay-dyck",))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    _length_curves(axes[0], groups, "acc", _id_max([r for rs in groups.values() for r in rs]))
    axes[0].set(ylabel="close accuracy (%)", title="(a) by length")
    slices = (("dist", [distance_bin_label(lo, hi) for lo, hi in DISTANCE_BINS], f"(b) by distance, T={length}"),
              ("depth", [str(d) for d in range(1, 11)], f"(c) by depth, T={length}"))
    for ax, (prefix, bins, title) in zip(axes[1:], slices):
        for i, (label, rs) in enumerate(groups.items()):
            stats = [_stat([r.metrics.get(f"{prefix}{b}_acc@{length}") for r in rs]) for b in bins]
            x = np.arange(len(bins)) + 0.1 * (i - len(groups) / 2)
            ax.errorbar(x, [100 * m for m, _ in stats], yerr=[100 * s for _, s in stats], marker="o", ms=4,
                        capsize=3, ls="none", label=label)
        ax.set_xticks(range(len(bins)), bins, rotation=45, fontsize=7)
        ax.set(title=title, ylabel="close accuracy (%)")
    for ax in axes:
        ax.axhline(12.5, ls=":", color="gray")
        ax.legend(fontsize=7)
    fig.suptitle("Bounded Dyck-(8, 10): mean ± sample SD over seeds (shaded: OOD)", fontsize=10)
    fig.tight_layout()
    return fig


def histories_figure(runs: list) -> "Figure":
    """Fig. 5: every run's logged ID validation mean against the update, one panel per task;
    colour: d_c, line style: seed (the ablation thinner); star: the selected checkpoint;
    dashed: the 99% line of the two-pass stopping rule. Unsmoothed, ending at each run's stop."""
    import json

    from tinyscope.interp.mpl import plt

    tasks = (("Equal Repeats", ("tracerelay-equal-repeats", "tracerelay-equal-repeats-no-inheritance")),
             ("Dyck", ("tracerelay-dyck",)), ("Most-Freq", ("tracerelay-most-freq",)))
    present = [(name, exps) for name, exps in tasks if any(r.experiment in exps for r in runs)]
    fig, axes = plt.subplots(1, len(present), figsize=(5 * len(present), 3.8), squeeze=False)
    colors = {64: "tab:blue", 32: "tab:orange", 16: "tab:green"}
    styles = ["-", "--", ":", "-."]
    for ax, (name, exps) in zip(axes[0], present):
        seeds = sorted({r.seed for r in runs if r.experiment in exps})
        for r in sorted((r for r in runs if r.experiment in exps), key=lambda r: (r.experiment, -_width(r), r.seed)):
            evals = [json.loads(line) for line in (r.path / "metrics.jsonl").read_text().splitlines() if line.strip()]
            evals = [e for e in evals if e.get("split") == "eval" and "id_acc" in e]
            off = r.experiment.endswith("no-inheritance")
            color = colors.get(_width(r))
            ax.plot([e["step"] for e in evals], [100 * e["id_acc"] for e in evals], styles[seeds.index(r.seed) % 4],
                    color=color, lw=0.8 if off else 1.4, alpha=0.6 if off else 1.0,
                    label=f"d_c={_width(r)}, {r.preset}, s{r.seed}" + (", off" if off else ""))
            best = [e for e in evals if e["step"] == r.selected_step]
            if best:
                ax.plot([best[0]["step"]], [100 * best[0]["id_acc"]], "*", color=color, ms=11, mec="k", mew=0.5)
        ax.axhline(99, ls="--", color="gray", lw=1)
        ax.set(xlabel="update", ylabel="ID validation mean (%)", title=name, ylim=(0, 101))
        ax.legend(fontsize=6, ncol=2)
    fig.suptitle("Optimization histories (star: selected checkpoint; dashed: 99%)", fontsize=10)
    fig.tight_layout()
    return fig


for _name, _caption, _experiments, _draw in (
        ("tracerelay-fig2", "Fig. 2: Equal Repeats accuracy by length with and without phase inheritance, mean ± "
         "sample SD over seeds; shaded: OOD; dotted: 1/3 chance",
         ("tracerelay-equal-repeats", "tracerelay-equal-repeats-no-inheritance"), equal_repeats_length_figure),
        ("tracerelay-fig3", "Fig. 3: Dyck close accuracy by length, matching distance and depth at T = 4096, "
         "mean ± sample SD over seeds", ("tracerelay-dyck",), dyck_figure),
        ("tracerelay-fig4", "Fig. 4: Most-Freq exact ranking + EOS and top-1 by length with the three shortcut "
         "baselines, mean ± sample SD over seeds; shaded: OOD", ("tracerelay-most-freq",), most_freq_length_figure),
        ("tracerelay-fig5", "Fig. 5: every run's ID validation mean against the update; star: the selected "
         "checkpoint; dashed: 99%", ("tracerelay-*",), histories_figure)):
    register_figure(FolderFigure(_name, _caption, _experiments, _draw))
