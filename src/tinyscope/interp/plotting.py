"""Small matplotlib building blocks shared by the geometry views and the movies.

Figures are created with :class:`matplotlib.figure.Figure` directly (no pyplot state), so that
a view returns a Figure that nothing else holds on to and that the garbage collector frees.
"""
from __future__ import annotations

import io

import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

import tinyscope.interp.mpl  # noqa: F401  (the Agg backend, chosen once there)

QUERY_COLOR, KEY_COLOR, VALUE_COLOR, MASKED_COLOR = "tab:blue", "tab:red", "tab:green", "0.75"
CONSTRAINED_OK, CONSTRAINED_WRONG, UNCONSTRAINED = "#4caf50", "#e53935", "#d0d0d0"


def new_figure(width: float, height: float, layout: str | None = "constrained") -> Figure:
    """A Figure with an Agg canvas. Grids of many small panels pass ``layout=None`` and place
    their axes with ``subplots_adjust``: the constrained layout engine costs as much as drawing."""
    fig = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(fig)
    return fig


def token_colors(n: int) -> list[tuple]:
    """One distinct colour per token id (tab20 for up to 20 tokens, then a hue circle)."""
    if n <= 20:
        cmap = matplotlib.colormaps["tab20"]
        order = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19]
        return [cmap.colors[order[i]] for i in range(n)]
    cmap = matplotlib.colormaps["hsv"]
    return [cmap(i / n) for i in range(n)]


def token_cmap(n: int, alpha: float = 0.45) -> ListedColormap:
    """A categorical colormap for argmax maps: token id -> its colour, lightened."""
    cols = [to_rgba(c) for c in token_colors(n)]
    return ListedColormap([(r * alpha + (1 - alpha), g * alpha + (1 - alpha), b * alpha + (1 - alpha), 1.0)
                           for r, g, b, _ in cols])


MAX_LABELS = 400  # beyond this many points a scatter is drawn without text labels


class TextLabels(Artist):
    """Many short strings at data points of one Axes, drawn as one artist.

    Equivalent to one ``ax.text`` per point, but each string goes straight to
    ``renderer.draw_text`` without a Text object's layout machinery, and the labels stay out of
    the layout engine's bounding boxes; views with hundreds of labels draw several times faster.
    ``ha`` is "left" or "center", ``va`` "bottom" or "center"; labels outside the axes are clipped.
    """

    def __init__(self, ax, xy: np.ndarray, labels: list[str], fontsize: float = 6.5, color="0.1",
                 colors: list | None = None, ha: str = "left", va: str = "bottom", weight: str = "normal"):
        super().__init__()
        self.ax = ax
        self.xy = np.asarray(xy, dtype=float).reshape(-1, 2)
        self.labels = list(labels)
        self.prop = FontProperties(size=fontsize, weight=weight)
        self.colors = colors if colors is not None else [color] * len(self.labels)
        self.ha, self.va = ha, va
        self.set_in_layout(False)
        self.set_zorder(4)
        self.set_clip_on(True)
        ax.add_artist(self)

    def set_xy(self, xy: np.ndarray) -> None:
        self.xy = np.asarray(xy, dtype=float).reshape(-1, 2)
        self.stale = True

    def get_texts(self) -> list[str]:
        return list(self.labels)

    def draw(self, renderer) -> None:
        if not self.get_visible() or not len(self.labels):
            return
        pts = self.ax.transData.transform(self.xy)  # (N, 2) display pixels, origin bottom-left
        box = self.ax.bbox
        height = renderer.get_canvas_width_height()[1]
        pad = renderer.points_to_pixels(self.prop.get_size_in_points()) * 0.15
        gc = renderer.new_gc()
        gc.set_clip_rectangle(box)
        sizes: dict[str, tuple[float, float, float]] = {}
        for (x, y), text, colour in zip(pts, self.labels, self.colors):
            if not (box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1):
                continue
            if self.ha == "center" or self.va == "center":
                if text not in sizes:
                    sizes[text] = renderer.get_text_width_height_descent(text, self.prop, ismath=False)
                w, h, d = sizes[text]
            else:
                w = h = d = 0.0
            tx = x - w / 2 if self.ha == "center" else x + pad
            ty = y - (h - d) / 2 if self.va == "center" else y + pad
            gc.set_foreground(colour)
            renderer.draw_text(gc, tx, height - ty if renderer.flipy() else ty, text, self.prop, 0.0)
        gc.restore()
        self.stale = False


def labelled_points(ax, pts: np.ndarray, labels: list[str], colors, size: float = 14, fontsize: float = 6.5,
                    alpha: float = 1.0):
    """Scatter 2-D points with a text label beside each (up to MAX_LABELS points); returns
    (PathCollection, TextLabels or None)."""
    pts = np.asarray(pts).reshape(-1, 2)
    sc = ax.scatter(pts[:, 0], pts[:, 1], s=size, c=colors, alpha=alpha, linewidths=0, zorder=3)
    if len(pts) > MAX_LABELS:
        return sc, None
    return sc, TextLabels(ax, pts, labels, fontsize=fontsize)


def heatmap(ax, M: np.ndarray, row_labels=None, col_labels=None, cmap: str = "RdBu_r", annotate: bool = True,
            symmetric: bool = True, fmt: str = "{:.2f}", vmin=None, vmax=None, fontsize: float = 7):
    """A matrix as a heatmap with optional value annotations; NaN / -inf cells are drawn blank."""
    M = np.asarray(M, dtype=np.float64)
    finite = M[np.isfinite(M)]
    if vmin is None and vmax is None and finite.size:
        if symmetric:
            m = float(np.abs(finite).max()) or 1.0
            vmin, vmax = -m, m
        else:
            vmin, vmax = float(finite.min()), float(finite.max())
    shown = np.where(np.isfinite(M), M, np.nan)
    im = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if row_labels is not None:
        ax.set_yticks(range(len(row_labels)), row_labels, fontsize=fontsize)
    if col_labels is not None:
        ax.set_xticks(range(len(col_labels)), col_labels, fontsize=fontsize)
    if annotate and M.size <= 400:
        cells = [(j, i, val) for (i, j), val in np.ndenumerate(M) if np.isfinite(val)]
        if cells:
            rgba = im.cmap(im.norm(np.array([c[2] for c in cells])))  # (N, 4) cell colours
            dark = rgba[:, :3] @ np.array([0.299, 0.587, 0.114]) < 0.5
            TextLabels(ax, np.array([c[:2] for c in cells], dtype=float), [fmt.format(c[2]) for c in cells],
                       fontsize=fontsize - 1, ha="center", va="center",
                       colors=["white" if d else "0.1" for d in dark])
    return im


def matrix_inset(ax, W: np.ndarray | None, name: str) -> None:
    """Draw a small annotated heatmap of W in the lower-right corner of ax (Fig. 6 insets)."""
    if W is None or W.size > 16:
        return
    inset = ax.inset_axes([0.70, 0.02, 0.28, 0.28])
    heatmap(inset, W, annotate=True, fontsize=6)
    inset.set_xticks([])
    inset.set_yticks([])
    inset.set_title(name, fontsize=7, pad=1)


def set_plane_axes(ax, plane, space: str, title: str) -> None:
    xl, yl = plane.axis_labels(space)
    ax.set_xlabel(xl, fontsize=8)
    ax.set_ylabel(yl, fontsize=8)
    ax.set_title(title + (f"\n[{plane.note}]" if plane.note else ""), fontsize=9)
    ax.tick_params(labelsize=7)


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """PNG bytes of a figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def figure_rgb(fig: Figure) -> np.ndarray:
    """The figure drawn by Agg, as an (H, W, 3) uint8 array (a fresh copy)."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
