"""Construction II (Shared head, Theorem G.10): one Layer-1 head attends to the whole routing
set U; the routed states ride in the attention *weights* (content logit log(v + 1)) and the
routed cells' identities in the *values* (each cell emits its color, a coloring injective on
every z + U, App. F); a one-hidden-layer ReLU MLP divides out the softmax normalization with the
star token's reference weight, selects each offset's color slot with the query's color address,
and thresholds the state exactly (per-block error 0). Layer 2 is the matching head of
:mod:`tinyscope.studies.spatial_induction.constructions.dedicated_heads`.

Residual layout: B0 [s, mu, 1] | B1 (V) | B2 = [psi (2), f_Omega(kappa) (d_S), zeta,
color addresses |U| (M - 1) + 1, own color (M)] | B3 = pattern |U| V + aggregate M + 1 | B4 (V);
d_model = (|U| + 2) V + d_p + M + 4 and d_MLP = 2 |U| M (V - 1) + M + 2.
The star token is always present (position 0; vocabulary V + 3).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from tinyscope.errors import check
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.studies.spatial_induction.constructions.addressing import (
    isolating_kernel,
    kernel_features,
    kernel_form,
    rotation,
    temporal_margin,
)
from tinyscope.studies.spatial_induction.constructions.colorings import periodic_coloring
from tinyscope.studies.spatial_induction.constructions.dedicated_heads import (
    CircuitParameters,
    CompiledCircuit,
    _routing,
)
from tinyscope.studies.spatial_induction.serialize import Layout


class SharedBlocks:
    """Residual coordinates of Construction II."""

    def __init__(self, V: int, n_routing: int, d_S: int, M: int):
        self.V, self.nU, self.d_S, self.M = V, n_routing, d_S, M
        self.s, self.mu, self.one = 0, 1, 2
        self.b1 = slice(3, 3 + V)
        p0 = 3 + V
        self.psi = slice(p0, p0 + 2)
        self.phi = slice(p0 + 2, p0 + 2 + d_S)
        self.zeta = p0 + 2 + d_S
        self.addr0 = self.zeta + 1  # |U| (M - 1) address coordinates, then the shared constant
        self.addr_const = self.addr0 + n_routing * (M - 1)
        self.col = slice(self.addr_const + 1, self.addr_const + 1 + M)
        self.b2 = slice(p0, self.col.stop)
        self.pat0 = self.col.stop
        self.agg = slice(self.pat0 + n_routing * V, self.pat0 + n_routing * V + M + 1)  # last = star
        self.b4 = slice(self.agg.stop, self.agg.stop + V)
        self.d_model = self.b4.stop

    def b3(self, j: int) -> slice:
        return slice(self.pat0 + j * self.V, self.pat0 + (j + 1) * self.V)

    @property
    def d_p(self) -> int:
        return self.b2.stop - self.b2.start

    def address(self, j: int, color: int) -> dict[int, float]:
        """g_j[color] as a linear function of B2: {coordinate: coefficient}."""
        if color < self.M - 1:
            return {self.addr0 + j * (self.M - 1) + color: 1.0}
        out = {self.addr_const: 1.0}
        for c in range(self.M - 1):
            out[self.addr0 + j * (self.M - 1) + c] = -1.0
        return out


def construction_two(layout: Layout, stochastic: bool = False, kappa: float = 0.01, alpha: float = 1.0,
                     Lambda: float | None = None, beta: float | None = None,
                     readout_scale: float = 10.0) -> CompiledCircuit:
    """Construction II + the Layer-2 matching head for ``layout``, with the star token."""
    lat = layout.lattice
    V, k = lat.V, lat.k
    shape = np.asarray(lat.shape)
    U, sigma_k, sigma_q = _routing(layout)
    color = periodic_coloring(U, lat.shape)
    M = int(color.max() + 1)
    omegas, ka, kb, gamma = isolating_kernel(lat.shape, U)
    d_S = 2 * len(omegas)
    blk = SharedBlocks(V, len(U), d_S, M)

    # ---- scales (Theorem G.10, Prop. G.6, App. H.7 with eps_bar = 0)
    g_vals = {j: float(sum(ka[i] * math.cos(2 * math.pi * (np.asarray(u) * omegas[i] / shape).sum())
                           + kb[i] * math.sin(2 * math.pi * (np.asarray(u) * omegas[i] / shape).sum())
                           for i in range(len(omegas)))) for j, u in enumerate(U)}
    g_all = [float(sum(ka[i] * math.cos(2 * math.pi * (np.asarray(x) * omegas[i] / shape).sum())
                       + kb[i] * math.sin(2 * math.pi * (np.asarray(x) * omegas[i] / shape).sum())
                       for i in range(len(omegas)))) for x in np.ndindex(*lat.shape)]
    m_floor, R = min(g_vals.values()), max(g_all) - min(g_vals.values())
    lam = (R + gamma) / temporal_margin(layout.T)
    n_max = layout.T * int(np.bincount(color.ravel()).max())
    need = math.log(2 * V * max(n_max - 1, 1)) / gamma  # (36)
    Lam = float(Lambda) if Lambda is not None else float(math.floor(need) + 1)
    check(Lam * gamma >= math.log(2 * V * max(n_max - 1, 1)) - 1e-12,
          f"Lambda={Lam} is below the bound (36) of Theorem G.10 ({need:.2f})")
    N = layout.stream_length + 2  # with the final separator and the star
    if stochastic:
        Delta = math.log(4 * N / ((1 + V * alpha) * kappa))
    else:
        Delta = math.log(2 * math.sqrt(2) * (N - 1)) + 1.0
    beta = float(beta) if beta is not None else Delta
    Delta = beta
    a_match = beta * k
    sigma = a_match + math.log(V * alpha) if stochastic else a_match - 2 * Delta  # det: any value <= a - Delta
    Gamma1 = Lam * (R + gamma)
    Gamma2 = Delta
    params = CircuitParameters(N, k, V, gamma, lam, Lam, Gamma1, 0.0, Delta, beta, Gamma2, sigma,
                               alpha if stochastic else None, kappa if stochastic else None)

    # ---- model
    n_addr = 2 + d_S
    D = max(n_addr + 2 + V, k * V + 1, M + 1)
    vocab, n_ctx = V + 3, layout.input_length + 1
    d_mlp = 2 * len(U) * M * (V - 1) + M + 2
    cfg = TransformerConfig(vocab_size=vocab, n_ctx=n_ctx, d_model=blk.d_model, d_head=D, n_heads=[1, 1],
                            d_mlp=[d_mlp, 0], act="relu", norm="none", attn_out_proj=True, qkv_bias=False,
                            attn_out_bias=False, mlp_bias=True, unembed_bias=True, positions="learned", init="torch")
    model = Transformer(cfg)
    W = {n: np.zeros(tuple(p.shape)) for n, p in model.state_dict().items()}

    W["W_E.weight"][:V, blk.one] = 1.0
    W["W_E.weight"][np.arange(V), blk.b1.start + np.arange(V)] = 1.0
    W["W_E.weight"][V:V + 2, blk.s] = 1.0
    W["W_E.weight"][V:V + 2, blk.one] = 1.0
    W["W_E.weight"][V + 2, blk.mu] = 1.0
    W["W_E.weight"][V + 2, blk.one] = 1.0

    n = np.arange(layout.input_length)
    tau, kap, is_cell = layout.unrho(n)
    pos = W["W_pos.weight"][1:]
    pos[:, blk.psi] = np.stack([np.cos(2 * np.pi * tau / layout.T), np.sin(2 * np.pi * tau / layout.T)], 1)
    pos[:, blk.phi] = kernel_features(kap, omegas, lat.shape)
    pos[:, blk.zeta] = tau == 0
    pos[:, blk.addr_const] = 1.0
    for j, u in enumerate(U):
        c = color[tuple(np.mod(kap + np.asarray(u), shape).T)]  # color of kappa + u
        for cc in range(M - 1):
            pos[:, blk.addr0 + j * (M - 1) + cc] = c == cc
    own = color[tuple(np.mod(kap, shape).T)]
    pos[np.arange(len(n)), blk.col.start + own] = is_cell  # (1 - s) e_c(kappa): zero at separators

    # Layer 1: q . k = Lambda [lam h + g(kappa' - kappa)] - Gamma1 s' + Lambda g_star mu' + log(x' + 1)
    q1, k1, v1, o1 = (W[f"blocks.0.attn.W_{x}.weight"] for x in "QKVO")
    A_t = lam * rotation(2 * np.pi / layout.T)
    F = kernel_form(ka, kb)
    q1[0:2, blk.psi] = Lam * A_t.T
    q1[2:n_addr, blk.phi] = Lam * F.T
    k1[0:n_addr, blk.psi.start:blk.phi.stop] = np.eye(n_addr)
    q1[n_addr, blk.one] = -Gamma1
    k1[n_addr, blk.s] = 1.0
    g_star = m_floor + lam  # reference weight w_star = the smallest routing weight
    q1[n_addr + 1, blk.one] = Lam * g_star
    k1[n_addr + 1, blk.mu] = 1.0
    q1[n_addr + 2:n_addr + 2 + V, blk.one] = np.log(np.arange(V) + 1.0)
    k1[n_addr + 2:n_addr + 2 + V, blk.b1] = np.eye(V)
    q1 *= math.sqrt(D)
    v1[0:M, blk.col] = np.eye(M)
    v1[M, blk.mu] = 1.0
    o1[blk.agg, 0:M + 1] = np.eye(M + 1)

    # Layer-1 MLP: threshold bank, aggregate clearing, constant (Steps 3-5 of Theorem G.10)
    W_in, b_in, W_out = W["blocks.0.mlp.W_in.weight"], W["blocks.0.mlp.W_in.bias"], W["blocks.0.mlp.W_out.weight"]
    star_coord = blk.agg.start + M
    # weights relative to the target floor e^{Lambda (m + lambda)}: the MLP only reads their ratios
    w_delta = {j: math.exp(Lam * (g_vals[j] - m_floor)) for j in range(len(U))}
    w_star = math.exp(Lam * (g_star - m_floor - lam))
    Z_max = 1.01 * (V * sum(w_delta.values()) + layout.input_length * V * math.exp(-Lam * gamma) * min(w_delta.values())
                    + w_star)
    unit = 0
    for j in range(len(U)):
        G = 4 * Z_max / w_delta[j]
        for s in range(M):
            for v in range(1, V):
                row = np.zeros(blk.d_model)
                row[blk.agg.start + s] = G  # G a[s]
                row[star_coord] = -G * (v + 0.5) * w_delta[j] / w_star  # - G (v + 1/2) (w_delta / w_star) a[star]
                row[blk.one] = -G  # - B (1 - g_j[s]) with B = G
                for coord, coef in blk.address(j, s).items():
                    row[coord] += G * coef
                for shift in (0.0, 1.0):  # ReLU(P) - ReLU(P - 1) = clamp(P, 0, 1)
                    W_in[unit] = row
                    b_in[unit] = -shift
                    sign = 1.0 if shift == 0.0 else -1.0
                    W_out[blk.b3(j).start + v, unit] += sign
                    W_out[blk.b3(j).start + v - 1, unit] -= sign
                    unit += 1
    for c in range(M + 1):  # clear the aggregate
        W_in[unit, blk.agg.start + c] = 1.0
        W_out[blk.agg.start + c, unit] = -1.0
        unit += 1
    W_in[unit, blk.one] = 1.0  # ReLU(1 - mu): the constant of coordinate 0 of every block
    W_in[unit, blk.mu] = -1.0
    for j in range(len(U)):
        W_out[blk.b3(j).start, unit] = 1.0
    unit += 1
    assert unit == d_mlp

    # Layer 2: the matching head (Definition H.1) with the star
    q2, k2, v2, o2 = (W[f"blocks.1.attn.W_{x}.weight"] for x in "QKVO")
    for i, (bq, bk) in enumerate(zip(sigma_q, sigma_k)):
        q2[i * V:(i + 1) * V, blk.b3(bq)] = beta * np.eye(V)
        k2[i * V:(i + 1) * V, blk.b3(bk)] = np.eye(V)
    q2[k * V, blk.one] = 1.0
    k2[k * V, blk.s] = -Gamma2
    k2[k * V, blk.zeta] = -Gamma2
    k2[k * V, blk.mu] = sigma
    q2 *= math.sqrt(D)
    v2[:V, blk.b1] = np.eye(V)
    v2[:V, blk.s] = 1.0 / V
    v2[:V, blk.mu] = 1.0 / V
    o2[blk.b4, :V] = np.eye(V)
    W["W_U.weight"][np.arange(V), blk.b4.start + np.arange(V)] = readout_scale
    W["W_U.bias"][V:] = -readout_scale

    model.load_state_dict({n: torch.as_tensor(w, dtype=torch.float32) for n, w in W.items()})
    model.eval()
    circuit = CompiledCircuit(model, layout, U, params, blk, star=True)
    circuit.construction = "II"
    circuit.extra_sizes = {"colors": M, "d_mlp": d_mlp, "d_S": d_S, "d_p": blk.d_p, "B3_agg_width": M + 1,
                           "d_model": blk.d_model, "gamma": gamma, "Lambda": Lam, "n_max": n_max}
    return circuit
