"""Views of the model over all V x T (token, position) points (Mahajne & Moldwin, Fig. 5-10).

Each function takes a :class:`~tinyscope.studies.minimal.geometry.Geometry` (and the model where the
output network is needed) and returns a matplotlib Figure. Spaces wider than 2 are drawn
through a PCA :class:`~tinyscope.interp.projection.Plane`, and the figure says so.
"""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib import patheffects
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tinyscope.errors import TinyscopeError
from tinyscope.interp.plotting import (
    KEY_COLOR,
    MASKED_COLOR,
    QUERY_COLOR,
    VALUE_COLOR,
    TextLabels,
    heatmap,
    labelled_points,
    new_figure,
    token_cmap,
    token_colors,
)
from tinyscope.studies.minimal import style as st
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
    fig = new_figure(st.WIDTH, 7.4)
    gs = fig.add_gridspec(2, 3, height_ratios=[1, 1.15])
    D = geom.tok.shape[1]
    positions = [f"p{t}" for t in range(geom.T)]
    st.value_heatmap(fig, fig.add_subplot(gs[0, 0]), geom.tok, geom.labels, st.dims(D), "dimension", "token",
                     "(a) token embeddings x", "value")
    st.value_heatmap(fig, fig.add_subplot(gs[0, 1]), geom.pos, positions, st.dims(D), "dimension", "position",
                     "(b) position embeddings p", "value")
    cols = token_colors(geom.V)
    ax = fig.add_subplot(gs[0, 2])
    plane = fit_plane(geom.tok)
    labelled_points(ax, plane.project(geom.tok), geom.labels, cols, size=30, fontsize=st.BIG_POINT)
    st.plane_axes(ax, plane, "", "(c) token embeddings x")
    ax = fig.add_subplot(gs[1, 0])
    plane = fit_plane(geom.pos)
    ax.plot(*plane.project(geom.pos).T, color="0.6", lw=0.8, zorder=1)
    labelled_points(ax, plane.project(geom.pos), positions, [matplotlib_gray(t, geom.T) for t in range(geom.T)],
                    size=30, fontsize=st.BIG_POINT)
    st.plane_axes(ax, plane, "", "(d) position embeddings p")
    ax = fig.add_subplot(gs[1, 1:])
    plane = residual_plane(geom)
    labelled_points(ax, plane.project(geom.emb), geom.point_labels(), point_colors(geom), size=10, fontsize=st.POINT)
    st.plane_axes(ax, plane, "", "(e) e = x + p, label: token with position as subscript")
    fig.suptitle("Learned embeddings (Fig. 5)", fontsize=st.SUPTITLE)
    return fig


def matplotlib_gray(t: int, T: int) -> tuple:
    g = 0.15 + 0.6 * (1 - t / max(T - 1, 1))
    return (g, g, g)


# ---------------------------------------------------------------- Figure 6
def qkv_figure(geom: Geometry):
    """Fig. 6: the V*T combined embeddings and their images in query, key and value space; the
    projection matrices W_Q, W_K, W_V in a row below (the paper's insets, moved off the points)."""
    fig = new_figure(st.WIDTH, 8.4)
    gs = fig.add_gridspec(3, 6, height_ratios=[1, 1, 0.38])
    labels, cols = geom.point_labels(), point_colors(geom)
    plane = residual_plane(geom)
    ax = fig.add_subplot(gs[0, :3])
    labelled_points(ax, plane.project(geom.emb), labels, cols, size=8, fontsize=st.POINT)
    st.plane_axes(ax, plane, "", "(a) embeddings e")
    slots = [(gs[0, 3:], gs[2, 0:2]), (gs[1, :3], gs[2, 2:4]), (gs[1, 3:], gs[2, 4:6])]
    for (main, side), (pts, W, name, colour) in zip(slots, ((geom.q, geom.W_Q, "Q", QUERY_COLOR),
                                                            (geom.k, geom.W_K, "K", KEY_COLOR),
                                                            (geom.v, geom.W_V, "V", VALUE_COLOR))):
        ax = fig.add_subplot(main)
        pl = fit_plane(pts)
        labelled_points(ax, pl.project(pts), labels, colour, size=8, fontsize=st.POINT)
        letter = "bcd"["QKV".index(name)]
        st.plane_axes(ax, pl, name.lower(), f"({letter}) {name.lower()} = W_{name} e")
        weight_matrix(fig, fig.add_subplot(side), W, name, letter)
    fig.suptitle(f"Query, key and value projections, head {geom.head} (Fig. 6)", fontsize=st.SUPTITLE)
    return fig


def weight_matrix(fig, ax, W: np.ndarray | None, name: str, letter: str) -> None:
    """W (d_head x d_model) as an annotated heatmap with a colour bar, when it is small."""
    if W is None or W.size > 16:
        ax.set_axis_off()
        return
    st.value_heatmap(fig, ax, W, st.dims(W.shape[0], name.lower()), st.dims(W.shape[1], "e"), "input e",
                     f"output {name.lower()}", f"({letter}) W_{name}", "weight")


# ---------------------------------------------------------------- Figure 7
def dot_background(plane, query: np.ndarray, xlim, ylim, n: int = 120):
    """q . k for k over a grid of the Q/K plane (lifted when d_head > 2): (n, n) indexed [y, x]."""
    xs, ys = np.linspace(*xlim, n), np.linspace(*ylim, n)
    gx, gy = np.meshgrid(xs, ys)
    grid = plane.lift(np.stack([gx.ravel(), gy.ravel()], -1))  # (n*n, Dh)
    return (grid @ query).reshape(n, n)


def qk_legend(ax, masked: bool = False, focus: str | None = None, above=None):
    """The marker key of the Q/K panels: queries, keys, masked keys, the focused query; inside
    ``ax`` where it covers least, or in one row above the panels of the (sub)figure ``above``."""
    handles = [Line2D([], [], ls="", marker="o", ms=4, color=QUERY_COLOR, label="query q"),
               Line2D([], [], ls="", marker="o", ms=4, color=KEY_COLOR, label="key k")]
    if masked:
        handles.append(Line2D([], [], ls="", marker="o", ms=4, color=MASKED_COLOR, label="key, causally masked"))
    if focus:
        handles.append(Line2D([], [], ls="", marker="*", ms=9, color=QUERY_COLOR, mec="k", label=focus))
    if above is not None:
        return above.legend(handles=handles, fontsize=st.TICK, loc="outside upper center", ncol=len(handles),
                            frameon=False)
    return ax.legend(handles=handles, fontsize=st.TICK, loc="best", framealpha=0.85)


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
    name = f"{geom.labels[a]}{subscript(t)}"
    fig = new_figure(6.0, 9.4)
    top, bottom = fig.subplots(2, 1)
    labelled_points(top, qp, labels, QUERY_COLOR, size=8, fontsize=st.POINT)
    labelled_points(top, kp, labels, KEY_COLOR, size=8, fontsize=st.POINT)
    top.set_xlim(xlim), top.set_ylim(ylim)
    st.plane_axes(top, plane, "", "(top) all queries and keys")
    qk_legend(top)
    bg = dot_background(plane, geom.q[a, t], xlim, ylim)
    im = bottom.imshow(bg, origin="lower", extent=(*xlim, *ylim), cmap="Greens", aspect="auto", zorder=0)
    st.colorbar(fig, im, bottom, f"q({name}) . k")
    live = np.zeros((geom.V, geom.T), dtype=bool)
    live[:, :t] = True
    k_lab = np.array(labels).reshape(geom.V, geom.T)
    labelled_points(bottom, kp[~live], list(k_lab[~live]), MASKED_COLOR, size=8, fontsize=st.POINT)
    labelled_points(bottom, kp[live], list(k_lab[live]), KEY_COLOR, size=8, fontsize=st.POINT)
    bottom.scatter(*qp[a, t], s=160, c=QUERY_COLOR, marker="*", edgecolors="k", linewidths=0.8, zorder=6)
    bottom.annotate(f"query {name}", qp[a, t], xytext=(8, 8), textcoords="offset points", fontsize=st.LABEL,
                    weight="bold", color=QUERY_COLOR, zorder=7,
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec=QUERY_COLOR, lw=0.8))
    bottom.set_xlim(xlim), bottom.set_ylim(ylim)
    st.plane_axes(bottom, plane, "", f"(bottom) query {name}: keys at positions >= {t} greyed (causal mask)")
    qk_legend(bottom, masked=True, focus=f"query {name}")
    fig.suptitle("Query-key geometry (Fig. 7)", fontsize=st.SUPTITLE)
    return fig


# ---------------------------------------------------------------- Figure 8 and the full matrix
def query_token_scores(geom: Geometry, a: int) -> np.ndarray:
    """Raw q.k of query token ``a`` (T query positions) against every key point, (T, V, T)
    [query position, key token, key position], NaN where the key comes after the query
    (key position > query position: the causal mask, as the authors' code draws it)."""
    S = geom.scores()[a]  # (T, V, T)
    allowed = geom.causal_mask()[a]  # (T, V, T)
    return np.where(allowed, S, np.nan)


def query_token_scores_figure(geom: Geometry, token: str | None = None):
    """Fig. 8: raw q.k of one query token (rows: its positions) against each key token (columns:
    key positions), one T x T block per key token, on one colour scale over the unmasked cells;
    masked cells (key after query) grey."""
    a = focus_token(geom.labels, token)
    S = query_token_scores(geom, a)  # (T, V, T)
    vmin, vmax = st.symmetric_limits(S)
    ncols = min(4, geom.V)
    nrows = -(-geom.V // ncols)
    fig = new_figure(st.WIDTH, 1.75 * nrows + 1.2)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, sharey=True)).ravel()
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad=MASKED_COLOR)
    im = None
    ticks = list(range(0, geom.T, max(1, geom.T // 4)))
    for b, ax in enumerate(axes):
        if b >= geom.V:
            ax.set_axis_off()
            continue
        im = ax.imshow(S[:, b, :], cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
        ax.set_xticks(ticks), ax.set_yticks(ticks)
        st.axes_text(ax, "", "", f"key token {geom.labels[b]}")
    st.grid_labels(fig, "key position", f"'{geom.labels[a]}' query position")
    st.colorbar(fig, im, axes.tolist(), "q . k (raw)", shrink=0.6)
    fig.legend(handles=[Patch(facecolor=MASKED_COLOR, label="masked:\nkey position\n> query position")],
               loc="outside right lower", fontsize=st.TICK, frameon=False)
    fig.suptitle(f"Pre-softmax scores q.k of '{geom.labels[a]}' queries against every key token (Fig. 8)",
                 fontsize=st.SUPTITLE)
    return fig


def full_scores_figure(geom: Geometry):
    """The full (V*T) x (V*T) matrix of raw q.k, rows (query token, position), columns (key token,
    position), grouped into V x V token blocks (supplementary a4/11)."""
    V, T = geom.V, geom.T
    S = geom.scores().reshape(V * T, V * T)
    fig = new_figure(st.WIDTH, 6.6)
    ax = fig.subplots()
    im = heatmap(ax, S, annotate=False)
    for i in range(1, V):
        ax.axhline(i * T - 0.5, color="k", lw=0.5)
        ax.axvline(i * T - 0.5, color="k", lw=0.5)
    centres = [i * T + (T - 1) / 2 for i in range(V)]
    ax.set_xticks(centres, geom.labels)
    ax.set_yticks(centres, geom.labels)
    st.axes_text(ax, f"key token (positions 0..{T - 1} within each block)",
                 f"query token (positions 0..{T - 1} within each block)",
                 "All query-key scores q.k, no mask, no softmax (suppl. a4/11)")
    st.colorbar(fig, im, ax, "q . k (raw)")
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


def probability_panels_figure(land: Landscape, labels: list[str], overlay=None, overlay_labels=None,
                              title: str = "Output probability landscape of the output network (Fig. 9)",
                              overlay_colour="white", clouds=None):
    """Fig. 9: P(next = token) over the plane, one panel per output token; ``overlay`` (N, 2)
    points drawn labelled on every panel, or ``clouds`` (V, T, 2) drawn as token clouds
    (:func:`token_clouds`; supplementary a4/07, a4/12)."""
    V = land.probs.shape[-1]
    ncols = min(4, V)
    nrows = -(-V // ncols)
    fig = new_figure(st.WIDTH, 1.8 * nrows + 1.1)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, sharey=True)).ravel()
    im = None
    for u, ax in enumerate(axes):
        if u >= V:
            ax.set_axis_off()
            continue
        im = ax.imshow(land.probs[:, :, u], origin="lower", extent=land.extent, vmin=0, vmax=1, cmap="viridis",
                       aspect="auto")
        if overlay is not None:
            labelled_points(ax, overlay, overlay_labels, overlay_colour, size=3, fontsize=st.POINT)
        ax.set_xlim(land.extent[:2]), ax.set_ylim(land.extent[2:])
        if clouds is not None:
            token_clouds(ax, clouds, labels, merge=0.14, fontsize=st.TICK, named=u == 0)  # tokens named once
        st.axes_text(ax, "", "", f"P(next = {labels[u] if u < len(labels) else u})")
    xl, yl = land.plane.axis_labels()
    st.grid_labels(fig, xl, yl)
    st.colorbar(fig, im, axes.tolist(), "probability", shrink=0.6)
    note = f" [{land.plane.note}]" if land.plane.note else ""
    fig.suptitle(title + note, fontsize=st.SUPTITLE)
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


def region_labels(ax, land: Landscape, labels: list[str], fontsize: float = 11):
    """Write each predicted token at the median point of its argmax region (one TextLabels artist)."""
    gx, gy = np.meshgrid(land.xs, land.ys)
    am = land.argmax
    tokens = np.unique(am)
    centres = np.array([[np.median(gx[am == u]), np.median(gy[am == u])] for u in tokens])
    names = [labels[u] if u < len(labels) else str(u) for u in tokens]
    return TextLabels(ax, centres, names, fontsize=fontsize, color="0.25", ha="center", va="center", weight="bold")


def token_clouds(ax, pts: np.ndarray, labels: list[str], merge: float = 0.05, fontsize: float = st.LABEL,
                 named: bool = True):
    """The V x T points (V, T, 2) in their token colours with a dark edge, and (``named``) one
    haloed label per token above its cloud, kept inside the axes; tokens whose clouds lie within
    ``merge`` of the axes span, or whose labels would touch (estimated from the axes' size),
    share one label ("1,3,5")."""
    V = pts.shape[0]
    cols = token_colors(V)
    flat = pts.reshape(-1, 2)
    ax.scatter(flat[:, 0], flat[:, 1], s=10, c=[cols[a] for a in range(V) for _ in range(pts.shape[1])],
               edgecolors="0.1", linewidths=0.4, zorder=3)
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    if not named:
        ax.set_xlim(xlim), ax.set_ylim(ylim)
        return
    lo, span = np.array([xlim[0], ylim[0]]), np.array([xlim[1] - xlim[0], ylim[1] - ylim[0]])
    frac = (pts - lo) / span  # (V, T, 2) in axes fractions
    size_in = np.array(ax.get_position().size) * ax.get_figure(root=True).get_size_inches()  # axes (w, h), inches
    char = 0.62 * fontsize / 72 / size_in[0]  # one character's width, in axes fractions
    height = 1.25 * fontsize / 72 / size_in[1]
    groups = [[a] for a in range(V)]

    def anchor(g):  # the label's (centre x, bottom y) in axes fractions
        return np.array([frac[g, :, 0].mean(), frac[g, :, 1].max() + 0.01])

    def width(g):
        return char * (sum(len(labels[a]) for a in g) + len(g) - 1)

    merged = True
    while merged:
        merged = False
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                di = np.abs(anchor(groups[i]) - anchor(groups[j]))
                near = np.linalg.norm(frac[groups[i]].mean((0, 1)) - frac[groups[j]].mean((0, 1))) < merge
                touch = di[0] < (width(groups[i]) + width(groups[j])) / 2 and di[1] < height
                if near or touch:
                    groups[i] = sorted(groups[i] + groups.pop(j))
                    merged = True
                    break
            if merged:
                break
    halo = [patheffects.withStroke(linewidth=2.2, foreground="white")]
    for g in groups:
        x, y = anchor(g)
        half = min(width(g) / 2, 0.5)
        x = float(np.clip(x, half, 1 - half))  # the label stays inside the panel
        ax.annotate(",".join(labels[a] for a in g), (x, y), xycoords="axes fraction", ha="center", va="bottom",
                    fontsize=fontsize, weight="bold", color="0.1", path_effects=halo, zorder=6,
                    annotation_clip=True)
    ax.set_xlim(xlim), ax.set_ylim(ylim)


def output_summary_figure(land: Landscape, geom: Geometry):
    """Fig. 10: (a) entropy (nats), (b) argmax map, (c) with the embeddings, (d) with the values;
    one legend keys the argmax colours, and the overlaid points are drawn dark on light regions."""
    fig = new_figure(st.WIDTH, 7.6)
    axes = fig.subplots(2, 2).ravel()
    im = axes[0].imshow(land.entropy, origin="lower", extent=land.extent, cmap="magma", aspect="auto")
    st.colorbar(fig, im, axes[0], "entropy (nats)")
    axes[0].set_title("(a) entropy of the output distribution", fontsize=st.TITLE)
    argmax_map(axes[1], land, geom.labels, annotate=True)
    axes[1].set_title("(b) argmax prediction", fontsize=st.TITLE)
    argmax_map(axes[2], land, geom.labels, annotate=False)
    token_clouds(axes[2], land.plane.project(geom.emb), geom.labels)
    axes[2].set_title("(c) argmax map with embeddings e (8 positions per token)", fontsize=st.TITLE)
    argmax_map(axes[3], land, geom.labels, annotate=False)
    if geom.v.shape[-1] == geom.emb.shape[-1]:
        token_clouds(axes[3], land.plane.project(geom.v), geom.labels)
        axes[3].set_title("(d) argmax map with values v = W_V e", fontsize=st.TITLE)
    else:
        axes[3].set_title("(d) values live in a space of another width: not drawn", fontsize=st.TITLE)
    xl, yl = land.plane.axis_labels()
    for ax in axes:
        st.axes_text(ax, xl, yl)
    st.token_legend(fig, geom.labels, ncol=min(geom.V, 12))
    note = f" [{land.plane.note}; landscape is a slice]" if land.plane.note else ""
    fig.suptitle(f"Output landscape summary (Fig. 10){note}", fontsize=st.SUPTITLE)
    return fig
