"""Fast frames for movies: draw a figure's fixed parts once, then only what moves.

Movie axes are fixed across frames, so the axes, ticks, labels and panel titles are drawn once
and kept as a background bitmap (matplotlib blitting). Each frame restores that bitmap, draws
the moving artists (scatter collections, lines) with ``Figure.draw_artist`` and then stamps
the many short point labels with Pillow, which is two orders of magnitude faster than drawing
hundreds of matplotlib Text objects per frame. Heatmaps that fill an axes are written straight
into the pixel buffer beneath the artists (:meth:`FrameCanvas.image`, the nearest-neighbour
equivalent of ``imshow``, which costs tens of milliseconds per image). The frame is returned as
an RGB array.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from matplotlib import font_manager
from matplotlib.collections import CircleCollection
from matplotlib.colors import to_rgb, to_rgba_array
from matplotlib.transforms import IdentityTransform
from PIL import Image, ImageDraw, ImageFont

_ANCHORS = {("left", "bottom"): "ld", ("center", "center"): "mm", ("center", "top"): "mt", ("left", "top"): "lt",
            ("left", "center"): "lm"}


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
        self._images: list[tuple] = []
        self._dots: dict[tuple, list] = {}  # (size, edge colour, edge width) -> [(pixels, RGBA colours)]
        self._dot_layers: dict[tuple, CircleCollection] = {}

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

    def image(self, ax, rgb: np.ndarray) -> None:
        """Queue an (h, w, 3) uint8 image to fill the box of ``ax`` in the next frame, row 0 at the
        bottom, beneath the animated artists: what ``ax.imshow(rgb, origin="lower", extent=(*xlim,
        *ylim), interpolation="nearest")`` draws when the extent is the axes' limits."""
        h, w = rgb.shape[:2]
        rgba = np.full((h, w, 4), 255, dtype=np.uint8)  # (h, w, 4), opaque
        rgba[..., :3] = rgb[..., :3]
        self._images.append((ax, rgba.view(np.uint32)[..., 0]))  # (h, w): one word per pixel, gathered at once

    def _paste_images(self, buf: np.ndarray) -> None:
        H = buf.shape[0]
        words = buf.view(np.uint32)[..., 0]  # (H, W) view of the RGBA buffer
        for ax, packed in self._images:
            box = ax.bbox
            x0, x1 = int(round(box.x0)), int(round(box.x1))
            top, bottom = int(round(H - box.y1)), int(round(H - box.y0))
            if x1 <= x0 or bottom <= top:
                continue
            h, w = packed.shape
            rows = h - 1 - ((2 * np.arange(bottom - top) + 1) * h // (2 * (bottom - top)))  # at pixel centres, top first
            cols = (2 * np.arange(x1 - x0) + 1) * w // (2 * (x1 - x0))
            words[top:bottom, x0:x1] = packed.take(rows, 0).take(cols, 1)
        self._images.clear()

    def dots(self, ax, xy: np.ndarray, colours, size: float = 14, edge=None, linewidth: float = 0.0) -> None:
        """Queue round markers at data coordinates ``xy`` (N, 2) of ``ax`` for the next frame, as
        ``ax.scatter(..., s=size, c=colours, edgecolors=edge, linewidths=linewidth)`` draws them;
        markers outside the axes are dropped. The markers of every axes with the same style are
        drawn as one collection (one draw call per frame instead of one per panel), above the
        images and animated artists and beneath the labels."""
        if self._background is None:
            self.freeze()
        pts = ax.transData.transform(np.asarray(xy, dtype=float).reshape(-1, 2))  # (N, 2) pixels
        rgba = np.broadcast_to(to_rgba_array(colours), (len(pts), 4))  # (N, 4)
        box = ax.bbox
        keep = (pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)
        key = (float(size), None if edge is None else tuple(to_rgba_array(edge)[0]), float(linewidth))
        self._dots.setdefault(key, []).append((pts[keep], rgba[keep]))

    def _draw_dots(self) -> None:
        for key, layer in self._dot_layers.items():
            if key not in self._dots:
                layer.set_offsets(np.zeros((0, 2)))
        for key, parts in self._dots.items():
            if key not in self._dot_layers:
                size, edge, lw = key
                layer = CircleCollection([size], offset_transform=IdentityTransform(), linewidths=lw,
                                         edgecolors="none" if edge is None else [edge])
                layer.set_figure(self.fig)
                layer.set_animated(True)
                self._dot_layers[key] = layer
            layer = self._dot_layers[key]
            layer.set_offsets(np.concatenate([p for p, _ in parts]))
            layer.set_facecolors(np.concatenate([c for _, c in parts]))
            self.fig.draw_artist(layer)
        self._dots.clear()

    def label(self, ax, xy: np.ndarray, texts: list[str], colour="0.1", size: float = 6.5, ha: str = "left",
              va: str = "bottom", bold: bool = False, colours: list | None = None) -> None:
        """Queue text at data coordinates ``xy`` (N, 2) of ``ax`` for the next frame; labels whose
        anchor falls outside the axes are dropped (the axes clip them, as matplotlib would). The
        layout is fixed first, so that data coordinates map to the pixels the frame will have."""
        if self._background is None:
            self.freeze()
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
        xs, ys = np.rint(disp[:, 0]).astype(int).tolist(), np.rint(disp[:, 1]).astype(int).tolist()
        self._labels.append((list(zip(xs, ys)), texts, px, cols, _ANCHORS[(ha, va)], bold))

    def render(self) -> np.ndarray:
        """The current frame as an (H, W, 3) uint8 array; clears the queued labels."""
        if self._background is None:
            self.freeze()
        canvas = self.fig.canvas
        canvas.restore_region(self._background)
        rgba = np.asarray(canvas.buffer_rgba())  # (H, W, 4) view of the renderer's buffer
        self._paste_images(rgba)
        for a in self.dynamic:
            self.fig.draw_artist(a)
        self._draw_dots()
        H, W = rgba.shape[:2]
        img = Image.frombuffer("RGBA", (W, H), rgba, "raw", "RGBA", 0, 1).convert("RGB")  # a copy, in C
        for disp, texts, px, cols, anchor, bold in self._labels:
            for (x, y), text, col in zip(disp, texts, cols):
                mask, dx, dy = _stamp(text, px, anchor, bold)
                img.paste(col, (x + dx, H - y + dy), mask)
        self._labels.clear()
        return np.asarray(img)
