"""Print checks for a matplotlib Figure: what a reviewer flags before a figure goes into a paper.

A figure printed at ``PrintSpec.width_in`` inches (a two-column paper's text width, 7 in) is
scaled by ``s = min(1, width_in / figure width)``; a font of ``p`` points prints at ``s * p``.
:func:`lint` draws the figure once and returns one line per problem:

* ``unlabelled``: an axes that shows data (images, collections, lines, patches) with the axis
  on but no x or y label, or an image whose colour has no key (colour bar or legend in the
  figure). Colour-bar axes and axes with the axis off (diagrams) are exempt from the labels.
* ``small font``: a text that prints below ``min_pt`` (titles, labels, ticks, legends,
  annotations), or a point label of a scatter (:class:`~tinyscope.interp.plotting.TextLabels`)
  below ``min_label_pt``.
* ``clipped``: a text that runs past the edge of the figure.
* ``overlap``: two texts whose boxes intersect, a text of one axes (or of the figure) over
  another axes' plot area, or one axes (an inset) covering scatter points of another.

Point labels of a scatter are exempt from the overlap checks: dense clouds overlap by nature.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox


@dataclass(frozen=True)
class PrintSpec:
    """width_in: printed width of the figure (inches); min_pt / min_label_pt: smallest printed
    font of texts / of scatter point labels; tolerance_px: overlap allowed at 100 dpi."""

    width_in: float = 7.0
    min_pt: float = 7.0
    min_label_pt: float = 6.0
    tolerance_px: float = 1.0


def print_scale(fig, spec: PrintSpec = PrintSpec()) -> float:
    """The factor a figure's fonts are scaled by when printed at ``spec.width_in``."""
    return min(1.0, spec.width_in / float(fig.get_figwidth()))


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _has_data(ax) -> bool:
    return bool(ax.images or [c for c in ax.collections if len(_offsets(c)) or c.get_paths()]
                or [ln for ln in ax.lines if len(ln.get_xdata())] or ax.patches)


def _offsets(c: Collection) -> np.ndarray:
    off = c.get_offsets()
    return np.asarray(off, dtype=float).reshape(-1, 2) if off is not None else np.zeros((0, 2))


def _all_axes(fig) -> list:
    """The figure's axes and their insets (``child_axes``), recursively."""
    out, todo = [], list(fig.axes)
    while todo:
        ax = todo.pop(0)
        if ax not in out:
            out.append(ax)
            todo += list(getattr(ax, "child_axes", []))
    return out


def _texts(fig) -> tuple[list[Text], dict[int, object]]:
    """Every visible, non-empty Text of the figure, and the axes owning each (tick labels
    included: of those, only the drawn ones; matplotlib keeps labels of ticks outside the view)."""
    all_ticks, drawn, owner = set(), set(), {}
    for ax in _all_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.majorTicks + axis.minorTicks:
                all_ticks |= {id(tick.label1), id(tick.label2)}
                owner |= {id(tick.label1): ax, id(tick.label2): ax}
            if not (axis.get_visible() and ax.get_visible() and ax.axison):
                continue
            for tick in axis._update_ticks():
                drawn |= {id(lab) for lab in (tick.label1, tick.label2) if lab.get_visible()}
            owner[id(axis.label)] = ax
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or t.get_alpha() == 0 or t.figure is None:
            continue
        if id(t) in all_ticks and id(t) not in drawn:
            continue
        out.append(t)
        owner.setdefault(id(t), t.axes)
    return out, owner


def _point_labels(fig) -> list:
    from tinyscope.interp.plotting import TextLabels

    return [a for ax in fig.axes for a in ax.get_children() if isinstance(a, TextLabels) and a.get_visible()]


def _name(t: Text) -> str:
    return repr(t.get_text()[:40])


def _where(ax) -> str:
    title = ax.get_title() or ax.get_title(loc="left")
    return f"axes {title[:40]!r}" if title else f"axes at {tuple(round(float(v), 2) for v in ax.get_position().bounds)}"


def lint(fig, spec: PrintSpec = PrintSpec()) -> list[str]:
    """The problems of ``fig`` printed at ``spec`` (an empty list: none)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    scale = print_scale(fig, spec)
    problems: list[str] = []
    has_legend = bool(fig.legends) or any(ax.get_legend() is not None for ax in fig.axes)
    data_axes = [ax for ax in _all_axes(fig) if ax.get_visible() and not _is_colorbar(ax)]
    keyed = {_key(cb_ax._colorbar.mappable) for cb_ax in _all_axes(fig) if _is_colorbar(cb_ax)}
    for ax in data_axes:
        if not _has_data(ax):
            continue
        xl, yl = _label(ax, "x"), _label(ax, "y")
        if ax.axison and not (xl and yl):
            problems.append(f"unlabelled: {_where(ax)} has no {'x' if not xl else 'y'} label")
        for im in ax.images:
            if _colour_means_something(im) and _key(im) not in keyed and not has_legend:
                problems.append(f"unlabelled: {_where(ax)} shows an image with no colour bar or legend")
    texts, owners = _texts(fig)
    texts = [t for t in texts if _drawn(t, renderer)]
    for t in texts:
        printed = t.get_fontsize() * scale
        if printed < spec.min_pt - 1e-6:
            problems.append(f"small font: {_name(t)} prints at {printed:.1f} pt (< {spec.min_pt:g})")
    for lab in _point_labels(fig):
        printed = lab.prop.get_size_in_points() * scale
        if printed < spec.min_label_pt - 1e-6:
            problems.append(f"small font: point labels of {_where(lab.ax)} print at {printed:.1f} pt "
                            f"(< {spec.min_label_pt:g})")
    fig_box = fig.bbox
    for t in texts:
        box = t.get_window_extent(renderer)
        if box.x0 < fig_box.x0 - 1 or box.x1 > fig_box.x1 + 1 or box.y0 < fig_box.y0 - 1 or box.y1 > fig_box.y1 + 1:
            problems.append(f"clipped: text {_name(t)} runs past the edge of the figure")
    problems += _text_overlaps(texts, owners, renderer, fig, spec)
    problems += _covered_points(data_axes, renderer, fig)
    return problems


def _label(ax, which: str) -> str:
    """The axes' own x/y label, else one of an axes sharing that axis with it (a twin, a column
    of a grid), else the shared label of its (sub)figure (``supxlabel``)."""
    def own(a) -> str:
        return (a.get_xlabel() if which == "x" else a.get_ylabel()).strip()

    shared = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
    for a in [ax] + [a for a in shared.get_siblings(ax) if a is not ax]:
        if own(a):
            return own(a)
    fig = ax.get_figure(root=False)
    while fig is not None:
        sup = getattr(fig, f"_sup{which}label", None)
        if sup is not None and sup.get_text().strip():
            return sup.get_text().strip()
        parent = getattr(fig, "_parent", None)
        fig = parent if parent is not fig else None
    return ""


def _key(mappable) -> tuple:
    """What a colour bar keys: the colormap and its limits (one bar may serve a grid of panels)."""
    return (mappable.get_cmap().name, *np.round(mappable.get_clim(), 9))


def _colour_means_something(im: AxesImage) -> bool:
    """A colour-mapped image (2-D array), unless marked ``gid="no-key"`` (its colours are keyed
    by text written on it, e.g. labelled regions, or by the title)."""
    arr = im.get_array()
    return arr is not None and np.ndim(arr) == 2 and im.get_gid() != "no-key"


def _drawn(t: Text, renderer) -> bool:
    """The text is drawn inside the figure (tick labels outside their axes' view are not)."""
    try:
        box = t.get_window_extent(renderer)
    except (RuntimeError, ValueError):
        return False
    if box.width <= 0 or box.height <= 0:
        return False
    fig_box = t.figure.bbox
    return box.x1 > fig_box.x0 and box.x0 < fig_box.x1 and box.y1 > fig_box.y0 and box.y0 < fig_box.y1


def _shrink(box: Bbox, px: float) -> Bbox:
    return Bbox.from_extents(box.x0 + px, box.y0 + px, box.x1 - px, box.y1 - px)


def _text_overlaps(texts: list[Text], owners: dict, renderer, fig, spec: PrintSpec) -> list[str]:
    px = spec.tolerance_px * fig.dpi / 100.0
    boxes = [_shrink(t.get_window_extent(renderer), px) for t in texts]
    out = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if boxes[i].overlaps(boxes[j]):
                out.append(f"overlap: text {_name(texts[i])} and text {_name(texts[j])} at "
                           f"{tuple(int(v) for v in boxes[i].extents)}")
    plot_axes = [ax for ax in _all_axes(fig) if ax.get_visible() and ax.axison and not _is_colorbar(ax)]
    legends = _legend_texts(fig)
    for t, box in zip(texts, boxes):
        if id(t) in legends:
            continue
        owner = owners.get(id(t))
        for ax in plot_axes:
            if ax is owner or _inset_of(ax, owner):
                continue
            if box.overlaps(_shrink(ax.bbox, px)):
                out.append(f"overlap: text {_name(t)} lies over {_where(ax)}")
    for leg in _legends(fig):
        lbox = _shrink(leg.get_window_extent(renderer), px)
        for ax in plot_axes:
            if leg.axes is ax or _twins(ax, leg.axes):
                continue
            if lbox.overlaps(_shrink(ax.bbox, px)):
                out.append(f"overlap: a legend lies over {_where(ax)}")
    return out


def _legends(fig) -> list[Legend]:
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]


def _legend_texts(fig) -> set[int]:
    ids = set()
    for leg in _legends(fig):
        ids |= {id(t) for t in leg.get_texts()}
        ids.add(id(leg.get_title()))
    return ids


def _twins(ax, other) -> bool:
    """Two axes drawn on the same area (``twinx`` / ``twiny``)."""
    return other is not None and ax.bbox.bounds == other.bbox.bounds and (
        ax.get_shared_x_axes().joined(ax, other) or ax.get_shared_y_axes().joined(ax, other))


def _inset_of(ax, owner) -> bool:
    """``ax`` is ``owner``'s inset or ``owner`` is ``ax``'s (a text of one may sit on the other)."""
    if owner is None:
        return False
    return ax in getattr(owner, "child_axes", []) or owner in getattr(ax, "child_axes", [])


def _covered_points(data_axes: list[Axes], renderer, fig) -> list[str]:
    out = []
    for ax in data_axes:
        pts = [ax.transData.transform(_offsets(c)) for c in ax.collections if len(_offsets(c))]
        if not pts:
            continue
        pts = np.concatenate(pts, 0)  # (N, 2) display pixels
        for other in _all_axes(fig):
            if other is ax or not other.get_visible():
                continue
            box = other.bbox
            if not box.overlaps(ax.bbox):
                continue
            inside = (pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
            if inside.any():
                out.append(f"overlap: {_where(other)} covers {int(inside.sum())} points of {_where(ax)}")
    return out
