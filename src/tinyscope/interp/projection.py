"""The plane a view is drawn in: the identity for 2-dimensional spaces, a PCA plane otherwise.

Mahajne & Moldwin (Sec. 1) draw every internal state of a model with d_model = d_head = 2
directly in R^2. For wider models (Sec. 5, "Future directions") the same views are drawn
through a projection; :class:`Plane` makes that explicit so that every axis label says which
one a figure shows ("dim 1" for the exact plane, "PC 1 (61%)" for a projection).

A plane maps points ``y = (x - mean) @ basis.T`` (2 coordinates) and lifts plane coordinates
back to the full space with ``x = mean + y @ basis`` (a 2-D slice through the space), which is
how the output landscape of a wide model is evaluated on a grid.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Plane:
    """An affine 2-D coordinate system of a D-dimensional space."""

    mean: np.ndarray           # (D,)
    basis: np.ndarray          # (2, D), orthonormal rows
    explained: tuple[float, float] | None = None  # variance fraction per axis (PCA only)

    @property
    def exact(self) -> bool:
        """True when the plane is the space itself (D == 2, identity map)."""
        return self.explained is None

    @property
    def dim(self) -> int:
        return int(self.basis.shape[1])

    def project(self, x: np.ndarray) -> np.ndarray:
        """Coordinates (..., 2) of points x (..., D)."""
        return (np.asarray(x, dtype=np.float64) - self.mean) @ self.basis.T

    def lift(self, y: np.ndarray) -> np.ndarray:
        """Points (..., D) of the space at plane coordinates y (..., 2)."""
        return self.mean + np.asarray(y, dtype=np.float64) @ self.basis

    def axis_labels(self, space: str = "") -> tuple[str, str]:
        prefix = f"{space} " if space else ""
        if self.exact:
            return f"{prefix}dim 1", f"{prefix}dim 2"
        return (f"{prefix}PC 1 ({100 * self.explained[0]:.0f}%)", f"{prefix}PC 2 ({100 * self.explained[1]:.0f}%)")

    @property
    def note(self) -> str:
        """A caption fragment: empty for the exact plane, names the projection otherwise."""
        return "" if self.exact else f"PCA projection of {self.dim}-d space"


def fit_plane(points: np.ndarray) -> Plane:
    """The identity plane if points are 2-dimensional, else the top-2 PCA plane of ``points`` (N, D).

    A 1-dimensional space is padded with a zero second axis so that it still draws.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, np.asarray(points).shape[-1])  # (N, D)
    D = pts.shape[1]
    if D == 2:
        return Plane(np.zeros(2), np.eye(2))
    if D == 1:
        return Plane(np.zeros(1), np.array([[1.0], [0.0]]), explained=(1.0, 0.0))
    mean = pts.mean(0)
    centred = pts - mean
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    var = s ** 2
    total = float(var.sum()) or 1.0
    basis = vt[:2]
    if basis.shape[0] < 2:  # a single point: any orthonormal pair will do
        basis = np.eye(D)[:2]
        var = np.zeros(2)
    return Plane(mean, basis, explained=(float(var[0] / total), float(var[1] / total) if len(var) > 1 else 0.0))
