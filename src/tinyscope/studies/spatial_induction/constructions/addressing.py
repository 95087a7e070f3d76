"""Spatial-temporal addressing (spatial-induction paper, App. E): a positional table whose
bilinear form scores one chosen offset of the previous time step above every other key.

Table entry of stream position n, from its virtual address (tau(n), kappa(n)) (App. C.1)::

    p_n = [ psi(tau) ; phi(kappa) ; zeta ]           width d_p = 2 + 2d + 1
    psi(tau)   = (cos 2 pi tau / T, sin 2 pi tau / T)                      (Eq. 29)
    phi(kappa) = (cos 2 pi kappa_j / W_j, sin 2 pi kappa_j / W_j)_j        (Lemma E.3 ii)
    zeta       = 1[tau = 0]                                                (Eq. 33)

For the singleton offset delta the spatial kernel is g(x) = sum_j cos(2 pi (x_j - delta_j) / W_j)
of x = kappa(n') - kappa(n); it peaks at x = delta and isolates it with margin
gamma = 1 - cos(2 pi / W_max). The temporal kernel h = cos(2 pi (tau - tau' - 1) / T) peaks one step
back with margin gamma_T = 1 - cos(2 pi / T), and the scale lambda >= (R + gamma) / gamma_T with
R = max g - min_target g = 0 keeps wrong-step keys below the target (Stage 6 of Corollary E.6).
Every block is a scaled rotation (Lemma E.1), so a head selects its offset by a linear map alone.
"""
from __future__ import annotations

import math

import numpy as np

from tinyscope.studies.spatial_induction.serialize import Layout


def rotation(theta: float) -> np.ndarray:
    """R(theta) = [[cos, -sin], [sin, cos]]: e(A)^T R(theta) e(B) = cos(A - B - theta)."""
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def positional_table(layout: Layout) -> np.ndarray:
    """p_n for every model input position n: (N_in, 2 + 2d + 1)."""
    n = np.arange(layout.input_length)
    tau, kappa, _ = layout.unrho(n)  # virtual addresses, separators included
    shape = np.asarray(layout.lattice.shape)
    cols = [np.cos(2 * np.pi * tau / layout.T), np.sin(2 * np.pi * tau / layout.T)]
    for j, W in enumerate(shape):
        cols += [np.cos(2 * np.pi * kappa[:, j] / W), np.sin(2 * np.pi * kappa[:, j] / W)]
    cols.append((tau == 0).astype(float))
    return np.stack(cols, axis=1)


def offset_form(layout: Layout, delta: tuple[int, ...], lam: float) -> np.ndarray:
    """The (2 + 2d) x (2 + 2d) matrix A with p_n^T A p_n' = lam h(tau - tau') + g_delta(kappa' - kappa)
    on the addressing coordinates (the zeta coordinate is not part of the form)."""
    d = layout.lattice.dim
    A = np.zeros((2 + 2 * d, 2 + 2 * d))
    A[:2, :2] = lam * rotation(2 * np.pi / layout.T)  # cos(A - B - 2 pi / T): one step back
    for j, W in enumerate(layout.lattice.shape):
        # e(a)^T R(-theta) e(b) = cos(a - b + theta): maximal at b = a + theta, i.e. kappa' = kappa + delta
        A[2 + 2 * j: 4 + 2 * j, 2 + 2 * j: 4 + 2 * j] = rotation(-2 * np.pi * delta[j] / W)
    return A


def singleton_margin(layout: Layout) -> float:
    """gamma = 1 - cos(2 pi / W_max) (Lemma E.3 ii)."""
    return 1.0 - math.cos(2 * math.pi / max(layout.lattice.shape))


def temporal_margin(T: int) -> float:
    """gamma_T = 1 - cos(2 pi / T) (Eq. 28)."""
    return 1.0 - math.cos(2 * math.pi / T)


def temporal_scale(layout: Layout, gamma: float, R: float = 0.0) -> float:
    """The least lambda with lambda gamma_T >= R + gamma (Eq. 26)."""
    return (R + gamma) / temporal_margin(layout.T)


def offset_scores(layout: Layout, delta: tuple[int, ...], lam: float) -> np.ndarray:
    """Reference: the positional score matrix (N_in, N_in) of one head, computed directly from the
    kernels g and h (used to check the bilinear realization)."""
    n = np.arange(layout.input_length)
    tau, kappa, _ = layout.unrho(n)
    g = np.zeros((len(n), len(n)))
    for j, W in enumerate(layout.lattice.shape):
        g += np.cos(2 * np.pi * (kappa[None, :, j] - kappa[:, None, j] - delta[j]) / W)
    h = np.cos(2 * np.pi * (tau[:, None] - tau[None, :] - 1) / layout.T)
    return g + lam * h


def isolating_kernel(shape: tuple[int, ...], U: list[tuple[int, ...]], max_degree: int | None = None):
    """A real trigonometric polynomial g on the torus that isolates the offset set U with the
    largest margin among those of the lowest axis degree that works (Def. E.2, Lemma E.3):

        g(x) = sum_{omega} a_omega cos(phi_omega(x)) + b_omega sin(phi_omega(x)),
        omega in {c e_j : 1 <= c <= degree},  |a|, |b| <= 1,

    found by a linear program maximizing min_U g - max_{not U} g. Returns (omegas (m, d) ints,
    a (m,), b (m,), gamma). Raises ValueError when no axis polynomial up to ``max_degree`` isolates U.
    """
    from scipy.optimize import linprog

    d = len(shape)
    cells = np.array(list(np.ndindex(*shape)))  # (|G|, d)
    in_U = np.zeros(len(cells), dtype=bool)
    Uset = {tuple(int(a) % w for a, w in zip(u, shape)) for u in U}
    for i, c in enumerate(cells):
        in_U[i] = tuple(c) in Uset
    top = max_degree or max(1, len(Uset))
    for degree in range(1, top + 1):
        omegas = np.array([[c if j == axis else 0 for j in range(d)]
                           for axis in range(d) for c in range(1, degree + 1) if 2 * c <= shape[axis]])
        phases = 2 * np.pi * (cells[:, None, :] * omegas[None] / np.asarray(shape)).sum(-1)  # (|G|, m)
        feats = np.concatenate([np.cos(phases), np.sin(phases)], axis=1)  # (|G|, 2m)
        diff = feats[in_U][:, None, :] - feats[~in_U][None, :, :]  # (|U|, rest, 2m)
        m2 = feats.shape[1]
        # maximize gamma s.t. gamma - (f_u - f_x) . coef <= 0, coef in [-1, 1]
        A = np.concatenate([-diff.reshape(-1, m2), np.ones((diff.shape[0] * diff.shape[1], 1))], axis=1)
        res = linprog(c=np.r_[np.zeros(m2), -1.0], A_ub=A, b_ub=np.zeros(len(A)),
                      bounds=[(-1, 1)] * m2 + [(None, None)], method="highs")
        if res.status == 0 and -res.fun > 1e-9:
            coef = res.x[:m2]
            return omegas, coef[:len(omegas)], coef[len(omegas):], float(-res.fun)
    raise ValueError(f"no axis trigonometric polynomial of degree <= {top} isolates {sorted(Uset)} on {shape}")


def kernel_features(kappa: np.ndarray, omegas: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """(cos, sin) of phi_omega(kappa) for every omega: (..., 2m), pairs adjacent."""
    phases = 2 * np.pi * (kappa[..., None, :] * omegas / np.asarray(shape)).sum(-1)  # (..., m)
    return np.stack([np.cos(phases), np.sin(phases)], axis=-1).reshape(*phases.shape[:-1], -1)


def kernel_form(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Block-diagonal form F with f(kappa)^T F f(kappa') = g(kappa' - kappa) (Lemma E.1):
    a cos(B - A) + b sin(B - A) per frequency."""
    m = len(a)
    F = np.zeros((2 * m, 2 * m))
    for i in range(m):
        # [cA, sA] [[a, b], [-b, a]] [cB, sB]^T = a cos(A - B) - b sin(A - B) = a cos(B - A) + b sin(B - A)
        F[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[a[i], b[i]], [-b[i], a[i]]]
    return F
