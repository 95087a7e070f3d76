"""The learning curve of any run: losses and error or accuracy metrics against the training step
(the layout of Mahajne & Moldwin's Fig. 3, used for every study's report)."""
from __future__ import annotations

from tinyscope.interp.plotting import new_figure


def learning_curve_figure(records: list[dict], title: str = "Training dynamics"):
    """Fig. 3: losses on the left axis (train loss and every evaluated ``*loss``), error and
    accuracy metrics on the right axis, against the training step."""
    train = [r for r in records if r.get("split") == "train" and "loss" in r]
    evals = [r for r in records if r.get("split") == "eval"]
    fig = new_figure(7.0, 3.8)
    ax = fig.subplots()
    if train:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], color="tab:blue", lw=1, label="train loss")
    keys = sorted({k for r in evals for k in r if k not in ("step", "split") and isinstance(r[k], (int, float))})
    loss_keys = [k for k in keys if "loss" in k]
    rate_keys = [k for k in keys if "loss" not in k]
    for i, k in enumerate(loss_keys):
        pts = [(r["step"], r[k]) for r in evals if k in r]
        ax.plot(*zip(*pts), lw=1.2, ls="--", color=f"C{i + 1}", label=k)
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylabel("cross-entropy loss", fontsize=8)
    ax.tick_params(labelsize=7.5)
    handles, names = ax.get_legend_handles_labels()
    if rate_keys:
        ax2 = ax.twinx()
        for i, k in enumerate(rate_keys):
            pts = [(r["step"], r[k]) for r in evals if k in r]
            ax2.plot(*zip(*pts), lw=1.6, color=f"C{i + len(loss_keys) + 1}", marker=".", ms=3, label=k)
        ax2.set_ylabel(", ".join(rate_keys), fontsize=8)
        ax2.tick_params(labelsize=7.5)
        ax2.set_ylim(bottom=0)
        h2, n2 = ax2.get_legend_handles_labels()
        handles, names = handles + h2, names + n2
    if handles:
        ax.legend(handles, names, fontsize=7.5, loc="upper right")
    else:
        ax.text(0.5, 0.5, "no metrics recorded", transform=ax.transAxes, ha="center")
    ax.set_title(title, fontsize=9.5)
    return fig
