"""The five learning-dynamics movies of Mahajne & Moldwin, Sec. 6, one frame per checkpoint.

1. ``01_embeddings``: token, position and token + position embeddings;
2. ``02_output_landscape_embeddings``: the argmax map of the output network with the embeddings;
3. ``03_qkv_spaces``: the embeddings and their query, key and value images;
4. ``04_qk_space``: queries and keys on common axes;
5. ``05_qk_space_attention``: the Q/K space beside the attention matrix of the walkthrough sequence.

Motion must be real, so every panel's axes are fixed across frames: a first pass over the
checkpoints computes the (small) geometry of each step and the union of the limits; the planes
of wider models are the PCA planes of the last checkpoint, used for every frame. The second
pass draws each frame by moving the artists of one figure per movie and streams it to the GIF
(and MP4 when ffmpeg is available): no movie's frames are ever held together in memory.
"""
from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from tinyscope.errors import TinyscopeError
from tinyscope.interp.frame_canvas import FrameCanvas
from tinyscope.interp.plotting import (
    KEY_COLOR,
    MAX_LABELS,
    QUERY_COLOR,
    VALUE_COLOR,
    new_figure,
    token_cmap,
    token_colors,
)
from tinyscope.interp.video_writers import GifStream, Mp4Stream, ffmpeg_executable, make_palette
from tinyscope.studies.minimal.geometry import (
    Geometry,
    all_points,
    bounds,
    fit_plane,
    has_geometry,
    head_plane,
    landscape,
    model_dims,
    n_layers,
    residual_plane,
)
from tinyscope.studies.minimal.geometry_views import landscape_limits, point_colors
from tinyscope.studies.minimal.walkthrough import Trace, trace_sequence

log = logging.getLogger(__name__)

MOVIE_NAMES = ["01_embeddings", "02_output_landscape_embeddings", "03_qkv_spaces", "04_qk_space",
               "05_qk_space_attention"]


@dataclass
class Snapshot:
    """What one checkpoint contributes to the movies (a few kilobytes)."""

    step: int
    geom: Geometry
    trace: Trace
    caption: str


def _caption(step: int, evals: list[dict]) -> str:
    past = [r for r in evals if r["step"] <= step]
    if not past:
        return f"step {step}"
    rec = past[-1]
    shown = [k for k in rec if k not in ("step", "split") and isinstance(rec[k], (int, float))]
    shown = sorted(shown, key=lambda k: ("loss" in k, k))[:2]
    return f"step {step}   " + "   ".join(f"{k} {rec[k]:.3f}" for k in shown)


class _Panel:
    """Labelled points on fixed axes that move from frame to frame."""

    def __init__(self, canvas: FrameCanvas, ax, labels: list[str], colors, xlim, ylim, title: str, xlabel: str,
                 ylabel: str, size: float = 12, fontsize: float = 6):
        self.canvas, self.ax, self.labels, self.fontsize = canvas, ax, labels, fontsize
        self.sc = ax.scatter(np.zeros(len(labels)), np.zeros(len(labels)), s=size, c=colors, linewidths=0, zorder=3)
        canvas.animate(self.sc)
        ax.set_xlim(xlim), ax.set_ylim(ylim)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=7), ax.set_ylabel(ylabel, fontsize=7)
        ax.tick_params(labelsize=6)

    def move(self, pts: np.ndarray) -> None:
        pts = np.asarray(pts).reshape(-1, 2)
        self.sc.set_offsets(pts)
        if len(pts) <= MAX_LABELS:
            self.canvas.label(self.ax, pts, self.labels, size=self.fontsize)


class _Movie(abc.ABC):
    """One movie: a figure whose moving parts :meth:`update` sets for a snapshot."""

    name = ""

    def __init__(self, fig, dpi: float):
        self.fig = fig
        self.canvas = FrameCanvas(fig, dpi)
        self.fig.suptitle(" ", fontsize=10)  # reserves the space the per-frame title is stamped into

    def caption(self, text: str) -> None:
        w, h = self.fig.canvas.get_width_height()
        self.canvas.label(None, np.array([[w / 2, h - 4]]), [text], size=10, ha="center", va="top")

    @abc.abstractmethod
    def update(self, snap: Snapshot, land=None) -> None:
        """Move this movie's artists to the checkpoint ``snap`` (and its output landscape ``land``)."""

    def frame(self, snap: Snapshot, land=None) -> np.ndarray:
        self.update(snap, land)
        return self.canvas.render()


def _planes(last: Geometry) -> dict:
    Dh = last.d_head
    return {"tok": fit_plane(last.tok), "pos": fit_plane(last.pos), "emb": residual_plane(last),
            "q": fit_plane(last.q.reshape(-1, Dh)), "k": fit_plane(last.k.reshape(-1, Dh)),
            "v": fit_plane(last.v.reshape(-1, Dh)), "qk": head_plane(last)}


def _limits(snaps: list[Snapshot], planes: dict) -> dict:
    def union(fn):
        return bounds(*[fn(s.geom) for s in snaps])

    lands = [landscape_limits(s.geom, planes["emb"]) for s in snaps]
    return {
        "tok": union(lambda g: planes["tok"].project(g.tok)),
        "pos": union(lambda g: planes["pos"].project(g.pos)),
        "emb": union(lambda g: planes["emb"].project(g.emb)),
        "q": union(lambda g: planes["q"].project(g.q)),
        "k": union(lambda g: planes["k"].project(g.k)),
        "v": union(lambda g: planes["v"].project(g.v)),
        "qk": union(lambda g: np.concatenate([planes["qk"].project(g.q).reshape(-1, 2),
                                              planes["qk"].project(g.k).reshape(-1, 2)])),
        "land": ((min(x[0] for x, _ in lands), max(x[1] for x, _ in lands)),
                 (min(y[0] for _, y in lands), max(y[1] for _, y in lands))),
    }


class EmbeddingsMovie(_Movie):
    """Movie 1: token, position and combined embeddings."""

    name = MOVIE_NAMES[0]

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float):
        super().__init__(new_figure(15, 5), dpi)
        a, b, c = self.fig.subplots(1, 3, width_ratios=[1, 1, 1.6])
        cv = self.canvas
        self.panels = [
            _Panel(cv, a, g.labels, token_colors(g.V), *lim["tok"], "token embeddings x",
                   *planes["tok"].axis_labels(), size=30, fontsize=9),
            _Panel(cv, b, [f"p{t}" for t in range(g.T)], "0.3", *lim["pos"], "position embeddings p",
                   *planes["pos"].axis_labels(), size=30, fontsize=9),
            _Panel(cv, c, g.point_labels(), point_colors(g), *lim["emb"], "token + position e",
                   *planes["emb"].axis_labels()),
        ]
        self.planes = planes

    def update(self, snap: Snapshot, land=None) -> None:
        g, p = snap.geom, self.planes
        for panel, pts in zip(self.panels, (p["tok"].project(g.tok), p["pos"].project(g.pos), p["emb"].project(g.emb))):
            panel.move(pts)
        self.caption(f"Embeddings   {snap.caption}")


class LandscapeMovie(_Movie):
    """Movie 2: the argmax map of the output network with the embeddings overlaid."""

    name = MOVIE_NAMES[1]

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float, n_out: int):
        super().__init__(new_figure(9, 8), dpi)
        self.ax = self.fig.subplots()
        self.plane = planes["emb"]
        xlim, ylim = lim["land"]
        self.im = self.ax.imshow(np.zeros((2, 2)), origin="lower", extent=(*xlim, *ylim), aspect="auto",
                                 interpolation="nearest", cmap=token_cmap(n_out), vmin=-0.5, vmax=n_out - 0.5)
        self.canvas.animate(self.im)
        self.panel = _Panel(self.canvas, self.ax, g.point_labels(), point_colors(g), xlim, ylim,
                            "argmax of the output network, embeddings e overlaid", *self.plane.axis_labels())

    def update(self, snap: Snapshot, land=None) -> None:
        self.im.set_data(land.argmax)
        gx, gy = np.meshgrid(land.xs, land.ys)
        am = land.argmax
        tokens = np.unique(am)
        centres = np.array([[np.median(gx[am == u]), np.median(gy[am == u])] for u in tokens])
        names = [snap.geom.labels[u] if u < len(snap.geom.labels) else str(u) for u in tokens]
        self.canvas.label(self.ax, centres, names, colour="0.3", size=12, ha="center", va="center", bold=True)
        self.panel.move(self.plane.project(snap.geom.emb))
        self.caption(f"Output landscape and embeddings   {snap.caption}")


class QKVMovie(_Movie):
    """Movie 3: the embeddings and their query, key and value images."""

    name = MOVIE_NAMES[2]

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float):
        super().__init__(new_figure(20, 5.2), dpi)
        axes = self.fig.subplots(1, 4)
        labels = g.point_labels()
        self.panels = [_Panel(self.canvas, axes[0], labels, point_colors(g), *lim["emb"], "embeddings e",
                              *planes["emb"].axis_labels())]
        for ax, key, colour in zip(axes[1:], "qkv", (QUERY_COLOR, KEY_COLOR, VALUE_COLOR)):
            self.panels.append(_Panel(self.canvas, ax, labels, colour, *lim[key], f"{key} = W_{key.upper()} e",
                                      *planes[key].axis_labels(key)))
        self.planes = planes

    def update(self, snap: Snapshot, land=None) -> None:
        g, p = snap.geom, self.planes
        pts = (p["emb"].project(g.emb), p["q"].project(g.q), p["k"].project(g.k), p["v"].project(g.v))
        for panel, xy in zip(self.panels, pts):
            panel.move(xy)
        self.caption(f"Query, key and value spaces   {snap.caption}")


class QKMovie(_Movie):
    """Movie 4: queries and keys on common axes."""

    name = MOVIE_NAMES[3]

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float, fig=None, ax=None):
        super().__init__(fig or new_figure(9, 8), dpi)
        ax = ax or self.fig.subplots()
        labels = g.point_labels()
        xl, yl = planes["qk"].axis_labels()
        self.q = _Panel(self.canvas, ax, labels, QUERY_COLOR, *lim["qk"], "queries (blue) and keys (red)", xl, yl)
        self.k = _Panel(self.canvas, ax, labels, KEY_COLOR, *lim["qk"], "queries (blue) and keys (red)", xl, yl)
        self.plane = planes["qk"]

    def move_points(self, snap: Snapshot) -> None:
        self.q.move(self.plane.project(snap.geom.q))
        self.k.move(self.plane.project(snap.geom.k))

    def update(self, snap: Snapshot, land=None) -> None:
        self.move_points(snap)
        self.caption(f"Query / key space   {snap.caption}")


class QKAttentionMovie(QKMovie):
    """Movie 5: the Q/K space beside the walkthrough sequence's attention matrix."""

    name = MOVIE_NAMES[4]

    def __init__(self, g: Geometry, planes: dict, lim: dict, dpi: float, trace: Trace):
        fig = new_figure(16, 7.5)
        left, right = fig.subplots(1, 2, width_ratios=[1.2, 1])
        super().__init__(g, planes, lim, dpi, fig=fig, ax=left)
        names = trace.point_labels()
        self.right, self.T = right, trace.T
        self.im = right.imshow(np.zeros((trace.T, trace.T)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        self.canvas.animate(self.im)
        if trace.T <= 32:
            right.set_xticks(range(trace.T), names, fontsize=8)
            right.set_yticks(range(trace.T), names, fontsize=8)
        right.set_xlabel("key"), right.set_ylabel("query")
        seq = " ".join(trace.token_names)
        right.set_title(f"attention of {seq if len(seq) <= 60 else seq[:57] + '...'}", fontsize=9)
        ii, jj = np.tril_indices(trace.T) if trace.T <= 20 else (np.zeros(0, int), np.zeros(0, int))  # annotated cells
        self.cells = (ii, jj, np.stack([jj, ii], -1).astype(float))

    def update(self, snap: Snapshot, land=None) -> None:
        self.move_points(snap)
        A = snap.trace.pattern
        self.im.set_data(A)
        ii, jj, xy = self.cells
        vals = A[ii, jj]
        self.canvas.label(self.right, xy, [f"{a:.2f}" for a in vals], size=7, ha="center", va="center",
                          colours=["white" if a > 0.6 else "0.1" for a in vals])
        self.caption(f"Query / key space and attention   {snap.caption}")


def render_movies(run, out_dir: str | Path | None = None, only: list[str] | None = None, fps: float = 8.0,
                  every: int = 1, mp4: bool = True, dpi: int = 72, grid: int = 100, sequence: list[int] | None = None,
                  labels: list[str] | None = None, progress: bool = True) -> dict[str, list[Path]]:
    """Render the selected movies of a run into ``out_dir`` (default RUN/movies); returns the files
    written per movie. One frame per saved checkpoint (every ``every``-th)."""
    from tinyscope.studies.minimal.views import MAX_POINTS, ViewContext

    if not has_geometry(run.model):
        raise TinyscopeError(f"{type(run.model).__name__} has no hook_embed / blocks.0.attn.hook_q|k|v: "
                             "the training movies need a transformer with those hooks")
    names = list(only or MOVIE_NAMES)
    for n in names:
        if n not in MOVIE_NAMES:
            raise TinyscopeError(f"no movie named {n!r}; choose from {', '.join(MOVIE_NAMES)}")
    V, T = model_dims(run.model)
    if V * T > MAX_POINTS:
        raise TinyscopeError(f"{V} tokens x {T} positions = {V * T} points per frame is too many to animate "
                             f"(at most {MAX_POINTS})")
    if n_layers(run.model) != 1 and MOVIE_NAMES[1] in names:
        if only:
            raise TinyscopeError(f"{MOVIE_NAMES[1]} reads the output network of a one-layer model; this one has "
                                 f"{n_layers(run.model)} layers")
        names.remove(MOVIE_NAMES[1])
        log.info("skipping %s: the model has more than one layer", MOVIE_NAMES[1])
    steps = run.checkpoint_steps()[::max(1, int(every))]
    if not steps:
        raise TinyscopeError(f"{run.path} has no step_*.safetensors checkpoints to animate")
    ctx = ViewContext(run)
    labels = labels or ctx.labels
    seq = sequence or ctx.sequence_ids()
    evals = [r for r in run.metrics() if r.get("split") == "eval"]
    out_dir = Path(out_dir) if out_dir is not None else Path(run.path) / "movies"
    bar = dict(disable=not progress, leave=False)

    snaps = []
    for step in tqdm(steps, desc="geometry", **bar):
        model = run.load_step(step)
        snaps.append(Snapshot(step, all_points(model, labels), trace_sequence(model, seq, labels),
                              _caption(step, evals)))
    planes = _planes(snaps[-1].geom)
    lim = _limits(snaps, planes)
    first = snaps[0].geom
    builders = {
        MOVIE_NAMES[0]: lambda: EmbeddingsMovie(first, planes, lim, dpi),
        MOVIE_NAMES[1]: lambda: LandscapeMovie(first, planes, lim, dpi, n_out),
        MOVIE_NAMES[2]: lambda: QKVMovie(first, planes, lim, dpi),
        MOVIE_NAMES[3]: lambda: QKMovie(first, planes, lim, dpi),
        MOVIE_NAMES[4]: lambda: QKAttentionMovie(first, planes, lim, dpi, snaps[0].trace),
    }
    n_out = snaps[0].trace.probs.shape[-1]
    movies = [builders[n]() for n in MOVIE_NAMES if n in names]
    use_mp4 = mp4 and ffmpeg_executable() is not None
    if mp4 and not use_mp4:
        log.info("no ffmpeg found: writing GIFs only (pip install imageio-ffmpeg for MP4)")
    written: dict[str, list[Path]] = {m.name: [out_dir / f"{m.name}.gif"] for m in movies}
    writers = []
    try:
        need_land = any(isinstance(m, LandscapeMovie) for m in movies)

        def land_at(snap: Snapshot):
            return landscape(run.load_step(snap.step), *lim["land"], n=grid, plane=planes["emb"]) if need_land else None

        first_land, last_land = land_at(snaps[0]), land_at(snaps[-1])
        for m in movies:  # one palette per movie, fitted to its first and last frames
            palette = make_palette(m.frame(snaps[0], first_land), m.frame(snaps[-1], last_land))
            w = [GifStream(out_dir / f"{m.name}.gif", fps, palette=palette).__enter__()]
            if use_mp4:
                w.append(Mp4Stream(out_dir / f"{m.name}.mp4", fps).__enter__())
                written[m.name].append(out_dir / f"{m.name}.mp4")
            writers.append(w)
        for snap in tqdm(snaps, desc="frames", **bar):
            land = land_at(snap)
            for m, ws in zip(movies, writers):
                frame = m.frame(snap, land)
                for w in ws:
                    w.write(frame)
        error = None
    except BaseException as exc:
        error = exc
        raise
    finally:
        for ws in writers:
            for w in ws:
                w.__exit__(type(error) if error else None, error, None)
    return written
