"""Print sizes of the walkthrough figures and the small helpers that apply them.

Every figure is drawn at most ``WIDTH`` inches wide, the text width of a two-column paper, so
it prints at (nearly) its own size: the font sizes below are the printed sizes (>= 7 pt for
text, >= 6 pt for the point labels of 96-point clouds), checked by
:func:`tinyscope.interp.figure_lint.lint` in the tests.
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from tinyscope.interp.plotting import heatmap, token_colors

WIDTH = 7.2  # inches: the widest figure
TICK, LABEL, TITLE, SUPTITLE = 7.5, 8.0, 8.5, 9.5  # points
POINT = 6.5  # point labels of the scatters and cell values of heatmaps
BIG_POINT = 7.5  # labels of a handful of points (one sequence)


def axes_text(ax, xlabel: str, ylabel: str, title: str | None = None) -> None:
    """Axis labels, title and tick labels at the print sizes."""
    ax.set_xlabel(xlabel, fontsize=LABEL)
    ax.set_ylabel(ylabel, fontsize=LABEL)
    if title is not None:
        ax.set_title(title, fontsize=TITLE)
    ax.tick_params(labelsize=TICK)


def grid_labels(fig, xlabel: str, ylabel: str) -> None:
    """One x and one y label for a grid of panels that share their axes."""
    fig.supxlabel(xlabel, fontsize=LABEL)
    fig.supylabel(ylabel, fontsize=LABEL)


def plane_axes(ax, plane, space: str, title: str) -> None:
    """Axes of a plane (``dim 1`` / ``PC 1 (61%)``) with its projection note in the title."""
    xl, yl = plane.axis_labels(space)
    axes_text(ax, xl, yl, title + (f"\n[{plane.note}]" if plane.note else ""))


def colorbar(fig, im, ax, label: str, **kw):
    """A colour bar beside ``ax`` with its label and ticks at the print sizes."""
    cb = fig.colorbar(im, ax=ax, **({"shrink": 0.9, "pad": 0.02} | kw))
    cb.set_label(label, fontsize=LABEL)
    cb.ax.tick_params(labelsize=TICK)
    return cb


def value_heatmap(fig, ax, M, rows, cols, xlabel: str, ylabel: str, title: str, cbar: str, **kw):
    """An annotated heatmap with labelled axes and a colour bar (most of Fig. 5, 11-15)."""
    kw = {"fontsize": POINT + 1} | kw
    im = heatmap(ax, M, rows, cols, **kw)
    axes_text(ax, xlabel, ylabel, title)
    colorbar(fig, im, ax, cbar)
    return im


def token_legend(fig, labels: list[str], title: str = "predicted token", ncol: int | None = None, alpha=0.45,
                 loc: str = "outside lower center"):
    """A legend of the argmax colours (one patch per token), below the figure's panels."""
    cols = token_colors(len(labels))
    light = [tuple(c * alpha + (1 - alpha) for c in col[:3]) for col in cols]
    handles = [Patch(facecolor=c, edgecolor="0.5", lw=0.4, label=lab) for c, lab in zip(light, labels)]
    return fig.legend(handles=handles, loc=loc, ncol=ncol or min(len(labels), 12), fontsize=TICK,
                      title=title, title_fontsize=LABEL, frameon=False, handlelength=1.2, columnspacing=0.8)


def dims(n: int, prefix: str = "d") -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(n)]


def symmetric_limits(M: np.ndarray) -> tuple[float, float]:
    finite = np.asarray(M, dtype=float)[np.isfinite(M)]
    m = float(np.abs(finite).max()) if finite.size else 1.0
    return -(m or 1.0), (m or 1.0)
