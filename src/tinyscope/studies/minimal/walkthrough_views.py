"""The sequence walkthrough as figures (Mahajne & Moldwin, Sec. 3.6, Fig. 11-15).

Each function draws one :class:`~tinyscope.studies.minimal.walkthrough.Trace` against the backdrop of
all V x T points of a :class:`~tinyscope.studies.minimal.geometry.Geometry` (grey), as the paper does.
"""
from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from tinyscope.interp.plotting import (
    KEY_COLOR,
    MASKED_COLOR,
    QUERY_COLOR,
    VALUE_COLOR,
    labelled_points,
    new_figure,
    token_colors,
)
from tinyscope.studies.minimal import style as st
from tinyscope.studies.minimal.geometry import Geometry, Landscape, bounds, fit_plane, head_plane
from tinyscope.studies.minimal.geometry_views import argmax_map, dot_background, qk_legend
from tinyscope.studies.minimal.walkthrough import Trace

BACKDROP = dict(s=6, c="0.82", linewidths=0, zorder=1)
ATTN_COLOR = "tab:purple"


def _seq_title(tr: Trace) -> str:
    return " ".join(tr.token_names)


def _trace_colors(tr: Trace) -> list:
    cols = token_colors(len(tr.labels))
    return [cols[t] for t in tr.tokens]


def _over_backdrop(ax, plane, backdrop: np.ndarray, pts: np.ndarray, labels: list[str], colours, title: str,
                   space: str = ""):
    """The sequence's points (labelled) over all possible points (grey), in ``plane``."""
    bp = plane.project(backdrop).reshape(-1, 2)
    ax.scatter(bp[:, 0], bp[:, 1], **BACKDROP)
    labelled_points(ax, plane.project(pts), labels, colours, size=22, fontsize=st.BIG_POINT)
    st.plane_axes(ax, plane, space, title)


def walk_embeddings_figure(tr: Trace, geom: Geometry):
    """Fig. 11: (a-c) heatmaps of x, p, e for the sequence; (d-f) scatters over all tokens,
    positions and token+position points (grey)."""
    fig = new_figure(st.WIDTH, 6.4)
    axes = fig.subplots(2, 3)
    rows = tr.point_labels()
    D = tr.x.shape[1]
    for ax, M, name in zip(axes[0], (tr.x, tr.p, tr.e), ("(a) token x", "(b) position p", "(c) e = x + p")):
        st.value_heatmap(fig, ax, M, rows, st.dims(D), "dimension", "token, position", name, "value")
    cols = _trace_colors(tr)
    for ax, back, pts, labs, name in (
            (axes[1, 0], geom.tok, tr.x, tr.token_names, "(d) token embeddings"),
            (axes[1, 1], geom.pos, tr.p, [f"p{i}" for i in range(tr.T)], "(e) position embeddings"),
            (axes[1, 2], geom.emb.reshape(-1, D), tr.e, rows, "(f) token + position")):
        _over_backdrop(ax, fit_plane(back), back, pts, labs, cols, name)
    fig.suptitle(f"Embeddings of the sequence {_seq_title(tr)} (Fig. 11); grey: all possible points",
                 fontsize=st.SUPTITLE)
    return fig


def walk_qk_figure(tr: Trace, geom: Geometry):
    """Fig. 12: (a) Q and (b) K of the sequence as heatmaps; (c) its queries (blue) and keys (red)
    over all V*T queries and keys (grey)."""
    fig = new_figure(st.WIDTH, 3.6)
    axes = fig.subplots(1, 3, width_ratios=[1, 1, 1.9])
    rows, Dh = tr.point_labels(), tr.q.shape[1]
    st.value_heatmap(fig, axes[0], tr.q, rows, st.dims(Dh, "q"), "dimension", "token, position", "(a) Q", "value")
    st.value_heatmap(fig, axes[1], tr.k, rows, st.dims(Dh, "k"), "dimension", "", "(b) K", "value")
    axes[1].set_ylabel("token, position", fontsize=st.LABEL)
    plane = head_plane(geom)
    _over_backdrop(axes[2], plane, np.concatenate([geom.q.reshape(-1, Dh), geom.k.reshape(-1, Dh)]), tr.q, rows,
                   QUERY_COLOR, "(c) the sequence's queries and keys")
    labelled_points(axes[2], plane.project(tr.k), rows, KEY_COLOR, size=22, fontsize=st.BIG_POINT)
    handles = [Line2D([], [], ls="", marker="o", ms=4, color=c, label=n)
               for c, n in ((QUERY_COLOR, "query"), (KEY_COLOR, "key"), ("0.82", "all V*T q and k"))]
    axes[2].legend(handles=handles, fontsize=st.TICK, loc="best", framealpha=0.85)
    fig.suptitle(f"Queries and keys of {_seq_title(tr)} (Fig. 12)", fontsize=st.SUPTITLE)
    return fig


def walk_attention_figure(tr: Trace, geom: Geometry):
    """Fig. 13: (a) per query, its dot product over the plane with the sequence's keys (red: j <= i,
    grey: masked); (b) the masked raw scores q.k; (c) the attention matrix softmax(q.k / sqrt(d_k)),
    masked cells blank."""
    T = tr.T
    ncols = min(4, T)
    nrows = -(-T // ncols)
    fig = new_figure(st.WIDTH, 1.75 * nrows + 4.3)
    sub = fig.subfigures(2, 1, height_ratios=[1.75 * nrows + 0.9, 3.4])
    axes = np.atleast_1d(sub[0].subplots(nrows, ncols, sharex=True, sharey=True)).ravel()
    plane = head_plane(geom)
    qp, kp = plane.project(tr.q), plane.project(tr.k)
    xlim, ylim = bounds(plane.project(geom.q), plane.project(geom.k))
    rows = tr.point_labels()
    backgrounds = [dot_background(plane, tr.q[i], xlim, ylim, n=80) for i in range(T)]
    m = max(float(np.abs(b).max()) for b in backgrounds) or 1.0
    im = None
    for i, ax in enumerate(axes):
        if i >= T:
            ax.set_axis_off()
            continue
        im = ax.imshow(backgrounds[i], origin="lower", extent=(*xlim, *ylim), cmap="PRGn", vmin=-m, vmax=m,
                       aspect="auto")
        live = np.arange(T) <= i
        labelled_points(ax, kp[~live], [r for r, k in zip(rows, live) if not k], MASKED_COLOR, size=10,
                        fontsize=st.POINT)
        labelled_points(ax, kp[live], [r for r, k in zip(rows, live) if k], KEY_COLOR, size=12, fontsize=st.POINT)
        ax.scatter(*qp[i], s=90, c=QUERY_COLOR, marker="*", edgecolors="k", linewidths=0.6, zorder=5)
        ax.set_xlim(xlim), ax.set_ylim(ylim)
        st.axes_text(ax, "", "", f"query {rows[i]}")
    xl, yl = plane.axis_labels()
    st.grid_labels(sub[0], xl, yl)
    st.colorbar(sub[0], im, axes.tolist(), "q_i . k (raw)", shrink=0.8)
    # wider than a panel, so above them, with the panel group's title as its own
    leg = qk_legend(axes[0], masked=True, focus="query q_i", above=sub[0])
    leg.set_title("(a) each query's dot product with every point of the plane (green: high)",
                  prop={"size": st.TITLE})
    b, c = sub[1].subplots(1, 2)
    st.value_heatmap(sub[1], b, tr.scores, rows, rows, "key", "query", "(b) masked q . k", "q . k (raw)",
                     fmt="{:.0f}" if np.nanmax(np.abs(tr.scores[np.isfinite(tr.scores)])) >= 100 else "{:.1f}")
    pattern = np.where(np.tril(np.ones((T, T), dtype=bool)), tr.pattern, np.nan)
    st.value_heatmap(sub[1], c, pattern, rows, rows, "key", "query", "(c) attention softmax(q . k / sqrt(d_k))",
                     "attention weight", cmap="Blues", symmetric=False, vmin=0, vmax=1)
    fig.suptitle(f"Attention for {_seq_title(tr)} (Fig. 13); blank cells: causally masked", fontsize=st.SUPTITLE)
    return fig


def walk_values_figure(tr: Trace, geom: Geometry):
    """Fig. 14: (a) attention, (b) values V, (c) attention outputs A V as heatmaps; (d) values and
    (e) attention outputs as scatter plots over all V*T values (grey)."""
    fig = new_figure(st.WIDTH, 6.4)
    gs = fig.add_gridspec(2, 6)
    rows, Dh = tr.point_labels(), tr.v.shape[1]
    T = tr.T
    pattern = np.where(np.tril(np.ones((T, T), dtype=bool)), tr.pattern, np.nan)
    st.value_heatmap(fig, fig.add_subplot(gs[0, 0:2]), pattern, rows, rows, "key", "query", "(a) attention A",
                     "weight", cmap="Blues", symmetric=False, vmin=0, vmax=1, fmt="{:.1f}")
    st.value_heatmap(fig, fig.add_subplot(gs[0, 2:4]), tr.v, rows, st.dims(Dh, "v"), "dimension", "token, position",
                     "(b) values V", "value")
    st.value_heatmap(fig, fig.add_subplot(gs[0, 4:6]), tr.head_out, rows, st.dims(Dh, "a"), "dimension",
                     "token, position", "(c) attention output A V", "value")
    plane = fit_plane(np.concatenate([geom.v.reshape(-1, Dh), tr.head_out]))
    for ax, pts, name, colour in ((fig.add_subplot(gs[1, 0:3]), tr.v, "(d) values v_j", VALUE_COLOR),
                                  (fig.add_subplot(gs[1, 3:6]), tr.head_out, "(e) attention outputs Attn(e)_i",
                                   ATTN_COLOR)):
        _over_backdrop(ax, plane, geom.v.reshape(-1, Dh), pts, rows, colour, name, space="v")
    fig.suptitle(f"Values and attention outputs for {_seq_title(tr)} (Fig. 14); grey: all V*T values",
                 fontsize=st.SUPTITLE)
    return fig


def walk_prediction_figure(tr: Trace, land: Landscape):
    """Fig. 15: embeddings e, attention vectors and their sums z as heatmaps (top); e over the
    argmax map, attention vectors as arrows from the origin, and e moved to z (bottom). The
    predicted next token of each position is written beside its row of z (top right), not at
    z, where labels would land on each other."""
    fig = new_figure(st.WIDTH, 6.8)
    axes = fig.subplots(2, 3, height_ratios=[1, 1.25])
    rows, D = tr.point_labels(), tr.e.shape[1]
    pred = [tr.labels[p] if p < len(tr.labels) else str(p) for p in tr.prediction]
    for ax, M, name, names, ylabel in (
            (axes[0, 0], tr.e, "(a) embeddings e", rows, "token, position"),
            (axes[0, 1], tr.attn_out, "(b) attention Attn(e)", rows, "token, position"),
            (axes[0, 2], tr.z, "(c) z = e + Attn(e)", [f"{r} -> {p}" for r, p in zip(rows, pred)],
             "token, position -> predicted")):
        st.value_heatmap(fig, ax, M, names, st.dims(D), "dimension", ylabel, name, "value")
    plane = land.plane
    ep, zp = plane.project(tr.e), plane.project(tr.z)
    ap = tr.attn_out @ plane.basis.T  # (T, 2): a direction, not a point
    cols = _trace_colors(tr)
    xl, yl = plane.axis_labels()
    argmax_map(axes[1, 0], land, tr.labels, annotate=False)
    labelled_points(axes[1, 0], ep, rows, cols, size=22, fontsize=st.BIG_POINT)
    st.axes_text(axes[1, 0], xl, yl, "(a) e over the argmax map")
    ax = axes[1, 1]
    for i in range(tr.T):
        ax.annotate("", xy=ap[i], xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=cols[i], lw=1.2))
    labelled_points(ax, ap, rows, cols, size=6, fontsize=st.BIG_POINT)
    lim = bounds(ap, np.zeros((1, 2)), pad=0.15)
    ax.set_xlim(lim[0]), ax.set_ylim(lim[1])
    ax.axhline(0, color="0.8", lw=0.5), ax.axvline(0, color="0.8", lw=0.5)
    st.axes_text(ax, xl, yl, "(b) Attn(e) as arrows from 0")
    ax = axes[1, 2]
    argmax_map(ax, land, tr.labels, annotate=False)
    for i in range(tr.T):
        ax.annotate("", xy=zp[i], xytext=ep[i], arrowprops=dict(arrowstyle="->", color="0.15", lw=0.9))
    ax.scatter(*ep.T, s=14, c="white", edgecolors=cols, linewidths=1.0, zorder=3)
    labelled_points(ax, zp, rows, cols, size=14, fontsize=st.BIG_POINT)
    st.axes_text(ax, xl, yl, "(c) e (white) moved by Attn(e) to z")
    st.token_legend(fig, tr.labels, ncol=min(len(tr.labels), 12))
    note = f" [{plane.note}]" if plane.note else ""
    fig.suptitle(f"Predicting the next token of {_seq_title(tr)} (Fig. 15){note}", fontsize=st.SUPTITLE)
    return fig
