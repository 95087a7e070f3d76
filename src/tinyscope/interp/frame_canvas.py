"""Fast frames for movies: draw a figure's fixed parts once, then only what moves.

Movie axes are fixed across frames, so the axes, ticks, labels and panel titles are drawn once
and kept as a background bitmap (matplotlib blitting). Each frame restores that bitmap, draws
the moving artists (scatter collections, images) with ``Figure.draw_artist`` and then stamps
the many short point labels with Pillow, which is two orders of magnitude faster than drawing
hundreds of matplotlib Text objects per frame. The frame is returned as an RGB array.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from matplotlib import font_manager
from matplotlib.colors import to_rgb
from PIL import Image, ImageDraw, ImageFont

_ANCHORS = {("left", "bottom"): "ld", ("center", "center"): "mm", ("center", "top"): "mt", ("left", "top"): "lt"}


@lru_cache(maxsize=32)
def _font(px: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    path = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans",
                                                             weight="bold" if bold else "normal"))
    return ImageFont.truetype(path, max(6, px))


@lru_cache(maxsize=8192)
def _stamp(text: str, px: int, anchor: str, bold: bool) -> tuple[Image.Image, int, int]:
    """A rendered label as an 8-bit mask and its offset from the anchor point (cached)."""
    font = _font(px, bold)
    left, top, right, bottom = font.getbbox(text, anchor=anchor)
    mask = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(mask).text((-left, -top), text, fill=255, font=font, anchor=anchor)
    return mask, left, top


def _rgb255(colour) -> tuple[int, int, int]:
    return tuple(int(round(255 * c)) for c in to_rgb(colour))


class FrameCanvas:
    """Wraps a Figure (with an Agg canvas) for frame-by-frame rendering."""

    def __init__(self, fig, dpi: float):
        self.fig = fig
        fig.set_dpi(dpi)
        self.dynamic: list = []
        self._background = None
        self._labels: list[tuple] = []

    def animate(self, *artists) -> None:
        """Mark artists that change from frame to frame (they are left out of the background)."""
        for a in artists:
            a.set_animated(True)
            self.dynamic.append(a)

    def freeze(self) -> None:
        """Draw the fixed parts once (running the layout engine), then keep the layout as it is."""
        canvas = self.fig.canvas
        canvas.draw()
        self._background = canvas.copy_from_bbox(self.fig.bbox)
        self.fig.set_layout_engine("none")

    def label(self, ax, xy: np.ndarray, texts: list[str], colour="0.1", size: float = 6.5, ha: str = "left",
              va: str = "bottom", bold: bool = False, colours: list | None = None) -> None:
        """Queue text at data coordinates ``xy`` (N, 2) of ``ax`` for the next frame; labels whose
        anchor falls outside the axes are dropped (the axes clip them, as matplotlib would)."""
        if ax is None:
            disp = np.asarray(xy, dtype=float).reshape(-1, 2)
        else:
            disp = ax.transData.transform(np.asarray(xy, dtype=float).reshape(-1, 2))  # (N, 2) pixels
            box = ax.bbox
            keep = (disp[:, 0] >= box.x0) & (disp[:, 0] <= box.x1) & (disp[:, 1] >= box.y0) & (disp[:, 1] <= box.y1)
            disp, texts = disp[keep], [t for t, k in zip(texts, keep) if k]
            if colours is not None:
                colours = [c for c, k in zip(colours, keep) if k]
        px = int(round(size * self.fig.dpi / 72))
        cols = [_rgb255(c) for c in colours] if colours is not None else [_rgb255(colour)] * len(texts)
        self._labels.append((disp, texts, px, cols, _ANCHORS[(ha, va)], bold))

    def render(self) -> np.ndarray:
        """The current frame as an (H, W, 3) uint8 array; clears the queued labels."""
        if self._background is None:
            self.freeze()
        canvas = self.fig.canvas
        canvas.restore_region(self._background)
        for a in self.dynamic:
            self.fig.draw_artist(a)
        rgba = np.asarray(canvas.buffer_rgba())  # (H, W, 4) view of the renderer's buffer
        H, W = rgba.shape[:2]
        img = Image.frombuffer("RGBA", (W, H), rgba, "raw", "RGBA", 0, 1).convert("RGB")  # a copy, in C
        for disp, texts, px, cols, anchor, bold in self._labels:
            for (x, y), text, col in zip(disp, texts, cols):
                mask, dx, dy = _stamp(text, px, anchor, bold)
                img.paste(col, (int(round(x)) + dx, int(round(H - y)) + dy), mask)
        self._labels.clear()
        return np.asarray(img)
