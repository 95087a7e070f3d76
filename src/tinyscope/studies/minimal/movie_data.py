"""The first pass of the training movies: what each checkpoint contributes, and the fixed axes.

Motion on screen must be motion of the model, so every panel keeps one coordinate system and one
set of limits for the whole movie (Mahajne & Moldwin, Sec. 6; the authors fix the limits of
Movie 1 the same way):

* a :class:`Snapshot` per checkpoint holds its :class:`Geometry` (all V x T points, a few
  kilobytes, copies of the weights; see ``geometry.owned``) and, for the sequence variant of
  Movie 5, the trace of the walkthrough sequence;
* the planes of wider models are the PCA planes of the last checkpoint, used for every frame
  (a per-frame PCA would rotate the axes and fake motion); for d_model = d_head = 2 they are
  the identity;
* :func:`scene_limits` takes the union of every frame's points per panel, and the colour range
  of the score matrix over every frame.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyscope.interp.projection import Plane, fit_plane
from tinyscope.studies.minimal.geometry import Geometry, all_points, bounds, head_plane, residual_plane
from tinyscope.studies.minimal.geometry_views import landscape_limits
from tinyscope.studies.minimal.walkthrough import Trace, trace_sequence


@dataclass
class Snapshot:
    """What one checkpoint contributes to the movies: its step, geometry, the pooled attention
    output of every point (Movie 3), the walkthrough trace (sequence variant of Movie 5, else
    None) and the caption line (step and evaluation metrics)."""

    step: int
    geom: Geometry
    attn: np.ndarray
    trace: Trace | None
    caption: str


def caption_of(step: int, evals: list[dict]) -> str:
    """``step S   rule_error x   rule_loss y``: the step and up to two metrics of the last
    evaluation at or before it (error metrics first)."""
    past = [r for r in evals if r["step"] <= step]
    if not past:
        return f"step {step}"
    rec = past[-1]
    shown = [k for k in rec if k not in ("step", "split") and isinstance(rec[k], (int, float))]
    shown = sorted(shown, key=lambda k: ("loss" in k, k))[:2]
    return f"step {step}   " + "   ".join(f"{k} {rec[k]:.3f}" for k in shown)


def snapshot(model, step: int, labels: list[str], caption: str = "", sequence: list[int] | None = None) -> Snapshot:
    """The snapshot of ``model`` as it is now (its weights may be replaced afterwards)."""
    geom = all_points(model, labels)
    trace = trace_sequence(model, sequence, labels) if sequence is not None else None
    return Snapshot(step, geom, geom.pooled_attention(), trace, caption)


def collect_snapshots(run, steps: list[int], labels: list[str], sequence: list[int] | None = None,
                      progress: bool = False) -> list[Snapshot]:
    """One snapshot per checkpoint step, each loaded into the run's model in turn."""
    from tqdm.auto import tqdm

    evals = [r for r in run.metrics() if r.get("split") == "eval"]
    return [snapshot(run.load_step(s), s, labels, caption_of(s, evals), sequence)
            for s in tqdm(steps, desc="geometry", disable=not progress, leave=False)]


def scene_planes(last: Geometry, last_attn: np.ndarray) -> dict[str, Plane]:
    """The plane of each panel, fitted to the last checkpoint."""
    Dh = last.d_head
    return {"tok": fit_plane(last.tok), "pos": fit_plane(last.pos), "emb": residual_plane(last),
            "q": fit_plane(last.q.reshape(-1, Dh)), "k": fit_plane(last.k.reshape(-1, Dh)),
            "v": fit_plane(last.v.reshape(-1, Dh)), "qk": head_plane(last),
            "attn": fit_plane(last_attn.reshape(-1, last_attn.shape[-1]))}


def square(lim: tuple, pad: float = 0.0) -> tuple:
    """The square (xlim, ylim) with the centre of ``lim`` that holds it, widened by ``pad`` of its side."""
    (x0, x1), (y0, y1) = lim
    cx, cy, half = (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * (0.5 + pad)
    return (cx - half, cx + half), (cy - half, cy + half)


def scene_limits(snaps: list[Snapshot], planes: dict[str, Plane]) -> dict:
    """Per panel, the (xlim, ylim) that hold that panel's points in every frame; ``land`` the
    window of the output landscape that holds every e, v and e + v of every frame; ``land_emb``
    the square window around every frame's embeddings (Movie 2, as the authors frame it);
    ``score`` the largest |scaled score| of any frame."""
    def union(fn):
        return bounds(*[fn(s) for s in snaps])

    p = planes
    lands = [landscape_limits(s.geom, p["emb"]) for s in snaps]
    emb = union(lambda s: p["emb"].project(s.geom.emb))
    return {
        "tok": union(lambda s: p["tok"].project(s.geom.tok)),
        "pos": union(lambda s: p["pos"].project(s.geom.pos)),
        "emb": emb,
        "q": union(lambda s: p["q"].project(s.geom.q)),
        "k": union(lambda s: p["k"].project(s.geom.k)),
        "v": union(lambda s: p["v"].project(s.geom.v)),
        "qk": union(lambda s: np.concatenate([p["qk"].project(s.geom.q).reshape(-1, 2),
                                              p["qk"].project(s.geom.k).reshape(-1, 2)])),
        "attn": union(lambda s: p["attn"].project(s.attn)),
        "land": ((min(x[0] for x, _ in lands), max(x[1] for x, _ in lands)),
                 (min(y[0] for _, y in lands), max(y[1] for _, y in lands))),
        "land_emb": square(emb, pad=0.05),
        "score": max(float(np.nanmax(np.abs(s.geom.masked_scaled_scores()))) for s in snaps) or 1.0,
    }
