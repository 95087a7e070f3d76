"""The learning-dynamics movies of Mahajne & Moldwin, Sec. 6, one frame per checkpoint.

The paper's five (rendered by default; file names in RUN/movies/):

1. ``01_embeddings``: token, position and token + position embeddings;
2. ``02_output_landscape_embeddings``: P(next = token) heatmaps, one per token, embeddings overlaid;
3. ``03_qkv_spaces``: the 8 panels of embeddings, q, k, v, q with k, and the attention output;
4. ``04_qk_space``: queries and keys on common axes;
5. ``05_qk_space_attention``: the Q/K space beside the full masked (V*T) x (V*T) score matrix.

Variants, rendered when named (``tinyscope movie RUN --only NAME``): ``02_output_argmax_embeddings``,
``03_qkv_simple`` and ``05_qk_space_sequence_attention`` (see ``movie_frames``).

A first pass (``movie_data``) computes every checkpoint's geometry and fixes every panel's axes;
the second pass moves the artists of one figure per movie and streams each frame to a GIF and,
through the ffmpeg binary of imageio-ffmpeg, to an MP4: no movie's frames are held in memory.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from tinyscope.errors import TinyscopeError
from tinyscope.interp.video_writers import GifStream, Mp4Stream, ffmpeg_executable, make_palette
from tinyscope.studies.minimal import movie_frames as mf
from tinyscope.studies.minimal.geometry import has_geometry, landscape, model_dims, n_layers
from tinyscope.studies.minimal.movie_data import collect_snapshots, scene_limits, scene_planes

log = logging.getLogger(__name__)

DEFAULT_DPI = 100


@dataclass(frozen=True)
class MovieSpec:
    """A movie's file stem, its frame class, the paper's movie it shows and what it shows."""

    name: str
    frames: type
    paper: str
    caption: str
    default: bool = True


MOVIES = [
    MovieSpec("01_embeddings", mf.EmbeddingsMovie, "Movie 1",
              "token embeddings x, position embeddings p and their sums e = x + p"),
    MovieSpec("02_output_landscape_embeddings", mf.OutputHeatmapsMovie, "Movie 2",
              "P(next = token) of the output network over the residual plane, one panel per token, with all "
              "V x T embeddings e overlaid"),
    MovieSpec("03_qkv_spaces", mf.QKVMovie, "Movie 3",
              "token, position and combined embeddings; q, k and v; q and k together; the attention output of "
              "every point over all keys at or before its position"),
    MovieSpec("04_qk_space", mf.QKMovie, "Movie 4", "queries (blue) and keys (red) of all V x T points"),
    MovieSpec("05_qk_space_attention", mf.QKScoresMovie, "Movie 5",
              "the Q/K space beside the (V*T) x (V*T) pre-softmax scores q.k/sqrt(d_k), keys after the "
              "query masked (grey), colour range fixed over the movie"),
    MovieSpec("02_output_argmax_embeddings", mf.OutputArgmaxMovie, "Movie 2, argmax variant",
              "the argmax map of the output network with the embeddings e", default=False),
    MovieSpec("03_qkv_simple", mf.QKVSimpleMovie, "Movie 3, 4-panel variant",
              "the embeddings e and their q, k and v images", default=False),
    MovieSpec("05_qk_space_sequence_attention", mf.QKSequenceAttentionMovie, "Movie 5, sequence variant",
              "the Q/K space beside the attention of the walkthrough sequence", default=False),
]
SPECS = {m.name: m for m in MOVIES}
MOVIE_NAMES = [m.name for m in MOVIES if m.default]


def resolve_movie_names(names: list[str] | None) -> list[str]:
    """The movies to render, in catalogue order: the paper's five by default; a name may omit its
    number (``embeddings`` for ``01_embeddings``)."""
    if not names:
        return list(MOVIE_NAMES)
    short = {m.name.split("_", 1)[1]: m.name for m in MOVIES}
    chosen = set()
    for n in names:
        full = n if n in SPECS else short.get(n)
        if full is None:
            raise TinyscopeError(f"no movie named {n!r}; choose from {', '.join(SPECS)}")
        chosen.add(full)
    return [m.name for m in MOVIES if m.name in chosen]


def report_movies(run_dir: str | Path) -> list[tuple[str, str, Path]]:
    """(name, caption, file) of each movie RUN/movies holds, in catalogue order: the MP4 when there
    is one (a fraction of the GIF's bytes), else the GIF."""
    folder = Path(run_dir) / "movies"
    out = []
    for m in MOVIES:
        for ext in (".mp4", ".gif"):
            if (folder / f"{m.name}{ext}").is_file():
                out.append((m.name, f"{m.paper} (Sec. 6): {m.caption}; one frame per checkpoint.",
                            folder / f"{m.name}{ext}"))
                break
    return out


def _check(run, names: list[str], only: bool) -> list[str]:
    from tinyscope.studies.minimal.views import MAX_POINTS

    if not has_geometry(run.model):
        raise TinyscopeError(f"{type(run.model).__name__} has no hook_embed / blocks.0.attn.hook_q|k|v: "
                             "the training movies need a transformer with those hooks")
    V, T = model_dims(run.model)
    if V * T > MAX_POINTS:
        raise TinyscopeError(f"{V} tokens x {T} positions = {V * T} points per frame is too many to animate "
                             f"(at most {MAX_POINTS})")
    deep = [n for n in names if "landscape" in SPECS[n].frames.needs]
    if n_layers(run.model) != 1 and deep:
        if only:
            raise TinyscopeError(f"{deep[0]} reads the output network of a one-layer model; this one has "
                                 f"{n_layers(run.model)} layers")
        log.info("skipping %s: the model has more than one layer", ", ".join(deep))
        names = [n for n in names if n not in deep]
    return names


def render_movies(run, out_dir: str | Path | None = None, only: list[str] | None = None, fps: float = 8.0,
                  every: int = 1, mp4: bool = True, dpi: int = DEFAULT_DPI, grid: int = 100,
                  sequence: list[int] | None = None, labels: list[str] | None = None,
                  progress: bool = True) -> dict[str, list[Path]]:
    """Render the selected movies of a run into ``out_dir`` (default RUN/movies); returns the files
    written per movie. One frame per saved checkpoint (every ``every``-th). The run's model is
    left with the weights (and step) it had."""
    kept = ({k: v.detach().clone() for k, v in run.model.state_dict().items()}, run.step)
    try:
        return _render(run, out_dir, only, fps, every, mp4, dpi, grid, sequence, labels, progress)
    finally:
        run.model.load_state_dict(kept[0])
        run.step = kept[1]


def _render(run, out_dir, only, fps, every, mp4, dpi, grid, sequence, labels, progress) -> dict[str, list[Path]]:
    from tinyscope.studies.minimal.views import ViewContext

    names = _check(run, resolve_movie_names(only), bool(only))
    steps = run.checkpoint_steps()[::max(1, int(every))]
    if not steps:
        raise TinyscopeError(f"{run.path} has no step_*.safetensors checkpoints to animate")
    ctx = ViewContext(run)
    labels = labels or ctx.labels
    needs = set().union(*(SPECS[n].frames.needs for n in names))
    seq = (sequence or ctx.sequence_ids()) if "trace" in needs else None
    out_dir = Path(out_dir) if out_dir is not None else Path(run.path) / "movies"
    bar = dict(disable=not progress, leave=False)

    snaps = collect_snapshots(run, steps, labels, seq, progress)
    planes = scene_planes(snaps[-1].geom, snaps[-1].attn)
    lim = scene_limits(snaps, planes)
    use_mp4 = mp4 and ffmpeg_executable() is not None
    if mp4 and not use_mp4:
        log.info("no ffmpeg found: writing GIFs only (imageio-ffmpeg ships one; reinstall it for MP4)")

    windows = sorted({SPECS[n].frames.window for n in names if "landscape" in SPECS[n].frames.needs})

    def land_at(snap) -> dict:
        """The output landscape of the snapshot's checkpoint over each window a movie draws."""
        if not windows:
            return {}
        model = run.load_step(snap.step)
        return {w: landscape(model, *lim[w], n=grid, plane=planes["emb"]) for w in windows}

    first_land, last_land = land_at(snaps[0]), land_at(snaps[-1])
    first = snaps[0].geom

    def build(spec: MovieSpec):
        cls = spec.frames
        if "landscape" in cls.needs:
            return cls(first, planes, lim, dpi, first_land[cls.window].probs.shape[-1])
        if "trace" in cls.needs:
            return cls(first, planes, lim, dpi, snaps[0].trace)
        return cls(first, planes, lim, dpi)

    movies = [(SPECS[n], build(SPECS[n])) for n in names]
    written: dict[str, list[Path]] = {}
    writers = []
    try:
        for spec, m in movies:  # one palette per movie, fitted to its first and last frames
            palette = make_palette(m.frame(snaps[0], first_land.get(m.window)),
                                   m.frame(snaps[-1], last_land.get(m.window)))
            ws = [GifStream(out_dir / f"{spec.name}.gif", fps, palette=palette).__enter__()]
            if use_mp4:
                ws.append(Mp4Stream(out_dir / f"{spec.name}.mp4", fps).__enter__())
            written[spec.name] = [w.path for w in ws]
            writers.append(ws)
        for snap in tqdm(snaps, desc="frames", **bar):
            land = land_at(snap)
            for (_, m), ws in zip(movies, writers):
                frame = m.frame(snap, land.get(m.window))
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
