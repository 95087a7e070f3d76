"""The same geometry of several runs side by side, in one frame (Mahajne & Moldwin, Sec. 5, future work:
which parts of the geometry a task requires and which a seed chooses).

Two runs that compute the same function can differ by symmetries of the model: for the
LayerNorm-free minimal model, any orthogonal map ``R`` of the residual plane (``x -> x R``
applied to token and position embeddings, values, and undone by ``W_Q``, ``W_K``, ``W_V``, the
FFN input and the LM head) leaves every logit unchanged, and so does any orthogonal ``S`` of
the query/key plane (``q -> q S``, ``k -> k S`` keep every ``q . k``). Each run is therefore
put into the reference run's frame by two orthogonal Procrustes fits (reflections allowed, as
both are exact symmetries; no translation, which is not):

* residual plane: ``R = argmin ||E R - E_ref||_F`` over the V x T combined embeddings
  ``e = x_tok + p_pos`` (Sec. 2.2), applied to tokens, positions, values (the attention output
  is added to the residual unprojected) and the output landscape's grid;
* query/key plane: ``S`` fitted on queries and keys stacked together.

The fit's relative residual ``||E R - E_ref||_F / ||E_ref||_F`` says how far the geometries
differ once the symmetries are taken out (0 for a rotated or reflected copy of the same model).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tinyscope.errors import TinyscopeError
from tinyscope.interp.plotting import new_figure, token_cmap, token_colors
from tinyscope.interp.projection import Plane
from tinyscope.studies.minimal.geometry import Geometry, Landscape, all_points, bounds, landscape, token_labels


def procrustes(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The orthogonal (D, D) ``R`` minimising ``||X R - Y||_F`` (X, Y: (N, D)), reflections
    allowed: ``R = U V^T`` for the SVD ``X^T Y = U S V^T`` (Schoenemann, 1966)."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    if X.shape != Y.shape or X.ndim != 2:
        raise TinyscopeError(f"Procrustes needs two (N, D) point sets of one shape, got {X.shape} and {Y.shape}")
    U, _, Vt = np.linalg.svd(X.T @ Y)
    return U @ Vt


def relative_residual(X: np.ndarray, Y: np.ndarray, R: np.ndarray) -> float:
    """``||X R - Y||_F / ||Y||_F``."""
    return float(np.linalg.norm(X @ R - Y) / max(np.linalg.norm(Y), 1e-12))


@dataclass
class AlignedRun:
    """One run's geometry in the reference frame: ``R`` (residual plane) and ``S`` (query/key
    plane) with their relative residuals, and the output landscape over the common limits."""

    name: str
    geometry: Geometry
    R: np.ndarray
    S: np.ndarray
    residual: float
    residual_qk: float
    landscape: Landscape | None = None
    rule_error: float | None = None


def rotate(geom: Geometry, R: np.ndarray, S: np.ndarray) -> Geometry:
    """The geometry with residual-plane points mapped by ``R`` and query/key points by ``S``."""
    V, T, D = geom.emb.shape
    return dataclasses.replace(
        geom, tok=geom.tok @ R, pos=geom.pos @ R, emb=(geom.emb.reshape(-1, D) @ R).reshape(V, T, D),
        q=(geom.q.reshape(-1, geom.d_head) @ S).reshape(V, T, -1), k=(geom.k.reshape(-1, geom.d_head) @ S).reshape(V, T, -1),
        v=(geom.v.reshape(-1, D) @ R).reshape(V, T, D) if geom.v.shape[-1] == D else geom.v,
        W_Q=None if geom.W_Q is None else S.T @ geom.W_Q @ R, W_K=None if geom.W_K is None else S.T @ geom.W_K @ R,
        W_V=None if geom.W_V is None else R.T @ geom.W_V @ R)


def align(geoms: list[Geometry], names: list[str] | None = None) -> list[AlignedRun]:
    """Every geometry in the frame of the first (see the module docstring)."""
    if not geoms:
        raise TinyscopeError("no runs to compare")
    ref = geoms[0]
    shapes = {(g.emb.shape, g.q.shape) for g in geoms}
    if len(shapes) > 1:
        raise TinyscopeError(f"the runs' geometries differ in shape ({sorted(shapes)}); compare runs of one model")
    D, Dh = ref.emb.shape[-1], ref.d_head
    E_ref = ref.emb.reshape(-1, D)
    QK_ref = np.concatenate([ref.q.reshape(-1, Dh), ref.k.reshape(-1, Dh)], 0)
    out = []
    for i, g in enumerate(geoms):
        E = g.emb.reshape(-1, D)
        QK = np.concatenate([g.q.reshape(-1, Dh), g.k.reshape(-1, Dh)], 0)
        R, S = procrustes(E, E_ref), procrustes(QK, QK_ref)
        out.append(AlignedRun(names[i] if names else f"run {i}", rotate(g, R, S), R, S,
                              relative_residual(E, E_ref, R), relative_residual(QK, QK_ref, S)))
    return out


def aligned_landscapes(models: list, aligned: list[AlignedRun], n: int = 120) -> None:
    """Each run's output landscape on one grid of the reference frame: the grid point ``y`` is
    the run's residual point ``y R^T`` (a 2-D residual only)."""
    D = aligned[0].geometry.emb.shape[-1]
    if D != 2:
        return
    pts = [a.geometry.emb for a in aligned] + [a.geometry.emb + a.geometry.v for a in aligned
                                               if a.geometry.v.shape[-1] == D]
    xlim, ylim = bounds(*pts, pad=0.12)
    for model, a in zip(models, aligned):
        a.landscape = landscape(model, xlim, ylim, n=n, plane=Plane(np.zeros(D), a.R.T))


def compare_runs(runs: list, names: list[str] | None = None, grid: int = 120) -> list[AlignedRun]:
    """Geometry of each loaded run (``tinyscope.runs.rundir.Run``), aligned to the first, with
    its output landscape and held-out rule error when results.json has one."""
    geoms = []
    for run in runs:
        V = run.model.cfg.vocab_size
        geoms.append(all_points(run.model, token_labels(run.task, V)))
    aligned = align(geoms, names or [str(getattr(r, "path", f"run {i}")) for i, r in enumerate(runs)])
    for run, a in zip(runs, aligned):
        a.rule_error = (getattr(run, "results", {}) or {}).get("metrics", {}).get("rule_error")
    aligned_landscapes([r.model for r in runs], aligned, n=grid)
    return aligned


def merged_groups(points: np.ndarray, span: np.ndarray, tol: float = 0.025) -> list[list[int]]:
    """Indices of points grouped when within ``tol`` of the axes ``span`` of each other (single
    linkage): tokens whose embeddings merged are named together."""
    groups: list[list[int]] = []
    for a, p in enumerate(points):
        near = [g for g in groups if any(np.all(np.abs(points[b] - p) <= tol * span) for b in g)]
        merged = [a] + [b for g in near for b in g]
        groups = [g for g in groups if g not in near] + [sorted(merged)]
    return sorted(groups)


def comparison_figure(aligned: list[AlignedRun], width_per_run: float = 2.4):
    """One column per run, aligned to the first: (a) combined embeddings ``e`` with the token
    embeddings labelled, (b) queries (circles) and keys (triangles), (c) the output network's
    argmax over the residual plane with the embeddings overlaid."""
    n = len(aligned)
    labels = aligned[0].geometry.labels
    V, T, _ = aligned[0].geometry.emb.shape
    cols = token_colors(V)
    pcol = [cols[a] for a in range(V) for _ in range(T)]
    rows = 3 if aligned[0].landscape is not None else 2
    fig = new_figure(max(4.0, width_per_run * n + 0.6), 2.3 * rows + 0.7)
    axes = np.asarray(fig.subplots(rows, n, squeeze=False))
    exy = bounds(*[a.geometry.emb for a in aligned], *[a.geometry.tok for a in aligned])
    qxy = bounds(*[a.geometry.q for a in aligned], *[a.geometry.k for a in aligned])
    for j, a in enumerate(aligned):
        g = a.geometry
        err = "" if a.rule_error is None else f"\nrule error {a.rule_error:.2%}"
        ax = axes[0, j]
        ax.scatter(*g.emb.reshape(-1, 2).T, s=6, c=pcol, alpha=0.55, linewidths=0)
        ax.scatter(*g.tok.T, s=18, c=cols, linewidths=0.3, edgecolors="0.2", zorder=3)
        span = np.array([exy[0][1] - exy[0][0], exy[1][1] - exy[1][0]])
        for group in merged_groups(g.tok, span):  # tokens on one point share one label ("0,2,8")
            ax.annotate(",".join(labels[a] for a in group), g.tok[group].mean(0), xytext=(3, 3),
                        textcoords="offset points", fontsize=7, zorder=4)
        ax.set_xlim(exy[0]), ax.set_ylim(exy[1])
        ax.set_title(f"{a.name}{err}\nfit residual {a.residual:.3f}", fontsize=7.5)
        ax = axes[1, j]
        q, k = g.q.reshape(-1, 2), g.k.reshape(-1, 2)
        ax.scatter(*q.T, s=9, c=pcol, marker="o", linewidths=0, alpha=0.8)
        ax.scatter(*k.T, s=11, c=pcol, marker="^", linewidths=0.3, edgecolors="0.2", alpha=0.8)
        ax.set_xlim(qxy[0]), ax.set_ylim(qxy[1])
        ax.set_title(f"queries o, keys ^ (residual {a.residual_qk:.3f})", fontsize=7)
        if rows == 3:
            ax = axes[2, j]
            land = a.landscape
            ax.imshow(land.argmax, origin="lower", extent=land.extent, cmap=token_cmap(V), vmin=-0.5, vmax=V - 0.5,
                      aspect="auto", interpolation="nearest")
            ax.scatter(*g.emb.reshape(-1, 2).T, s=5, c=pcol, edgecolors="0.15", linewidths=0.3)
            ax.set_title("argmax of the output network", fontsize=7)
        for r in range(rows):
            axes[r, j].tick_params(labelsize=6.5)
    for r, (xl, yl) in enumerate([("residual dim 1", "residual dim 2"), ("Q/K dim 1", "Q/K dim 2"),
                                  ("residual dim 1", "residual dim 2")][:rows]):
        axes[r, 0].set_ylabel(yl, fontsize=7.5)
        for j in range(n):
            axes[r, j].set_xlabel(xl, fontsize=7.5)
    fig.legend(handles=[_patch(cols[a], labels[a]) for a in range(V)], loc="outside lower center",
               ncol=min(V, 12), fontsize=7, frameon=False, title="token", title_fontsize=7)
    fig.suptitle(f"{n} runs aligned to {aligned[0].name} by orthogonal Procrustes (reflection allowed)",
                 fontsize=8.5)
    return fig


def _patch(colour, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, edgecolor="0.3", linewidth=0.4, label=label)


def cmd_compare_seeds(args) -> int:
    """``tinyscope compare-seeds`` (its flags are in :mod:`tinyscope.studies.minimal.cli`)."""
    import json
    from pathlib import Path

    from tinyscope.runs.rundir import load_run

    if len(args.runs) < 2:
        raise TinyscopeError("compare-seeds needs at least two runs")
    which = args.checkpoint if args.checkpoint in ("best", "last") else _step(args.checkpoint)
    runs = [load_run(r, which) for r in args.runs]
    for r in runs:
        if getattr(r.model, "cfg", None) is None or r.model.cfg.d_model != 2:
            raise TinyscopeError(f"{r.path} is not a 2-dimensional minimal model; compare-seeds draws those only")
    names = [f"{Path(r.path).name} (seed {r.cfg.seed}, step {r.step})" for r in runs]
    aligned = compare_runs(runs, names)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig = comparison_figure(aligned)
    path = out / f"seed_comparison.{args.format}"
    fig.savefig(path, dpi=200)
    record = [{"run": str(r.path), "seed": r.cfg.seed, "step": r.step, "rule_error": a.rule_error,
               "R": a.R.tolist(), "S": a.S.tolist(), "residual": a.residual, "residual_qk": a.residual_qk}
              for r, a in zip(runs, aligned)]
    (out / "alignment.json").write_text(json.dumps(record, indent=1))
    print(path)
    return 0


def _step(text: str) -> int:
    try:
        step = int(text)
    except ValueError:
        raise TinyscopeError(f"--checkpoint {text!r} must be best, last or a step number") from None
    if step < 0:
        raise TinyscopeError(f"--checkpoint {step} must be >= 0")
    return step
