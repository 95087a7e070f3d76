"""Checkpoint selection of a plus-last-even run: the argmax rule error (the paper's Fig. 3 metric)
beside the error of generation, over training, with the selected step marked.

A model can be right at every constrained position by argmax and still break the rule often when
it generates, if it is unconfident: ``rule_error_expected`` = mean over held-out constrained
positions of 1 - P(target) is the probability that a sampled token breaks the rule; the run's
``rule_error_sampled`` (the public code's metric: generated sequences, counted) is measured on
the selected model only.
"""
from __future__ import annotations

import numpy as np

from tinyscope.interp.plotting import new_figure

CURVES = (("rule_error", "rule error (argmax)", "tab:blue", "-"),
          ("rule_error_expected", "generation error (expected, 1 - P(target))", "tab:red", "-"),
          ("rule_error_sampled", "generation error (sampled sequences, counted)", "tab:purple", ":"))


def selection_series(records: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(steps, values) of each curve from metrics.jsonl's evaluation records."""
    out = {}
    for key, *_ in CURVES:
        pts = [(r["step"], r[key]) for r in records if r.get("split") == "eval" and isinstance(r.get(key), (int, float))]
        if pts:
            steps, vals = zip(*pts)
            out[key] = (np.asarray(steps), np.asarray(vals, dtype=float))
    return out


def selection_figure(records: list[dict], results: dict):
    """Both errors over training (log scale), the selected step and its values."""
    series = selection_series(records)
    fig = new_figure(7.2, 3.3)
    ax = fig.subplots()
    for key, label, colour, style in CURVES:
        if key in series:
            steps, vals = series[key]
            ax.plot(steps, np.maximum(vals, 1e-5), style, color=colour, label=label, linewidth=1.2, marker="o",
                    markersize=2.5 if len(steps) > 1 else 4)
    m = results.get("metrics", {})
    step = results.get("selected_step")
    if step is not None:
        ax.axvline(step, color="0.3", linestyle="--", linewidth=0.9, label=f"selected step {step}")
    if isinstance(m.get("rule_error_sampled"), (int, float)) and step is not None:
        ax.plot([step], [max(m["rule_error_sampled"], 1e-5)], "D", color="tab:purple", markersize=5,
                label=f"sampled generations at the selected step: {m['rule_error_sampled']:.2%}")
    ax.axhline(0.01, color="0.6", linestyle=":", linewidth=0.8, label="1% (\"near 0%\")")
    ax.set_yscale("log")
    ax.set_xlabel("training step", fontsize=8)
    ax.set_ylabel("fraction of constrained positions", fontsize=8)
    ax.tick_params(labelsize=7.5)
    sel = results.get("selection") or {}
    crit = sel.get("metric")
    title = "Checkpoint selection" + (f": minimum {crit}" + (f", ties by {sel['tie_break']}" if sel.get("tie_break") else "")
                                      if crit else "")
    ax.set_title(title, fontsize=8.5)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    return fig


def selection_caption(results: dict) -> str:
    m = results.get("metrics", {})
    parts = [f"{name} {m[key]:.2%}" for key, name in (("rule_error", "rule error (argmax)"),
                                                      ("rule_error_expected", "expected generation error"),
                                                      ("rule_error_sampled", "error of sampled generations"))
             if isinstance(m.get(key), (int, float))]
    sel = (results.get("selection") or {}).get("metric")
    return (f"Selected step {results.get('selected_step')}" + (f" (criterion: {sel})" if sel else "") + ": "
            + ", ".join(parts) + ".")
