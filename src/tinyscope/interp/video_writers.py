"""Frame-by-frame video writers that never hold more than one frame in memory.

:class:`GifStream` writes an animated GIF89a incrementally: each frame is palettised and
LZW-encoded by Pillow as a one-frame GIF, whose image block is copied into the open file with
its palette as a local colour table. (Pillow's own multi-frame writer, and imageio's on top of
it, collect every frame before writing.) :class:`Mp4Stream` streams raw RGB frames into the
ffmpeg binary of ``imageio-ffmpeg`` (a dependency; its wheel ships the binary).
"""
from __future__ import annotations

import io
import shutil
import struct
from pathlib import Path

import numpy as np
from PIL import Image


def ffmpeg_executable() -> str | None:
    """Path of the ffmpeg binary MP4s are written with (imageio-ffmpeg's own, else one on PATH),
    or None when there is none."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:  # not installed, or its binary is missing
        return shutil.which("ffmpeg")


def _skip_sub_blocks(data: bytes, i: int) -> int:
    """Index just past a chain of GIF data sub-blocks starting at ``i`` (ends with a 0 byte)."""
    while data[i]:
        i += data[i] + 1
    return i + 1


def make_palette(*frames: np.ndarray, colors: int = 256) -> Image.Image:
    """A palette image (mode P) of the ``colors`` most frequent exact colours of sample frames
    (e.g. a movie's first and last). Plots are mostly flat colours, so white stays white and
    each token keeps its colour; anti-aliased edges map to their nearest entry."""
    pixels = np.concatenate([np.ascontiguousarray(f[..., :3]).reshape(-1, 3) for f in frames], 0).astype(np.int64)
    key = (pixels[:, 0] << 16) | (pixels[:, 1] << 8) | pixels[:, 2]  # (N,)
    values, counts = np.unique(key, return_counts=True)
    top = values[np.argsort(-counts, kind="stable")[:colors]]
    table = np.stack([(top >> 16) & 255, (top >> 8) & 255, top & 255], -1).astype(np.uint8)  # (K, 3)
    table = np.concatenate([table, np.repeat(table[:1], colors - len(table), 0)]) if len(table) < colors else table
    palette = Image.new("P", (1, 1))
    palette.putpalette(table.ravel().tolist())
    return palette


def gif_image_block(frame: np.ndarray, palette: Image.Image | None = None) -> tuple[bytes, int, int]:
    """(image descriptor + local colour table + LZW data, width, height) of one RGB frame, mapped
    to ``palette`` (fast) or to a palette fitted to this frame alone."""
    img = Image.fromarray(np.ascontiguousarray(frame[..., :3]), "RGB")
    if palette is not None:
        img = img.quantize(palette=palette, dither=Image.Dither.NONE)
    else:
        img = img.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    img.save(buf, format="GIF")
    data = buf.getvalue()
    width, height, packed = struct.unpack("<HHB", data[6:11])
    i = 13
    gct, gct_bits = b"", 0
    if packed & 0x80:
        gct_bits = packed & 0x07
        size = 3 * (1 << (gct_bits + 1))
        gct, i = data[i:i + size], i + size
    while data[i] != 0x2C:  # skip extensions until the image descriptor
        if data[i] != 0x21:
            raise ValueError(f"unexpected GIF block 0x{data[i]:02x}")
        i = _skip_sub_blocks(data, i + 2)
    desc = bytearray(data[i:i + 10])
    i += 10
    if desc[9] & 0x80:  # the frame already carries a local table: keep it
        lct_size = 3 * (1 << ((desc[9] & 0x07) + 1))
        table, i = data[i:i + lct_size], i + lct_size
    else:
        desc[9] = (desc[9] & 0x40) | 0x80 | gct_bits
        table = gct
    start = i
    i = _skip_sub_blocks(data, i + 1)  # LZW minimum code size, then the data sub-blocks
    return bytes(desc) + table + data[start:i], width, height


class GifStream:
    """An animated GIF written one frame at a time; ``with GifStream(path, fps) as g: g.write(rgb)``.

    With a shared ``palette`` (see :func:`make_palette`) each frame is only mapped to it, which is
    several times faster than fitting a palette per frame and keeps colours steady."""

    def __init__(self, path: str | Path, fps: float = 8.0, loop: int = 0, palette: Image.Image | None = None):
        self.path = Path(path)
        self.palette = palette
        self.delay = max(2, int(round(100 / fps)))  # centiseconds
        self.loop = loop
        self.frames = 0
        self.size: tuple[int, int] | None = None
        self._file = None

    def __enter__(self) -> "GifStream":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp")
        self._file = open(self._tmp, "wb")
        return self

    def write(self, frame: np.ndarray) -> None:
        block, w, h = gif_image_block(frame, self.palette)
        if self.size is None:
            self.size = (w, h)
            self._file.write(b"GIF89a" + struct.pack("<HHBBB", w, h, 0x70, 0, 0))
            self._file.write(b"\x21\xff\x0bNETSCAPE2.0\x03\x01" + struct.pack("<H", self.loop) + b"\x00")
        elif (w, h) != self.size:
            raise ValueError(f"frame {self.frames} is {w}x{h}, the movie is {self.size[0]}x{self.size[1]}")
        self._file.write(b"\x21\xf9\x04\x04" + struct.pack("<H", self.delay) + b"\x00\x00")
        self._file.write(block)
        self.frames += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        self._file.write(b"\x3b")
        self._file.close()
        if exc_type is None:
            self._tmp.replace(self.path)
        else:
            self._tmp.unlink(missing_ok=True)


class Mp4Stream:
    """An H.264 MP4 written one frame at a time through ``imageio_ffmpeg.write_frames``, which pipes
    raw RGB frames into the ffmpeg binary shipped in the imageio-ffmpeg wheel (no system ffmpeg
    needed; ``IMAGEIO_FFMPEG_EXE`` chooses another). Frames are padded with white to even sides,
    which yuv420p requires. ``quality`` is imageio-ffmpeg's 1..10 (6: x264 CRF 20). x264 runs the
    `veryfast` preset on one thread: about 15% less CPU than its own threading, and files half
    the size of `ultrafast`'s, for the movies' frames."""

    def __init__(self, path: str | Path, fps: float = 8.0, quality: float = 6):
        self.path = Path(path)
        self.fps = fps
        self.quality = quality
        self.frames = 0
        self.size: tuple[int, int] | None = None
        self._gen = None

    def __enter__(self) -> "Mp4Stream":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.stem}.tmp{self.path.suffix}")
        return self

    def write(self, frame: np.ndarray) -> None:
        import imageio_ffmpeg

        h, w = frame.shape[:2]
        if self.size is None:
            self.size = (w, h)
            self._padded = (w + w % 2, h + h % 2)
            self._gen = imageio_ffmpeg.write_frames(
                str(self._tmp), self._padded, fps=self.fps, quality=self.quality, codec="libx264",
                macro_block_size=2, ffmpeg_log_level="error",
                output_params=["-preset", "veryfast", "-threads", "1"])
            self._gen.send(None)  # starts ffmpeg
        elif (w, h) != self.size:
            raise ValueError(f"frame {self.frames} is {w}x{h}, the movie is {self.size[0]}x{self.size[1]}")
        rgb = np.full((self._padded[1], self._padded[0], 3), 255, dtype=np.uint8)  # (H', W', 3)
        rgb[:h, :w] = frame[..., :3]
        self._gen.send(rgb.tobytes())
        self.frames += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._gen is not None:
            self._gen.close()  # flushes and waits for ffmpeg
        if exc_type is None and self._gen is not None:
            self._tmp.replace(self.path)
        else:
            self._tmp.unlink(missing_ok=True)
