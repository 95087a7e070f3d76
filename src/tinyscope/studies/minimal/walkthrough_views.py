"""The sequence walkthrough as figures (Mahajne & Moldwin, Sec. 3.6, Fig. 11-15).

Each function draws one :class:`~tinyscope.studies.minimal.walkthrough.Trace` against the backdrop of
all V x T points of a :class:`~tinyscope.studies.minimal.geometry.Geometry` (grey), as the paper does.
"""
from __future__ import annotations

import numpy as np

from tinyscope.interp.plotting import (
    KEY_COLOR,
    MASKED_COLOR,
    QUERY_COLOR,
    VALUE_COLOR,
    heatmap,
    labelled_points,
    new_figure,
    set_plane_axes,
    token_colors,
)
from tinyscope.studies.minimal.geometry import Geometry, Landscape, bounds, fit_plane, head_plane
from tinyscope.studies.minimal.geometry_views import argmax_map, dot_background
from tinyscope.studies.minimal.walkthrough import Trace

BACKDROP = dict(s=8, c="0.85", linewidths=0, zorder=1)


def _dims(n: int, prefix: str = "d") -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(n)]


def _seq_title(tr: Trace) -> str:
    return " ".join(tr.token_names)


def _trace_colors(tr: Trace) -> list:
    cols = token_colors(len(tr.labels))
    return [cols[t] for t in tr.tokens]


def _over_backdrop(ax, plane, backdrop: np.ndarray, pts: np.ndarray, labels: list[str], colours, title: str):
    """The sequence's points (labelled) over all possible points (grey), in ``plane``."""
    bp = plane.project(backdrop).reshape(-1, 2)
    ax.scatter(bp[:, 0], bp[:, 1], **BACKDROP)
    labelled_points(ax, plane.project(pts), labels, colours, size=30, fontsize=8)
    set_plane_axes(ax, plane, "", title)


def walk_embeddings_figure(tr: Trace, geom: Geometry):
    """Fig. 11: (a-c) heatmaps of x, p, e for the sequence; (d-f) scatters over all tokens,
    positions and token+position points (grey)."""
    fig = new_figure(15, 9)
    axes = fig.subplots(2, 3)
    rows = tr.point_labels()
    D = tr.x.shape[1]
    for ax, M, name in zip(axes[0], (tr.x, tr.p, tr.e), ("(a) token x", "(b) position p", "(c) e = x + p")):
        heatmap(ax, M, rows, _dims(D))
        ax.set_title(name, fontsize=9)
    cols = _trace_colors(tr)
    for ax, back, pts, labs, name in (
            (axes[1, 0], geom.tok, tr.x, tr.token_names, "(d) token embeddings"),
            (axes[1, 1], geom.pos, tr.p, [f"p{i}" for i in range(tr.T)], "(e) position embeddings"),
            (axes[1, 2], geom.emb.reshape(-1, D), tr.e, rows, "(f) token + position")):
        _over_backdrop(ax, fit_plane(back), back, pts, labs, cols, name)
    fig.suptitle(f"Embeddings of the sequence {_seq_title(tr)} (Fig. 11)", fontsize=11)
    return fig


def walk_qk_figure(tr: Trace, geom: Geometry):
    """Fig. 12: (a) Q and (b) K of the sequence as heatmaps; (c) its queries (blue) and keys (red)
    over all V*T queries and keys (grey)."""
    fig = new_figure(15, 5.5)
    axes = fig.subplots(1, 3, width_ratios=[1, 1, 2])
    rows, Dh = tr.point_labels(), tr.q.shape[1]
    heatmap(axes[0], tr.q, rows, _dims(Dh, "q"))
    axes[0].set_title("(a) Q", fontsize=9)
    heatmap(axes[1], tr.k, rows, _dims(Dh, "k"))
    axes[1].set_title("(b) K", fontsize=9)
    plane = head_plane(geom)
    _over_backdrop(axes[2], plane, np.concatenate([geom.q.reshape(-1, Dh), geom.k.reshape(-1, Dh)]), tr.q, rows,
                   QUERY_COLOR, "(c) queries (blue), keys (red); all V*T in grey")
    labelled_points(axes[2], plane.project(tr.k), rows, KEY_COLOR, size=30, fontsize=8)
    fig.suptitle(f"Queries and keys of {_seq_title(tr)} (Fig. 12)", fontsize=11)
    return fig


def walk_attention_figure(tr: Trace, geom: Geometry):
    """Fig. 13: (a) per query, its dot product over the plane with the sequence's keys (red: j <= i,
    grey: masked); (b) the masked raw scores q.k; (c) the attention matrix softmax(q.k / sqrt(d_k))."""
    T = tr.T
    ncols = min(4, T)
    nrows = -(-T // ncols)
    fig = new_figure(16, 3.6 * nrows + 5.4, layout=None)
    sub = fig.subfigures(2, 1, height_ratios=[3.6 * nrows, 5.4])
    axes = np.atleast_1d(sub[0].subplots(nrows, ncols, sharex=True, sharey=True)).ravel()
    sub[0].subplots_adjust(left=0.05, right=0.98, bottom=0.06, top=0.86, wspace=0.12, hspace=0.25)
    plane = head_plane(geom)
    qp, kp = plane.project(tr.q), plane.project(tr.k)
    xlim, ylim = bounds(plane.project(geom.q), plane.project(geom.k))
    rows = tr.point_labels()
    for i, ax in enumerate(axes):
        if i >= T:
            ax.set_axis_off()
            continue
        ax.imshow(dot_background(plane, tr.q[i], xlim, ylim, n=80), origin="lower", extent=(*xlim, *ylim),
                  cmap="Greens", aspect="auto")
        live = np.arange(T) <= i
        labelled_points(ax, kp[~live], [r for r, m in zip(rows, live) if not m], MASKED_COLOR, size=14, fontsize=6)
        labelled_points(ax, kp[live], [r for r, m in zip(rows, live) if m], KEY_COLOR, size=18, fontsize=7)
        ax.scatter(*qp[i], s=70, c=QUERY_COLOR, marker="*", zorder=5)
        ax.set_xlim(xlim), ax.set_ylim(ylim)
        ax.set_title(f"query {rows[i]}", fontsize=8)
        ax.tick_params(labelsize=6)
    b, c = sub[1].subplots(1, 2)
    sub[1].subplots_adjust(left=0.05, right=0.98, bottom=0.1, top=0.88, wspace=0.12)
    heatmap(b, tr.scores, rows, rows, fmt="{:.1f}")
    b.set_title("(b) masked q . k", fontsize=9)
    b.set_xlabel("key", fontsize=8), b.set_ylabel("query", fontsize=8)
    heatmap(c, tr.pattern, rows, rows, cmap="Blues", symmetric=False, vmin=0, vmax=1)
    c.set_title("(c) attention softmax(q . k / sqrt(d_k))", fontsize=9)
    c.set_xlabel("key", fontsize=8)
    fig.suptitle(f"Attention for {_seq_title(tr)} (Fig. 13)\n(a) dot product of each query (star) with the plane "
                 "(green = high); keys red, masked keys grey", fontsize=10)
    return fig


def walk_values_figure(tr: Trace, geom: Geometry):
    """Fig. 14: (a) attention, (b) values V, (c) attention outputs A V as heatmaps; (d) values and
    (e) attention outputs as scatter plots over all V*T values (grey)."""
    fig = new_figure(16, 9)
    gs = fig.add_gridspec(2, 6)
    rows, Dh = tr.point_labels(), tr.v.shape[1]
    ax = fig.add_subplot(gs[0, 0:2])
    heatmap(ax, tr.pattern, rows, rows, cmap="Blues", symmetric=False, vmin=0, vmax=1)
    ax.set_title("(a) attention A", fontsize=9)
    ax = fig.add_subplot(gs[0, 2:4])
    heatmap(ax, tr.v, rows, _dims(Dh, "v"))
    ax.set_title("(b) values V", fontsize=9)
    ax = fig.add_subplot(gs[0, 4:6])
    heatmap(ax, tr.head_out, rows, _dims(Dh, "a"))
    ax.set_title("(c) attention output A V", fontsize=9)
    plane = fit_plane(np.concatenate([geom.v.reshape(-1, Dh), tr.head_out]))
    for ax, pts, name, colour in ((fig.add_subplot(gs[1, 0:3]), tr.v, "(d) values v_j", VALUE_COLOR),
                                  (fig.add_subplot(gs[1, 3:6]), tr.head_out, "(e) attention outputs Attn(e)_i",
                                   "tab:purple")):
        _over_backdrop(ax, plane, geom.v.reshape(-1, Dh), pts, rows, colour, name)
    fig.suptitle(f"Values and attention outputs for {_seq_title(tr)} (Fig. 14)", fontsize=11)
    return fig


def walk_prediction_figure(tr: Trace, land: Landscape):
    """Fig. 15: embeddings e, attention vectors and their sums z as heatmaps (top); e over the
    argmax map, attention vectors as arrows from the origin, and e nudged to z (bottom)."""
    fig = new_figure(16, 10)
    axes = fig.subplots(2, 3, height_ratios=[1, 1.6])
    rows, D = tr.point_labels(), tr.e.shape[1]
    for ax, M, name in zip(axes[0], (tr.e, tr.attn_out, tr.z), ("(a) embeddings e", "(b) attention Attn(e)",
                                                                "(c) z = e + Attn(e)")):
        heatmap(ax, M, rows, _dims(D))
        ax.set_title(name, fontsize=9)
    plane = land.plane
    ep, zp = plane.project(tr.e), plane.project(tr.z)
    ap = tr.attn_out @ plane.basis.T  # (T, 2): a direction, not a point
    pred = [tr.labels[p] if p < len(tr.labels) else str(p) for p in tr.prediction]
    cols = _trace_colors(tr)
    argmax_map(axes[1, 0], land, tr.labels)
    labelled_points(axes[1, 0], ep, rows, cols, size=30, fontsize=8)
    axes[1, 0].set_title("(a) e over the argmax map", fontsize=9)
    ax = axes[1, 1]
    for i in range(tr.T):
        ax.annotate("", xy=ap[i], xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=cols[i], lw=1.2))
        ax.text(*ap[i], rows[i], fontsize=8)
    lim = bounds(ap, np.zeros((1, 2)))
    ax.set_xlim(lim[0]), ax.set_ylim(lim[1])
    ax.axhline(0, color="0.8", lw=0.5), ax.axvline(0, color="0.8", lw=0.5)
    ax.set_title("(b) attention vectors from the origin", fontsize=9)
    ax = axes[1, 2]
    argmax_map(ax, land, tr.labels)
    for i in range(tr.T):
        ax.annotate("", xy=zp[i], xytext=ep[i], arrowprops=dict(arrowstyle="->", color="0.15", lw=1.0))
        ax.text(*ep[i], rows[i], fontsize=7, color="white", weight="bold",
                bbox=dict(boxstyle="round,pad=0.1", fc=cols[i], ec="none", alpha=0.8))
        ax.text(*zp[i], f" -> {pred[i]}", fontsize=7, color="0.1")
    ax.set_title("(c) e nudged by Attn(e) to z; text: predicted next token", fontsize=9)
    for ax in axes[1]:
        ax.tick_params(labelsize=7)
    note = f" [{plane.note}]" if plane.note else ""
    fig.suptitle(f"Predicting the next token of {_seq_title(tr)} (Fig. 15){note}", fontsize=11)
    return fig

