"""The supplementary figures of Mahajne & Moldwin (Sec. 6.1) and a next-token readout.

* :func:`qkv_overview_figure` (supplementary/07): embeddings, Q/K/V spaces, Q+K together and
  the attention output of every point, 3 x 3.
* :func:`attention_readout_figure` (supplementary/14): per sequence, its attention matrix, the
  LM head's input h, the logits and the output probabilities.
* :func:`value_arrows_figure` (supplementary/16): per sequence, the values v_j, the attention
  outputs Attn(e)_i and the residual move e_i -> z_i, z marked green / red where the rule holds
  / fails at a constrained position.
* :func:`qkv_extended_figure` (extended/08): each dimension of q, k, v over tokens x positions.
* :func:`next_token_figure` / :func:`next_token_table`: P(next token | prefix) at every
  position of one sequence.
The per-unit probability heatmaps with the embeddings or the values overlaid (a4/07, a4/12)
are :func:`~tinyscope.studies.minimal.geometry_views.probability_panels_figure` with an overlay.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.lines import Line2D

from tinyscope.interp.plotting import (
    CONSTRAINED_OK,
    CONSTRAINED_WRONG,
    KEY_COLOR,
    QUERY_COLOR,
    VALUE_COLOR,
    heatmap,
    labelled_points,
    new_figure,
    token_colors,
)
from tinyscope.studies.minimal import style as st
from tinyscope.studies.minimal.geometry import Geometry, fit_plane, head_plane, model_dims, residual_plane, subscript
from tinyscope.studies.minimal.geometry_views import point_colors
from tinyscope.studies.minimal.walkthrough import Trace


# ---------------------------------------------------------------- supplementary/07
def qkv_overview_figure(geom: Geometry):
    """3 x 3: (a) tokens x, (b) positions p, (c) e = x + p; (d-f) q, k, v of every point;
    (g) queries and keys together; (h) each point's attention output over all keys at or
    before its position (Geometry.pooled_attention); (i) the colour key."""
    fig = new_figure(st.WIDTH, 7.6)
    axes = fig.subplots(3, 3)
    labels, cols = geom.point_labels(), point_colors(geom)
    tcols = token_colors(geom.V)
    pl = fit_plane(geom.tok)
    labelled_points(axes[0, 0], pl.project(geom.tok), geom.labels, tcols, size=20, fontsize=st.BIG_POINT)
    st.plane_axes(axes[0, 0], pl, "", "(a) token embeddings x")
    pl = fit_plane(geom.pos)
    labelled_points(axes[0, 1], pl.project(geom.pos), [f"p{t}" for t in range(geom.T)], "0.3", size=20,
                    fontsize=st.BIG_POINT)
    st.plane_axes(axes[0, 1], pl, "", "(b) position embeddings p")
    pl = residual_plane(geom)
    labelled_points(axes[0, 2], pl.project(geom.emb), labels, cols, size=6, fontsize=st.POINT)
    st.plane_axes(axes[0, 2], pl, "", "(c) e = x + p")
    for ax, pts, name, colour in ((axes[1, 0], geom.q, "q", QUERY_COLOR), (axes[1, 1], geom.k, "k", KEY_COLOR),
                                  (axes[1, 2], geom.v, "v", VALUE_COLOR)):
        pl = fit_plane(pts)
        labelled_points(ax, pl.project(pts), labels, colour, size=6, fontsize=st.POINT)
        st.plane_axes(ax, pl, name, f"({'def'['qkv'.index(name)]}) {name} = W_{name.upper()} e")
    pl = head_plane(geom)
    labelled_points(axes[2, 0], pl.project(geom.q), labels, QUERY_COLOR, size=6, fontsize=st.POINT)
    labelled_points(axes[2, 0], pl.project(geom.k), labels, KEY_COLOR, size=6, fontsize=st.POINT)
    st.plane_axes(axes[2, 0], pl, "", "(g) q (blue) and k (red)")
    out = geom.pooled_attention()  # (V, T, Dh)
    pl = fit_plane(out)
    labelled_points(axes[2, 1], pl.project(out), labels, cols, size=6, fontsize=st.POINT)
    st.plane_axes(axes[2, 1], pl, "", "(h) attention output, all keys\nat positions <= the query's")
    axes[2, 2].set_axis_off()
    handles = [Line2D([], [], ls="", marker="o", ms=5, color=c, label=lab) for c, lab in zip(tcols, geom.labels)]
    axes[2, 2].legend(handles=handles, title="token (a, c, h)", ncol=2, fontsize=st.TICK, title_fontsize=st.LABEL,
                      loc="center", frameon=False)
    fig.suptitle(f"Q/K/V overview, head {geom.head} (suppl. 07)", fontsize=st.SUPTITLE)
    return fig


# ---------------------------------------------------------------- supplementary/14
@dataclass
class Readout:
    """One sequence's attention pattern (T, T), LM-head input h (T, D), logits and probabilities (T, V)."""

    tokens: list[int]
    pattern: np.ndarray
    lm_input: np.ndarray
    logits: np.ndarray

    @property
    def probs(self) -> np.ndarray:
        z = self.logits - self.logits.max(-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(-1, keepdims=True)


def lm_input_name(model) -> str:
    """The hook holding the LM head's input: the final norm's output, else the last residual."""
    names = getattr(model, "hook_dict", {})
    for name in ("ln_final.hook_normalized", "norm_final.hook_normalized"):
        if name in names:
            return name
    return f"blocks.{len(model.blocks) - 1}.hook_resid_post"


@torch.no_grad()
def readout(model, tokens: list[int], head: int = 0) -> Readout:
    """Layer 0's attention pattern (head ``head``), the LM head's input and the logits of ``tokens``."""
    device = next(model.parameters()).device
    names = ["blocks.0.attn.hook_pattern", lm_input_name(model)]
    logits, cache = model.run_with_cache(torch.tensor([tokens], device=device), names_filter=names)
    return Readout(list(tokens), cache[names[0]][0, head].float().cpu().numpy().copy(),  # (T, T)
                   cache[names[1]][0].float().cpu().numpy().copy(),  # (T, D)
                   logits[0].float().cpu().numpy().copy())  # (T, V)


def attention_readout_figure(reads: list[Readout], labels: list[str]):
    """Per sequence (rows): attention A (masked cells blank), LM-head input h, logits and
    P(next token), each row labelled with its sequence."""
    fig = new_figure(st.WIDTH, 2.2 * len(reads) + 0.9)
    axes = np.atleast_2d(fig.subplots(len(reads), 4, width_ratios=[0.9, 0.45, 1.5, 1.5]))
    for r, (rd, row) in enumerate(zip(reads, axes)):
        T = len(rd.tokens)
        names = [f"{labels[t]}{subscript(i)}" for i, t in enumerate(rd.tokens)]
        pattern = np.where(np.tril(np.ones((T, T), dtype=bool)), rd.pattern, np.nan)
        vocab = labels[:rd.logits.shape[1]]
        for ax, M, cols, cmap, sym, lim, cbar, title, xl in (
                (row[0], pattern, [str(i) for i in range(T)], "Blues", False, (0, 1), "weight", "attention A",
                 "key position"),
                (row[1], rd.lm_input, st.dims(rd.lm_input.shape[1]), "RdBu_r", True, None, "value", "LM-head input h",
                 "dimension"),
                (row[2], rd.logits, vocab, "RdBu_r", True, None, "logit", "logits", "next token"),
                (row[3], rd.probs, vocab, "viridis", False, (0, 1), "probability", "P(next token)", "next token")):
            vmin, vmax = lim if lim else (None, None)
            im = heatmap(ax, M, names, cols, cmap=cmap, symmetric=sym, vmin=vmin, vmax=vmax, annotate=False)
            st.axes_text(ax, xl, f"sequence {r + 1}: position" if ax is row[0] else "position", title)
            st.colorbar(fig, im, ax, cbar)
    fig.suptitle("Attention, LM-head input, logits and output probabilities per sequence (suppl. 14)",
                 fontsize=st.SUPTITLE)
    return fig


# ---------------------------------------------------------------- supplementary/16
def rule_status(tr: Trace, rule) -> np.ndarray:
    """Per position i: 1 when the prediction for token i+1 is constrained and right, 2 when
    constrained and wrong, 0 when unconstrained (or no rule)."""
    status = np.zeros(tr.T, dtype=np.int64)
    if rule is None:
        return status
    targets = np.asarray(rule(np.asarray(tr.tokens)))  # (T,) target of token i+1, or -1
    for i in np.flatnonzero(targets >= 0):
        status[i] = 1 if tr.prediction[i] == targets[i] else 2
    return status


def value_arrows_figure(traces: list[Trace], rule, plane=None):
    """Per sequence (rows): (original) values v_j as arrows from 0; (transformed) attention
    outputs Attn(e)_i = sum_j A_ij v_j as arrows from 0; (residual) e_i moved to z_i = e_i +
    Attn(e)_i, z marked green where a constrained prediction is right, red where wrong."""
    fig = new_figure(st.WIDTH, 2.35 * len(traces) + 0.9)
    axes = np.atleast_2d(fig.subplots(len(traces), 3))
    marks = {0: ("0.6", "unconstrained"), 1: (CONSTRAINED_OK, "after +: right"), 2: (CONSTRAINED_WRONG, "after +: wrong")}
    for tr, row in zip(traces, axes):
        names = tr.point_labels()
        cols = [token_colors(len(tr.labels))[t] for t in tr.tokens]
        head = fit_plane(np.concatenate([tr.v, tr.head_out]))
        res = plane or fit_plane(np.concatenate([tr.e, tr.z]))
        for ax, vec, title in ((row[0], tr.v, "values v_j"), (row[1], tr.head_out, "attention outputs Attn(e)_i")):
            pts = head.project(vec) - head.project(np.zeros((1, vec.shape[1])))  # (T, 2) directions from 0
            for i in range(tr.T):
                ax.annotate("", xy=pts[i], xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=cols[i], lw=1.0))
            labelled_points(ax, pts, names, cols, size=4, fontsize=st.POINT)
            _limits(ax, pts, np.zeros((1, 2)))
            st.axes_text(ax, *head.axis_labels("v"), title)
        ax = row[2]
        ep, zp = res.project(tr.e), res.project(tr.z)
        status = rule_status(tr, rule)
        for i in range(tr.T):
            ax.annotate("", xy=zp[i], xytext=ep[i], arrowprops=dict(arrowstyle="->", color="0.4", lw=0.8))
        ax.scatter(*ep.T, s=10, c="white", edgecolors="0.3", linewidths=0.6, zorder=3)
        ax.scatter(*zp.T, s=26, c=[marks[s][0] for s in status], edgecolors="k", linewidths=0.4, zorder=4)
        labelled_points(ax, zp, names, "0.1", size=0, fontsize=st.POINT)
        _limits(ax, ep, zp)
        st.axes_text(ax, *res.axis_labels(), "residual: e_i -> z_i")
        row[0].set_ylabel(" ".join(tr.token_names) + "\n" + row[0].get_ylabel(), fontsize=st.LABEL)
    handles = [Line2D([], [], ls="", marker="o", ms=5, mfc=c, mec="k", label=n) for c, n in marks.values()]
    handles.append(Line2D([], [], ls="", marker="o", ms=4, mfc="white", mec="0.3", label="e_i (start)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=st.TICK, frameon=False)
    fig.suptitle("Values, attention outputs and the residual move for three sequences (suppl. 16)",
                 fontsize=st.SUPTITLE)
    return fig


def _limits(ax, *sets) -> None:
    from tinyscope.studies.minimal.geometry import bounds

    xl, yl = bounds(*sets, pad=0.15)
    ax.set_xlim(xl), ax.set_ylim(yl)


# ---------------------------------------------------------------- extended/08
def qkv_extended_figure(geom: Geometry, max_dims: int = 4):
    """Each dimension of q, k and v (columns) as a tokens x positions heatmap (rows: dimensions,
    up to ``max_dims``), and W_Q, W_K, W_V (top row) when they are small."""
    Dh = min(geom.d_head, max_dims)
    fig = new_figure(st.WIDTH, 2.4 * Dh + 2.2)
    axes = np.atleast_2d(fig.subplots(Dh + 1, 3, height_ratios=[0.7] + [1] * Dh))
    positions = [f"p{t}" for t in range(geom.T)]
    for c, (name, pts, W) in enumerate((("q", geom.q, geom.W_Q), ("k", geom.k, geom.W_K), ("v", geom.v, geom.W_V))):
        ax = axes[0, c]
        if W is not None and W.size <= 16:
            st.value_heatmap(fig, ax, W, st.dims(W.shape[0], name), st.dims(W.shape[1], "e"), "input e",
                             f"output {name}", f"W_{name.upper()}", "weight")
        else:
            ax.set_axis_off()
        for d in range(Dh):
            ax = axes[d + 1, c]
            im = heatmap(ax, pts[:, :, d], geom.labels, positions, annotate=False)
            st.axes_text(ax, "position", "token", f"{name} dim {d + 1} (token x position)")
            st.colorbar(fig, im, ax, f"{name}{d + 1}")
    fig.suptitle(f"Q, K, V per dimension over tokens x positions, head {geom.head} (extended 08)",
                 fontsize=st.SUPTITLE)
    return fig


# ---------------------------------------------------------------- next-token readout
def next_token_figure(tr: Trace, rule=None):
    """P(next token | prefix up to i) at every position i of one sequence (rows) over the
    vocabulary (columns), each cell's probability written; the argmax is boxed, and where the
    rule constrains the next token its target is marked with a dot."""
    V = tr.probs.shape[1]
    vocab = tr.labels[:V]
    rows = tr.point_labels()
    fig = new_figure(min(st.WIDTH, 0.45 * V + 2.2), 0.32 * tr.T + 1.6)
    ax = fig.subplots()
    im = heatmap(ax, tr.probs, rows, vocab, cmap="viridis", symmetric=False, vmin=0, vmax=1, fmt="{:.2f}",
                 fontsize=st.POINT + 1)
    for i, p in enumerate(tr.prediction):
        ax.add_patch(_box(i, int(p)))
    if rule is not None:
        targets = np.asarray(rule(np.asarray(tr.tokens)))
        hits = [(int(t), i) for i, t in enumerate(targets) if t >= 0]
        if hits:
            ax.scatter(*np.array(hits, dtype=float).T + np.array([[0.32], [-0.3]]), s=10, c="tab:red", zorder=5)
    st.axes_text(ax, "next token", "prefix ends at (token, position)",
                 f"P(next token) along {' '.join(tr.token_names)}")
    st.colorbar(fig, im, ax, "probability")
    # the argmax key: a white box on a dark cell, as it appears in the map (a white box alone is
    # invisible on the legend's white)
    handles = [Line2D([], [], ls="", marker="s", ms=8, mfc=im.cmap(0.15), mec="white", mew=1.4, label="argmax"),
               Line2D([], [], ls="", marker="o", ms=4, color="tab:red", label="rule target")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=st.TICK, frameon=False)
    return fig


def _box(row: int, col: int):
    from matplotlib.patches import Rectangle

    return Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, ec="white", lw=1.4, zorder=4)


def next_token_table(tr: Trace, rule=None, top: int = 3) -> str:
    """The readout as text: one line per position with the ``top`` most probable next tokens
    and, where the rule constrains it, the target and whether the argmax hits it."""
    targets = np.asarray(rule(np.asarray(tr.tokens))) if rule is not None else np.full(tr.T, -1)
    lines = [f"{'pos':>3}  {'token':>5}  top-{top} next tokens (probability){'':14}rule target"]
    for i, t in enumerate(tr.tokens):
        order = np.argsort(-tr.probs[i])[:top]
        best = "  ".join(f"{tr.labels[u]:>2} {tr.probs[i, u]:.3f}" for u in order)
        if targets[i] >= 0:
            hit = "ok" if tr.prediction[i] == targets[i] else "WRONG"
            rule_txt = f"{tr.labels[targets[i]]} (p={tr.probs[i, targets[i]]:.3f}, {hit})"
        else:
            rule_txt = "-"
        lines.append(f"{i:>3}  {tr.labels[t]:>5}  {best:<40}{rule_txt}")
    return "\n".join(lines)


def demo_sequences(first: list[int], task, model, n: int = 3) -> list[list[int]]:
    """The walkthrough sequence and the starts of the first held-out sequences, ``n`` in all,
    each cropped to the model's context."""
    _, T = model_dims(model)
    pool = getattr(task, "heldout", None) or getattr(task, "corpus", None) or []
    seqs = [list(first)[:T]]
    for row in pool:
        if len(seqs) >= n:
            break
        seqs.append([int(t) for t in row[:T]])
    return seqs
