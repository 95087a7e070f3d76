"""The print checks find each kind of defect a reviewer flags, and pass a clean figure."""
import numpy as np

from tinyscope.interp.figure_lint import PrintSpec, lint, print_scale
from tinyscope.interp.plotting import labelled_points, new_figure


def _clean(layout="constrained"):
    fig = new_figure(6, 3, layout=layout)
    ax = fig.subplots()
    im = ax.imshow(np.arange(12.0).reshape(3, 4))
    ax.set_xlabel("x", fontsize=8), ax.set_ylabel("y", fontsize=8), ax.set_title("t", fontsize=8)
    ax.tick_params(labelsize=8)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label("value", fontsize=8)
    cb.ax.tick_params(labelsize=8)
    return fig, ax


def test_a_clean_figure_passes():
    fig, _ = _clean()
    assert lint(fig) == []


def test_each_defect_is_reported():
    fig = new_figure(14, 4)  # prints at half size: 8 pt fonts become 4 pt
    a, b = fig.subplots(1, 2)
    a.imshow(np.eye(3))  # no labels, no colour bar
    labelled_points(b, np.array([[0.9, 0.1], [0.5, 0.5]]), ["p", "q"], "k", fontsize=6)
    b.set_xlabel("x"), b.set_ylabel("y")
    b.inset_axes([0.7, 0.0, 0.3, 0.3]).plot([0, 1])  # covers the point at (0.9, 0.1)
    b.text(0.2, 0.8, "one label", transform=b.transAxes), b.text(0.2, 0.8, "its twin", transform=b.transAxes)
    kinds = " | ".join(lint(fig))
    assert "has no x label" in kinds and "no colour bar or legend" in kinds
    assert "small font" in kinds and "point labels" in kinds
    assert "text 'one label' and text 'its twin'" in kinds or "text 'its twin' and text 'one label'" in kinds
    assert "covers 1 points" in kinds
    assert print_scale(fig, PrintSpec(width_in=7)) == 0.5


def test_text_past_the_edge_is_clipped():
    fig, ax = _clean(layout=None)  # no layout engine to make room for the note
    ax.text(1.4, 0.5, "far too long a note for this place", transform=ax.transAxes, fontsize=8)
    assert any(p.startswith("clipped") for p in lint(fig))
