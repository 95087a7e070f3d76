"""Views of the model over all V x T (token, position) points (Mahajne & Moldwin, Fig. 5-10).

Each function takes a :class:`~tinyscope.studies.minimal.geometry.Geometry` (and the model where the
output network is needed) and returns a matplotlib Figure. Spaces wider than 2 are drawn
through a PCA :class:`~tinyscope.interp.projection.Plane`, and the figure says so.
"""
from __future__ import annotations

import numpy as np

from tinyscope.errors import TinyscopeError
from tinyscope.interp.plotting import (
    KEY_COLOR,
    MASKED_COLOR,
    QUERY_COLOR,
    VALUE_COLOR,
    TextLabels,
    heatmap,
    labelled_points,
    matrix_inset,
    new_figure,
    set_plane_axes,
    token_cmap,
    token_colors,
)
from tinyscope.studies.minimal.geometry import (
    Geometry,
    Landscape,
    bounds,
    fit_plane,
    head_plane,
    landscape,
    residual_plane,
    subscript,
)


def point_colors(geom: Geometry) -> list:
    cols = token_colors(geom.V)
    return [cols[a] for a in range(geom.V) for _ in range(geom.T)]


def focus_token(labels: list[str], token: str | None = None) -> int:
    """The token the focused views follow: ``token`` if given, else ``+`` when it exists, else the last."""
    if token is not None:
        if token not in labels:
            raise TinyscopeError(f"--focus {token!r} is not a token of this run; choose one of {' '.join(labels)}")
        return labels.index(token)
    return labels.index("+") if "+" in labels else len(labels) - 1


# ---------------------------------------------------------------- Figure 5
def embeddings_figure(geom: Geometry):
    """Fig. 5: token and position embeddings as heatmaps and scatter plots; all V*T sums labelled."""
    fig = new_figure(15, 8.5)
    gs = fig.add_gridspec(2, 3)
    D = geom.tok.shape[1]
    dims = [f"d{i + 1}" for i in range(D)]
    ax = fig.add_subplot(gs[0, 0])
    heatmap(ax, geom.tok, geom.labels, dims, fontsize=7)
    ax.set_title("(a) token embeddings x", fontsize=9)
    ax = fig.add_subplot(gs[0, 1])
    heatmap(ax, geom.pos, [f"p{t}" for t in range(geom.T)], dims, fontsize=7)
    ax.set_title("(b) position embeddings p", fontsize=9)
    cols = token_colors(geom.V)
    ax = fig.add_subplot(gs[0, 2])
    plane = fit_plane(geom.tok)
    labelled_points(ax, plane.project(geom.tok), geom.labels, cols, size=40, fontsize=9)
    set_plane_axes(ax, plane, "", "(c) token embeddings x")
    ax = fig.add_subplot(gs[1, 0])
    plane = fit_plane(geom.pos)
    labelled_points(ax, plane.project(geom.pos), [f"p{t}" for t in range(geom.T)],
                    [matplotlib_gray(t, geom.T) for t in range(geom.T)], size=40, fontsize=9)
    ax.plot(*plane.project(geom.pos).T, color="0.6", lw=0.8, zorder=1)
    set_plane_axes(ax, plane, "", "(d) position embeddings p")
    ax = fig.add_subplot(gs[1, 1:])
    plane = residual_plane(geom)
    labelled_points(ax, plane.project(geom.emb), geom.point_labels(), point_colors(geom), size=16, fontsize=7)
    set_plane_axes(ax, plane, "", "(e) token + position embeddings e = x + p (label: token, position)")
    fig.suptitle("Learned embeddings (Fig. 5)", fontsize=11)
    return fig


def matplotlib_gray(t: int, T: int) -> tuple:
    g = 0.15 + 0.6 * (1 - t / max(T - 1, 1))
    return (g, g, g)


# ---------------------------------------------------------------- Figure 6
def qkv_figure(geom: Geometry):
    """Fig. 6: the V*T combined embeddings and their images in query, key and value space."""
    fig = new_figure(20, 5.6)
    axes = fig.subplots(1, 4)
    labels, cols = geom.point_labels(), point_colors(geom)
    plane = residual_plane(geom)
    labelled_points(axes[0], plane.project(geom.emb), labels, cols, size=12, fontsize=6)
    set_plane_axes(axes[0], plane, "", "(a) embeddings e")
    for ax, pts, W, name, colour in ((axes[1], geom.q, geom.W_Q, "Q", QUERY_COLOR),
                                     (axes[2], geom.k, geom.W_K, "K", KEY_COLOR),
                                     (axes[3], geom.v, geom.W_V, "V", VALUE_COLOR)):
        pl = fit_plane(pts)
        labelled_points(ax, pl.project(pts), labels, colour, size=12, fontsize=6)
        set_plane_axes(ax, pl, name.lower(), f"({'bcd'['QKV'.index(name)]}) {name.lower()} = W_{name} e")
        matrix_inset(ax, W, f"W_{name}")
    fig.suptitle(f"Query, key and value projections, head {geom.head} (Fig. 6)", fontsize=11)
    return fig


# ---------------------------------------------------------------- Figure 7
def dot_background(plane, query: np.ndarray, xlim, ylim, n: int = 120):
    """q . k for k over a grid of the Q/K plane (lifted when d_head > 2): (n, n) indexed [y, x]."""
    xs, ys = np.linspace(*xlim, n), np.linspace(*ylim, n)
    gx, gy = np.meshgrid(xs, ys)
    grid = plane.lift(np.stack([gx.ravel(), gy.ravel()], -1))  # (n*n, Dh)
    return (grid @ query).reshape(n, n)


def qk_space_figure(geom: Geometry, token: str | None = None, position: int | None = None):
    """Fig. 7: joint Q/K space (top) and one focused query's dot product over the plane (bottom),
    keys at positions >= the query's greyed (causal mask; the paper greys position == too)."""
    a = focus_token(geom.labels, token)
    t = min(5, geom.T - 1) if position is None else int(position)
    if not 0 <= t < geom.T:
        raise TinyscopeError(f"--focus-position {position} is outside the context; give 0 to {geom.T - 1}")
    plane = head_plane(geom)
    qp, kp = plane.project(geom.q), plane.project(geom.k)  # (V, T, 2) each
    xlim, ylim = bounds(qp, kp)
    labels = geom.point_labels()
    fig = new_figure(10, 15)
    top, bottom = fig.subplots(2, 1)
    labelled_points(top, qp, labels, QUERY_COLOR, size=12, fontsize=6)
    labelled_points(top, kp, labels, KEY_COLOR, size=12, fontsize=6)
    top.set_xlim(xlim), top.set_ylim(ylim)
    set_plane_axes(top, plane, "", "joint query (blue) / key (red) space")
    bg = dot_background(plane, geom.q[a, t], xlim, ylim)
    im = bottom.imshow(bg, origin="lower", extent=(*xlim, *ylim), cmap="Greens", aspect="auto", zorder=0)
    fig.colorbar(im, ax=bottom, shrink=0.7, label=f"q({geom.labels[a]}{subscript(t)}) . k")
    live = np.zeros((geom.V, geom.T), dtype=bool)
    live[:, :t] = True
    k_lab = np.array(labels).reshape(geom.V, geom.T)
    labelled_points(bottom, kp[~live], list(k_lab[~live]), MASKED_COLOR, size=10, fontsize=5.5)
    labelled_points(bottom, kp[live], list(k_lab[live]), KEY_COLOR, size=12, fontsize=6)
    bottom.scatter(*qp[a, t], s=80, c=QUERY_COLOR, marker="*", zorder=5)
    bottom.text(*qp[a, t], f"  q {geom.labels[a]}{subscript(t)}", color=QUERY_COLOR, fontsize=9, zorder=5)
    bottom.set_xlim(xlim), bottom.set_ylim(ylim)
    set_plane_axes(bottom, plane, "", f"focused query {geom.labels[a]}{subscript(t)}: keys at positions >= {t} greyed")
    fig.suptitle("Query-key geometry (Fig. 7)", fontsize=11)
    return fig


# ---------------------------------------------------------------- Figure 8 and the full matrix
def query_token_scores_figure(geom: Geometry, token: str | None = None):
    """Fig. 8: raw q.k of one query token (rows: its positions) against each key token (columns:
    key positions), one T x T block per key token, on one colour scale."""
    a = focus_token(geom.labels, token)
    S = geom.scores()[a]  # (T, V, T)
    m = float(np.abs(S).max()) or 1.0
    ncols = min(4, geom.V)
    nrows = -(-geom.V // ncols)
    fig = new_figure(3.2 * ncols + 1, 3.0 * nrows, layout=None)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, sharey=True)).ravel()
    fig.subplots_adjust(left=0.06, right=0.86, bottom=0.07, top=0.9, wspace=0.15, hspace=0.3)
    im = None
    for b, ax in enumerate(axes):
        if b >= geom.V:
            ax.set_axis_off()
            continue
        im = heatmap(ax, S[:, b, :], annotate=False, vmin=-m, vmax=m)
        ax.set_title(f"key token {geom.labels[b]}", fontsize=9)
        ax.tick_params(labelsize=6)
        if b // ncols == nrows - 1 or b + ncols >= geom.V:
            ax.set_xlabel("key position", fontsize=7)
        if b % ncols == 0:
            ax.set_ylabel(f"{geom.labels[a]} query position", fontsize=7)
    fig.colorbar(im, cax=fig.add_axes([0.885, 0.15, 0.015, 0.65]), label="q . k")
    fig.suptitle(f"Pre-softmax scores q.k of '{geom.labels[a]}' queries against every key token (Fig. 8)",
                 fontsize=11)
    return fig


def full_scores_figure(geom: Geometry):
    """The full (V*T) x (V*T) matrix of raw q.k, rows (query token, position), columns (key token,
    position), grouped into V x V token blocks (supplementary a4/11)."""
    V, T = geom.V, geom.T
    S = geom.scores().reshape(V * T, V * T)
    fig = new_figure(11, 10)
    ax = fig.subplots()
    im = heatmap(ax, S, annotate=False)
    for i in range(1, V):
        ax.axhline(i * T - 0.5, color="k", lw=0.5)
        ax.axvline(i * T - 0.5, color="k", lw=0.5)
    centres = [i * T + (T - 1) / 2 for i in range(V)]
    ax.set_xticks(centres, geom.labels, fontsize=8)
    ax.set_yticks(centres, geom.labels, fontsize=8)
    ax.set_xlabel("key token (positions 0..T-1 within each block)")
    ax.set_ylabel("query token (positions 0..T-1 within each block)")
    fig.colorbar(im, ax=ax, shrink=0.7, label="q . k")
    ax.set_title("All query-key scores q.k, no mask, no softmax", fontsize=11)
    return fig


# ---------------------------------------------------------------- Figures 9 and 10
def landscape_limits(geom: Geometry, plane) -> tuple:
    """A window of the residual plane holding every embedding, every value and every e + v: where
    the first residual z = e + sum_j A_ij v_j can land."""
    D = geom.emb.shape[-1]
    sets = [plane.project(geom.emb)]
    if geom.v.shape[-1] == D:
        v = geom.v.reshape(-1, D)
        sets += [plane.project(v), plane.project(geom.emb.reshape(-1, 1, D) + v[None, :, :])]
    return bounds(*sets)


def landscape_for(model, geom: Geometry, n: int = 160, limits=None) -> Landscape:
    """The output landscape over :func:`landscape_limits` (or ``limits``) of the residual plane."""
    plane = residual_plane(geom)
    limits = limits or landscape_limits(geom, plane)
    return landscape(model, limits[0], limits[1], n=n, plane=plane)


def probability_panels_figure(land: Landscape, labels: list[str], overlay=None, overlay_labels=None):
    """Fig. 9: P(next = token) over the plane, one panel per output token."""
    V = land.probs.shape[-1]
    ncols = min(4, V)
    nrows = -(-V // ncols)
    fig = new_figure(3.4 * ncols + 1, 3.0 * nrows, layout=None)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, sharey=True)).ravel()
    fig.subplots_adjust(left=0.05, right=0.86, bottom=0.06, top=0.9, wspace=0.12, hspace=0.3)
    im = None
    for u, ax in enumerate(axes):
        if u >= V:
            ax.set_axis_off()
            continue
        im = ax.imshow(land.probs[:, :, u], origin="lower", extent=land.extent, vmin=0, vmax=1, cmap="viridis",
                       aspect="auto")
        if overlay is not None:
            labelled_points(ax, overlay, overlay_labels, "white", size=4, fontsize=4)
        ax.set_title(f"P(next = {labels[u] if u < len(labels) else u})", fontsize=9)
        ax.tick_params(labelsize=6)
    fig.colorbar(im, cax=fig.add_axes([0.885, 0.15, 0.015, 0.65]), label="probability")
    note = f" [{land.plane.note}]" if land.plane.note else ""
    fig.suptitle(f"Output probability landscape of the output network (Fig. 9){note}", fontsize=11)
    return fig


def argmax_map(ax, land: Landscape, labels: list[str], annotate: bool = True):
    """Colour each point of the plane by the token the output network predicts; label each region."""
    V = land.probs.shape[-1]
    am = land.argmax
    ax.imshow(am, origin="lower", extent=land.extent, cmap=token_cmap(V), vmin=-0.5, vmax=V - 0.5, aspect="auto",
              interpolation="nearest")
    texts = region_labels(ax, land, labels) if annotate else None
    ax.set_xlim(land.extent[:2])
    ax.set_ylim(land.extent[2:])
    return texts


def region_labels(ax, land: Landscape, labels: list[str]):
    """Write each predicted token at the median point of its argmax region (one TextLabels artist)."""
    gx, gy = np.meshgrid(land.xs, land.ys)
    am = land.argmax
    tokens = np.unique(am)
    centres = np.array([[np.median(gx[am == u]), np.median(gy[am == u])] for u in tokens])
    names = [labels[u] if u < len(labels) else str(u) for u in tokens]
    return TextLabels(ax, centres, names, fontsize=11, color="0.25", ha="center", va="center", weight="bold")


def output_summary_figure(land: Landscape, geom: Geometry):
    """Fig. 10: (a) entropy (nats), (b) argmax map, (c) with the embeddings, (d) with the values."""
    fig = new_figure(13, 11.5)
    axes = fig.subplots(2, 2).ravel()
    im = axes[0].imshow(land.entropy, origin="lower", extent=land.extent, cmap="magma", aspect="auto")
    fig.colorbar(im, ax=axes[0], shrink=0.8, label="entropy (nats)")
    axes[0].set_title("(a) entropy of the output distribution", fontsize=9)
    argmax_map(axes[1], land, geom.labels)
    axes[1].set_title("(b) argmax prediction", fontsize=9)
    argmax_map(axes[2], land, geom.labels, annotate=False)
    labelled_points(axes[2], land.plane.project(geom.emb), geom.point_labels(), point_colors(geom), size=10,
                    fontsize=5.5)
    axes[2].set_title("(c) argmax map with embeddings e", fontsize=9)
    argmax_map(axes[3], land, geom.labels, annotate=False)
    if geom.v.shape[-1] == geom.emb.shape[-1]:
        labelled_points(axes[3], land.plane.project(geom.v), geom.point_labels(), VALUE_COLOR, size=10, fontsize=5.5)
        axes[3].set_title("(d) argmax map with values v = W_V e", fontsize=9)
    else:
        axes[3].set_title("(d) values live in a space of another width: not drawn", fontsize=9)
    for ax in axes:
        xl, yl = land.plane.axis_labels()
        ax.set_xlabel(xl, fontsize=8)
        ax.set_ylabel(yl, fontsize=8)
        ax.tick_params(labelsize=7)
    note = f" [{land.plane.note}; landscape is a slice]" if land.plane.note else ""
    fig.suptitle(f"Output landscape summary (Fig. 10){note}", fontsize=11)
    return fig
