"""The frames of the training movies (Mahajne & Moldwin, Sec. 6): one figure per movie whose
moving parts are set for each checkpoint.

Each movie is built once from the first snapshot, the planes and the fixed limits of
``movie_data``; :meth:`FrameMovie.frame` moves its artists to a snapshot and returns the RGB
frame. Fixed parts (axes, ticks, titles, colour bars) are drawn once and kept as a bitmap by
:class:`~tinyscope.interp.frame_canvas.FrameCanvas`; point labels are stamped by Pillow.

The paper's five (the panel sets of the authors' ``plot_*`` functions named in Sec. 6):

1. :class:`EmbeddingsMovie`: token x, position p and combined e = x + p embeddings;
2. :class:`OutputHeatmapsMovie`: P(next = token) of the output network over the plane, one
   panel per token, all V x T embeddings overlaid;
3. :class:`QKVMovie`: token, position and combined embeddings; q, k, v; q and k together; the
   pooled attention output of every point (8 panels);
4. :class:`QKMovie`: queries and keys on common axes;
5. :class:`QKScoresMovie`: the Q/K scatter beside the (V*T) x (V*T) pre-softmax scores
   q . k / sqrt(d_k), keys after the query masked.

Variants: :class:`OutputArgmaxMovie` (the argmax map with the embeddings),
:class:`QKVSimpleMovie` (e, q, k, v only) and :class:`QKSequenceAttentionMovie` (the Q/K space
beside the walkthrough sequence's T x T attention).
"""
from __future__ import annotations

import abc

import matplotlib
import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize, SymLogNorm, to_rgb

from tinyscope.interp.frame_canvas import FrameCanvas
from tinyscope.interp.plotting import (
    KEY_COLOR,
    MASKED_COLOR,
    MAX_LABELS,
    QUERY_COLOR,
    VALUE_COLOR,
    new_figure,
    token_cmap,
    token_colors,
)
from tinyscope.studies.minimal.geometry import Geometry
from tinyscope.studies.minimal.geometry_views import point_colors
from tinyscope.studies.minimal.movie_data import Snapshot
from tinyscope.studies.minimal.walkthrough import Trace

# Font sizes in points; at the default 100 dpi a point label is 11 px high, a title 17 px, and a
# frame WIDTH inches wide is 1200 px: the run report shows it at (nearly) its own size.
CAPTION, TITLE, AXIS, TICK, POINT = 13, 11.5, 10, 9, 8
WIDTH = 12.0
ATTN_COLOR = "tab:purple"


class _Panel:
    """Labelled points on fixed axes that move from frame to frame; ``markers=False`` draws the
    labels alone, centred on the points (over heatmaps)."""

    def __init__(self, canvas: FrameCanvas, ax, labels: list[str], colors, xlim, ylim, title: str, xlabel: str,
                 ylabel: str, size: float = 14, fontsize: float = POINT, markers: bool = True, text_colour="0.1",
                 bold: bool = False):
        self.canvas, self.ax, self.labels, self.fontsize = canvas, ax, labels, fontsize
        self.text_colour, self.bold, self.markers = text_colour, bold, markers
        self.colors, self.size, self.edge, self.linewidth = colors, size, None, 0.0
        ax.set_xlim(xlim), ax.set_ylim(ylim)
        if title:
            ax.set_title(title, fontsize=TITLE)
        ax.set_xlabel(xlabel, fontsize=AXIS), ax.set_ylabel(ylabel, fontsize=AXIS)
        ax.tick_params(labelsize=TICK)

    def move(self, pts: np.ndarray) -> None:
        pts = np.asarray(pts).reshape(-1, 2)
        if self.markers:
            self.canvas.dots(self.ax, pts, self.colors, self.size, self.edge, self.linewidth)
        if self.labels and len(pts) <= MAX_LABELS:
            ha, va = ("left", "bottom") if self.markers else ("center", "center")
            self.canvas.label(self.ax, pts, self.labels, colour=self.text_colour, size=self.fontsize, ha=ha, va=va,
                              bold=self.bold)


class FrameMovie(abc.ABC):
    """One movie: a figure whose moving parts :meth:`update` sets for a snapshot.

    ``needs`` names what a frame reads besides the snapshot's geometry: ``"landscape"`` (the
    output network on a grid over the window ``lim[window]``) or ``"trace"`` (the walkthrough
    sequence)."""

    title = ""
    needs: frozenset = frozenset()
    window = "land"

    def __init__(self, fig, dpi: float):
        self.fig = fig
        self.canvas = FrameCanvas(fig, dpi)
        self.fig.suptitle(" ", fontsize=CAPTION)  # reserves the space the per-frame title is stamped into

    def caption(self, text: str) -> None:
        w, h = self.fig.canvas.get_width_height()
        pad = int(round(4 * self.fig.dpi / 72))
        self.canvas.label(None, np.array([[w / 2, h - pad]]), [f"{self.title}   {text}"], size=CAPTION, ha="center",
                          va="top", bold=True)

    @abc.abstractmethod
    def update(self, snap: Snapshot, land=None) -> None:
        """Move this movie's artists to the checkpoint ``snap`` (and its output landscape ``land``)."""

    def frame(self, snap: Snapshot, land=None) -> np.ndarray:
        self.update(snap, land)
        self.caption(snap.caption)
        return self.canvas.render()


def _origin_lines(ax) -> None:
    ax.axhline(0, color="0.8", lw=0.8, zorder=0), ax.axvline(0, color="0.8", lw=0.8, zorder=0)


class EmbeddingsMovie(FrameMovie):
    """Movie 1: token, position and combined embeddings."""

    title = "Movie 1: embeddings"

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float):
        super().__init__(new_figure(WIDTH, 4.4), dpi)
        a, b, c = self.fig.subplots(1, 3, width_ratios=[1, 1, 1.4])
        cv = self.canvas
        self.panels = [
            _Panel(cv, a, g.labels, token_colors(g.V), *lim["tok"], "(a) token embeddings x",
                   *planes["tok"].axis_labels(), size=36, fontsize=11),
            _Panel(cv, b, [f"p{t}" for t in range(g.T)], "0.3", *lim["pos"], "(b) position embeddings p",
                   *planes["pos"].axis_labels(), size=36, fontsize=11),
            _Panel(cv, c, g.point_labels(), point_colors(g), *lim["emb"], "(c) token + position e = x + p",
                   *planes["emb"].axis_labels()),
        ]
        for ax in (a, b, c):
            _origin_lines(ax)
        self.planes = planes

    def update(self, snap: Snapshot, land=None) -> None:
        g, p = snap.geom, self.planes
        for panel, pts in zip(self.panels, (p["tok"].project(g.tok), p["pos"].project(g.pos), p["emb"].project(g.emb))):
            panel.move(pts)


class OutputHeatmapsMovie(FrameMovie):
    """Movie 2: P(next = token) of the output network over the residual plane, one panel per
    output token (viridis, 0 to 1), with all V x T combined embeddings e overlaid as white dots
    and each token's name beside its T points (per-point labels would cover one another)."""

    title = "Movie 2: output probabilities and embeddings"
    needs = frozenset({"landscape"})
    window = "land_emb"

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float, n_out: int):
        ncols = min(4, n_out)
        nrows = -(-n_out // ncols)
        super().__init__(new_figure(WIDTH, (WIDTH - 0.9) / ncols * nrows * 0.97 + 0.6), dpi)
        axes = np.atleast_2d(self.fig.subplots(nrows, ncols, sharex=True, sharey=True))
        self.plane = planes["emb"]
        xlim, ylim = lim[self.window]
        xl, yl = self.plane.axis_labels()
        names = g.labels + [str(i) for i in range(len(g.labels), n_out)]
        self.axes, self.panels = [], []
        for u, ax in enumerate(axes.ravel()):
            if u >= n_out:
                ax.set_axis_off()
                continue
            self.axes.append(ax)
            row, col = divmod(u, ncols)
            self.panels.append(_Panel(self.canvas, ax, [], "white", xlim, ylim, f"P(next = {names[u]})",
                                      xl if row == nrows - 1 else "", yl if col == 0 else "", size=7))
            self.panels[-1].edge, self.panels[-1].linewidth = "0.15", 0.4
        self.labels, self.V, self.T = g.labels, g.V, g.T
        self.offset = np.array([0.04 * (xlim[1] - xlim[0]), 0.0])
        self.lut = matplotlib.colormaps["viridis"](np.linspace(0, 1, 256), bytes=True)[:, :3]  # (256, 3) uint8
        bar = self.fig.colorbar(ScalarMappable(Normalize(0, 1), "viridis"), ax=axes.ravel().tolist(), shrink=0.8,
                                pad=0.01, aspect=30)
        bar.set_label("probability", fontsize=AXIS)
        bar.ax.tick_params(labelsize=TICK)

    def update(self, snap: Snapshot, land=None) -> None:
        e = self.plane.project(snap.geom.emb)
        rgb = self.lut[np.clip(np.rint(land.probs * 255), 0, 255).astype(np.uint8)]  # (n, n, V, 3)
        centres = e.reshape(self.V, self.T, 2).mean(1) + self.offset  # (V, 2): one name per token, beside its points
        ix = np.clip(np.searchsorted(land.xs, centres[:, 0]), 0, len(land.xs) - 1)
        iy = np.clip(np.searchsorted(land.ys, centres[:, 1]), 0, len(land.ys) - 1)
        for u, (ax, panel) in enumerate(zip(self.axes, self.panels)):
            self.canvas.image(ax, rgb[:, :, u])  # rows of the landscape run up the y axis
            panel.move(e)
            dark = land.probs[iy, ix, u] > 0.6  # names over yellow are drawn black
            self.canvas.label(ax, centres, self.labels, size=9, ha="left", va="center", bold=True,
                              colours=["0.05" if d else "white" for d in dark])


class OutputArgmaxMovie(FrameMovie):
    """Variant of Movie 2: the argmax map of the output network with the embeddings overlaid."""

    title = "Movie 2 (argmax variant): output regions and embeddings"
    needs = frozenset({"landscape"})

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float, n_out: int):
        super().__init__(new_figure(9, 8), dpi)
        self.ax = self.fig.subplots()
        self.plane = planes["emb"]
        xlim, ylim = lim["land"]
        self.lut = np.rint(255 * token_cmap(n_out)(np.arange(n_out))[:, :3]).astype(np.uint8)  # (n_out, 3)
        self.panel = _Panel(self.canvas, self.ax, g.point_labels(), point_colors(g), xlim, ylim,
                            "argmax of the output network (region = its token), embeddings e overlaid",
                            *self.plane.axis_labels())

    def update(self, snap: Snapshot, land=None) -> None:
        self.canvas.image(self.ax, self.lut[land.argmax])
        gx, gy = np.meshgrid(land.xs, land.ys)
        am = land.argmax
        tokens = np.unique(am)
        centres = np.array([[np.median(gx[am == u]), np.median(gy[am == u])] for u in tokens])
        names = [snap.geom.labels[u] if u < len(snap.geom.labels) else str(u) for u in tokens]
        self.canvas.label(self.ax, centres, names, colour="0.3", size=16, ha="center", va="center", bold=True)
        self.panel.move(self.plane.project(snap.geom.emb))


class QKVMovie(FrameMovie):
    """Movie 3, in the authors' 3 x 3 grid: (a) token, (b) position and (c) combined embeddings,
    (d) q = W_Q e, (e) k = W_K e, (f) v = W_V e, (g) q and k together and (h) the pooled attention
    output of every point over all keys at or before its position."""

    title = "Movie 3: embeddings and their Q, K, V images"

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float):
        super().__init__(new_figure(WIDTH, 11.4), dpi)
        axes = self.fig.subplots(3, 3).ravel()  # the authors' 3 x 3 grid, the last cell empty
        axes[8].set_axis_off()
        cv, labels, p = self.canvas, g.point_labels(), planes
        self.panels = {
            "tok": _Panel(cv, axes[0], g.labels, token_colors(g.V), *lim["tok"], "(a) token embeddings x",
                          *p["tok"].axis_labels(), size=36, fontsize=11),
            "pos": _Panel(cv, axes[1], [f"p{t}" for t in range(g.T)], "0.3", *lim["pos"],
                          "(b) position embeddings p", *p["pos"].axis_labels(), size=36, fontsize=11),
            "emb": _Panel(cv, axes[2], labels, point_colors(g), *lim["emb"], "(c) e = x + p", *p["emb"].axis_labels()),
            "q": _Panel(cv, axes[3], labels, QUERY_COLOR, *lim["q"], "(d) q = W_Q e", *p["q"].axis_labels("head")),
            "k": _Panel(cv, axes[4], labels, KEY_COLOR, *lim["k"], "(e) k = W_K e", *p["k"].axis_labels("head")),
            "v": _Panel(cv, axes[5], labels, VALUE_COLOR, *lim["v"], "(f) v = W_V e", *p["v"].axis_labels("head")),
            "qk_q": _Panel(cv, axes[6], labels, QUERY_COLOR, *lim["qk"], "(g) q (blue) and k (red)",
                           *p["qk"].axis_labels("head")),
            "attn": _Panel(cv, axes[7], labels, ATTN_COLOR, *lim["attn"], "(h) attention output, keys at s <= t",
                           *p["attn"].axis_labels("head")),
        }
        self.panels["qk_k"] = _Panel(cv, axes[6], labels, KEY_COLOR, *lim["qk"], "", *p["qk"].axis_labels("head"))
        for ax in axes[:8]:
            _origin_lines(ax)
        self.planes = planes

    def update(self, snap: Snapshot, land=None) -> None:
        g, p = snap.geom, self.planes
        pts = {"tok": p["tok"].project(g.tok), "pos": p["pos"].project(g.pos), "emb": p["emb"].project(g.emb),
               "qk_q": p["qk"].project(g.q), "qk_k": p["qk"].project(g.k), "q": p["q"].project(g.q),
               "k": p["k"].project(g.k), "v": p["v"].project(g.v), "attn": p["attn"].project(snap.attn)}
        for key, panel in self.panels.items():
            panel.move(pts[key])


class QKVSimpleMovie(FrameMovie):
    """Variant of Movie 3: the combined embeddings and their q, k and v images (4 panels)."""

    title = "Movie 3 (simple variant): e, q, k, v"

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float):
        super().__init__(new_figure(10, 9), dpi)
        axes = self.fig.subplots(2, 2).ravel()
        labels = g.point_labels()
        self.panels = [_Panel(self.canvas, axes[0], labels, point_colors(g), *lim["emb"], "embeddings e",
                              *planes["emb"].axis_labels())]
        for ax, key, colour in zip(axes[1:], "qkv", (QUERY_COLOR, KEY_COLOR, VALUE_COLOR)):
            self.panels.append(_Panel(self.canvas, ax, labels, colour, *lim[key], f"{key} = W_{key.upper()} e",
                                      *planes[key].axis_labels("head")))
        for ax in axes:
            _origin_lines(ax)
        self.planes = planes

    def update(self, snap: Snapshot, land=None) -> None:
        g, p = snap.geom, self.planes
        pts = (p["emb"].project(g.emb), p["q"].project(g.q), p["k"].project(g.k), p["v"].project(g.v))
        for panel, xy in zip(self.panels, pts):
            panel.move(xy)


class QKMovie(FrameMovie):
    """Movie 4: queries and keys of all V x T points on common axes."""

    title = "Movie 4: query / key space"

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float, fig=None, ax=None):
        super().__init__(fig or new_figure(9, 8.4), dpi)
        ax = ax or self.fig.subplots()
        labels = g.point_labels()
        xl, yl = planes["qk"].axis_labels("head")
        self.q = _Panel(self.canvas, ax, labels, QUERY_COLOR, *lim["qk"], "queries q (blue) and keys k (red)", xl, yl)
        self.k = _Panel(self.canvas, ax, labels, KEY_COLOR, *lim["qk"], "queries q (blue) and keys k (red)", xl, yl)
        _origin_lines(ax)
        self.plane = planes["qk"]

    def move_points(self, snap: Snapshot) -> None:
        self.q.move(self.plane.project(snap.geom.q))
        self.k.move(self.plane.project(snap.geom.k))

    def update(self, snap: Snapshot, land=None) -> None:
        self.move_points(snap)


def _score_cmap():
    return matplotlib.colormaps["RdBu_r"].with_extremes(bad=MASKED_COLOR)


def _score_lut() -> np.ndarray:
    """(257, 3) uint8: RdBu_r at 256 levels from -vmax to vmax, then the masked colour."""
    cols = _score_cmap()(np.linspace(0, 1, 256))[:, :3]
    return np.rint(255 * np.vstack([cols, to_rgb(MASKED_COLOR)])).astype(np.uint8)


class QKScoresMovie(QKMovie):
    """Movie 5: the Q/K space beside the (V*T) x (V*T) pre-softmax score matrix q . k / sqrt(d_k)
    of every query point (rows) with every key point (columns), grouped into token blocks with
    positions 0..T-1 inside each; keys after the query's position are masked (grey). The colour
    scale is fixed over the movie: symmetric-logarithmic up to the largest |score| of any frame,
    linear below a thousandth of it, so that the O(1) scores of the first checkpoints and the
    hundreds of the last are both visible."""

    title = "Movie 5: query / key space and the masked score matrix"

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float):
        fig = new_figure(WIDTH, 6.0)
        left, right = fig.subplots(1, 2, width_ratios=[1, 1.12])
        super().__init__(g, planes, lim, dpi, fig=fig, ax=left)
        V, T = g.V, g.T
        n = V * T
        vmax = lim["score"]
        self.right, self.lut = right, _score_lut()
        self.norm = SymLogNorm(linthresh=vmax * 1e-3, vmin=-vmax, vmax=vmax, base=10)
        right.set_xlim(-0.5, n - 0.5), right.set_ylim(n - 0.5, -0.5)  # row 0 (query 0 at position 0) on top
        right.set_aspect("equal")
        edges = np.arange(V + 1) * T - 0.5
        segs = [[(x, -0.5), (x, n - 0.5)] for x in edges] + [[(-0.5, y), (n - 0.5, y)] for y in edges]
        self.grid = right.add_collection(LineCollection(segs, colors="0.25", linewidths=0.6))
        self.canvas.animate(self.grid)
        centres = np.arange(V) * T + (T - 1) / 2
        right.set_xticks(centres, g.labels, fontsize=TICK)
        right.set_yticks(centres, g.labels, fontsize=TICK)
        right.set_xlabel(f"key token (positions 0..{T - 1} within each block)", fontsize=AXIS)
        right.set_ylabel(f"query token (positions 0..{T - 1} within each block)", fontsize=AXIS)
        right.set_title("q . k / sqrt(d_k), keys after the query masked (grey)", fontsize=TITLE)
        bar = fig.colorbar(ScalarMappable(self.norm, _score_cmap()), ax=right, shrink=0.85, pad=0.02)
        decades = 10.0 ** np.arange(np.ceil(np.log10(vmax * 1e-2)), np.floor(np.log10(vmax)) + 1)
        bar.set_ticks(np.concatenate([-decades[::-1], [0.0], decades]))
        bar.set_label("pre-softmax score (symmetric log scale)", fontsize=AXIS)
        bar.ax.tick_params(labelsize=TICK)

    def update(self, snap: Snapshot, land=None) -> None:
        self.move_points(snap)
        S = snap.geom.masked_scaled_scores()  # (V*T, V*T), NaN = masked
        level = np.clip(np.rint(np.ma.filled(self.norm(np.nan_to_num(S)), 0.5) * 255), 0, 255)
        rgb = self.lut[np.where(np.isnan(S), 256, level).astype(np.int64)]  # (n, n, 3); index 256 = masked
        self.canvas.image(self.right, rgb[::-1])  # canvas rows run upward, matrix rows downward


class QKSequenceAttentionMovie(QKMovie):
    """Variant of Movie 5: the Q/K space beside the walkthrough sequence's T x T attention."""

    title = "Movie 5 (sequence variant): query / key space and attention"
    needs = frozenset({"trace"})

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float, trace: Trace):
        fig = new_figure(WIDTH, 5.6)
        left, right = fig.subplots(1, 2, width_ratios=[1.2, 1])
        super().__init__(g, planes, lim, dpi, fig=fig, ax=left)
        names = trace.point_labels()
        self.right, self.T = right, trace.T
        self.im = right.imshow(np.zeros((trace.T, trace.T)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        self.canvas.animate(self.im)
        if trace.T <= 32:
            right.set_xticks(range(trace.T), names, fontsize=TICK)
            right.set_yticks(range(trace.T), names, fontsize=TICK)
        right.set_xlabel("key", fontsize=AXIS), right.set_ylabel("query", fontsize=AXIS)
        seq = " ".join(trace.token_names)
        right.set_title(f"attention of {seq if len(seq) <= 60 else seq[:57] + '...'}", fontsize=TITLE)
        ii, jj = np.tril_indices(trace.T) if trace.T <= 20 else (np.zeros(0, int), np.zeros(0, int))  # annotated cells
        self.cells = (ii, jj, np.stack([jj, ii], -1).astype(float))
        bar = fig.colorbar(ScalarMappable(Normalize(0, 1), "Blues"), ax=right, shrink=0.85, pad=0.02)
        bar.set_label("attention weight", fontsize=AXIS)
        bar.ax.tick_params(labelsize=TICK)

    def update(self, snap: Snapshot, land=None) -> None:
        self.move_points(snap)
        A = snap.trace.pattern
        self.im.set_data(A)
        ii, jj, xy = self.cells
        vals = A[ii, jj]
        self.canvas.label(self.right, xy, [f"{a:.2f}" for a in vals], size=POINT, ha="center", va="center",
                          colours=["white" if a > 0.6 else "0.1" for a in vals])
