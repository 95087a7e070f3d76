"""FrameCanvas draws what matplotlib draws: pasted heatmaps equal imshow, pooled markers equal
scatter, and labels sit at their points from the first frame on."""
import numpy as np

from tinyscope.interp.frame_canvas import FrameCanvas
from tinyscope.interp.plotting import new_figure


def _axes(dpi=50):
    fig = new_figure(4, 3)
    ax = fig.subplots()
    ax.set_xlim(-1, 3), ax.set_ylim(0, 2)
    return fig, ax, FrameCanvas(fig, dpi)


def _reference(draw, dpi=50) -> np.ndarray:
    """The same axes drawn by matplotlib alone (no layout engine after the first draw)."""
    fig, ax, _ = _axes(dpi)
    fig.canvas.draw()
    fig.set_layout_engine("none")
    draw(ax)
    ax.set_xlim(-1, 3), ax.set_ylim(0, 2)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int), ax


def test_image_equals_imshow_with_nearest_sampling():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, size=(7, 11, 3)).astype(np.uint8)  # row 0 at the bottom
    fig, ax, canvas = _axes()
    canvas.image(ax, rgb)
    got = canvas.render().astype(int)
    want, ref_ax = _reference(lambda a: a.imshow(rgb, origin="lower", extent=(-1, 3, 0, 2), aspect="auto",
                                                 interpolation="nearest"))
    b = ref_ax.bbox
    H = want.shape[0]
    inner = (slice(int(H - b.y1) + 2, int(H - b.y0) - 2), slice(int(b.x0) + 2, int(b.x1) - 2))  # off the spines
    same = (np.abs(got[inner] - want[inner]).max(-1) == 0).mean()
    assert same > 0.97  # only pixels on cell boundaries may round the other way
    assert (got[inner] != 255).any()  # something was drawn


def test_dots_equal_scatter():
    xy = np.array([[0.0, 0.5], [1.0, 1.0], [2.5, 1.5]])
    colours = ["tab:red", "tab:blue", "tab:green"]
    fig, ax, canvas = _axes()
    canvas.dots(ax, xy, colours, size=40)
    canvas.dots(ax, np.array([[5.0, 5.0]]), "k", size=40)  # outside the axes: dropped
    got = canvas.render().astype(int)
    want, _ = _reference(lambda a: a.scatter(xy[:, 0], xy[:, 1], s=40, c=colours, linewidths=0))
    diff = np.abs(got - want).max(-1)
    assert (diff > 40).mean() < 0.002 and (np.abs(want - 255).max(-1) > 40).sum() > 30


def test_labels_of_the_first_frame_sit_at_their_points():
    fig, ax, canvas = _axes()
    canvas.label(ax, np.array([[1.0, 1.0]]), ["X"], size=12, ha="center", va="center", colour="k")
    frame = canvas.render()  # the label was queued before the layout engine placed the axes
    x, y = ax.transData.transform((1.0, 1.0))
    row = frame.shape[0] - y
    ys, xs = np.nonzero(frame.max(-1) < 100)
    near = (np.abs(xs - x) < 15) & (np.abs(ys - row) < 15)
    assert near.sum() > 5 and abs(xs[near].mean() - x) < 2 and abs(ys[near].mean() - row) < 3
