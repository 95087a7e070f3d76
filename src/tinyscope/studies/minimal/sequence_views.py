"""Data, generations and the learning curve (Mahajne & Moldwin, Fig. 2-4).

A sequence is drawn as a row of cells, one per token, coloured by the rule: green where the
token is constrained (it follows ``+`` with an even digit in the prefix) and equals the rule
target, red where it is constrained and wrong, grey where any token is allowed. The rule is a
parameter, ``rule_targets(seq) -> (T,)`` (target of token t+1, or -1), so another rule-following
task can reuse the view.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from matplotlib.patches import Patch

from tinyscope.interp.plotting import CONSTRAINED_OK, CONSTRAINED_WRONG, UNCONSTRAINED, new_figure
from tinyscope.studies.minimal import style as st

RuleTargets = Callable[[np.ndarray], np.ndarray]


def cell_status(seq: np.ndarray, rule_targets: RuleTargets) -> np.ndarray:
    """Per token: 0 unconstrained, 1 constrained and correct, 2 constrained and wrong."""
    rt = rule_targets(np.asarray(seq))  # (T,) target of token t+1
    status = np.zeros(len(seq), dtype=np.int64)
    for t in np.flatnonzero(rt[:-1] >= 0):
        status[t + 1] = 1 if seq[t + 1] == rt[t] else 2
    return status


def sequences_figure(seqs: list[np.ndarray], labels: list[str], rule_targets: RuleTargets, title: str,
                     row_names: list[str] | None = None, fig=None, ax=None):
    """Sequences as coloured cell rows with each token written in its cell (Fig. 2, Fig. 4)."""
    width = max(len(s) for s in seqs)
    if ax is None:
        fig = new_figure(min(st.WIDTH, max(4.0, 0.2 * width + 1.2)), 0.3 * len(seqs) + 1.3)
        ax = fig.subplots()
        status_legend(fig)
    colours = np.array([[1, 1, 1], _rgb(UNCONSTRAINED), _rgb(CONSTRAINED_OK), _rgb(CONSTRAINED_WRONG)])
    img = np.zeros((len(seqs), width), dtype=np.int64)
    for r, seq in enumerate(seqs):
        img[r, :len(seq)] = cell_status(seq, rule_targets) + 1
    ax.imshow(colours[img], aspect="auto", interpolation="nearest")
    for r, seq in enumerate(seqs):
        for c, tok in enumerate(seq):
            ax.text(c, r, labels[int(tok)], ha="center", va="center", fontsize=st.TICK)
    ax.set_xticks(np.arange(-0.5, width, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, len(seqs), 1), minor=True)
    ax.grid(which="minor", color="white", lw=1)
    ax.tick_params(which="minor", length=0)
    ax.set_yticks(range(len(seqs)), row_names or [f"seq {i}" for i in range(len(seqs))])
    st.axes_text(ax, "position", "sequence", title)
    ax.images[-1].set_gid("no-key")  # keyed by status_legend
    return fig


def status_legend(fig):
    """The key of the cell colours: constrained and correct / wrong, unconstrained."""
    handles = [Patch(facecolor=c, label=n) for c, n in ((CONSTRAINED_OK, "after + (rule): correct"),
                                                        (CONSTRAINED_WRONG, "after + (rule): wrong"),
                                                        (UNCONSTRAINED, "unconstrained"))]
    return fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=st.TICK, frameon=False)


def _rgb(hex_colour: str) -> list[float]:
    from matplotlib.colors import to_rgb

    return list(to_rgb(hex_colour))


@torch.no_grad()
def generate(model, n: int, length: int, context: int, vocab_size: int, seed: int) -> list[np.ndarray]:
    """``n`` sequences sampled from the model (multinomial, context cropped to ``context``), each
    started from a random first token; torch's generator is seeded, global state untouched."""
    gen = torch.Generator().manual_seed(int(seed))
    device = next(model.parameters()).device
    seq = torch.randint(0, vocab_size, (n, 1), generator=gen)  # (n, 1)
    for _ in range(length - 1):
        logits = model(seq[:, -context:].to(device))[:, -1].float().cpu()  # (n, V_out)
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)  # (n, 1)
        seq = torch.cat([seq, nxt], 1)
    return [row for row in seq.numpy()]


def generations_figure(before: list[np.ndarray], after: list[np.ndarray], labels: list[str],
                       rule_targets: RuleTargets, before_step: int, after_step: int):
    """Fig. 4: model generations at initialisation (top) and after training (bottom)."""
    width = max(len(s) for s in before + after)
    fig = new_figure(min(st.WIDTH, max(4.0, 0.2 * width + 1.2)), 0.3 * (len(before) + len(after)) + 2.0)
    top, bottom = fig.subplots(2, 1)
    status_legend(fig)
    for ax, seqs, step in ((top, before, before_step), (bottom, after, after_step)):
        acc = _rule_accuracy(seqs, rule_targets)
        sequences_figure(seqs, labels, rule_targets, f"generated at step {step}: {acc}", fig=fig, ax=ax)
    return fig


def _rule_accuracy(seqs: list[np.ndarray], rule_targets: RuleTargets) -> str:
    status = np.concatenate([cell_status(s, rule_targets) for s in seqs])
    n = int((status > 0).sum())
    return f"{int((status == 1).sum())}/{n} constrained correct" if n else "no constrained positions"
