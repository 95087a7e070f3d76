"""Compiled spatial induction heads: Construction I (Dedicated heads, Theorem G.9) with the
Layer-2 matching head (Definition H.1, Proposition H.7, Theorem H.9), written into tinyscope's
foundation :class:`Transformer` (no LayerNorm, no MLP, learned absolute positions).

Residual layout (Definition G.2), d_model = (|U| + 2) V + 2d + 6::

    B0 (3)        [s, mu, 1]     separator indicator, auxiliary-token marker, constant
    B1 (V)        own state one-hot (cells), 0 (separators, star)
    B2 (2d + 3)   p_n = [psi(tau), phi(kappa), zeta]  (constructions.addressing)
    B3 (|U| V)    Layer-1 pattern scratch: block delta = state of cell (tau - 1, kappa + delta)
    B4 (V)        Layer-2 output: the posterior predictive of the next cell

Layer 1 has one head per offset delta in U (the routing set of Definition 2). Its score is
Lambda [g_delta + lambda h] - Gamma_1 s' (+ the star term), its value B1, written to block delta.
Layer 2 scores beta <Sigma_Q x_n, Sigma_K x_n'> - Gamma_2 (s' + zeta') + sigma_star mu' and
averages the matched precedents' states (plus the star's pseudocount) into B4.

Deterministic rules need no star (alpha -> 0); stochastic rules prepend the auxiliary token
star at position 0 (``CompiledCircuit.star``), whose Layer-2 weight injects the Dirichlet
pseudocount V alpha, so that B4 is (n_{c,y} + alpha) / (n_c + V alpha) (Theorem 3).
The logits are ``readout_scale * B4`` on the states (argmax = the circuit's prediction); the
distribution itself is read from B4 (``blocks.1.hook_attn_out``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from tinyscope.errors import check
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.studies.spatial_induction.constructions.addressing import (
    offset_form,
    positional_table,
    singleton_margin,
    temporal_scale,
)
from tinyscope.studies.spatial_induction.serialize import Layout


@dataclass
class CircuitParameters:
    """The finite parameters of Theorem H.9, chosen by the recipe of App. H.7 (one circuit)."""

    N: int                 # stream length (with the final separator, and the star when present)
    k: int
    V: int
    gamma: float           # Layer-1 isolation margin (Lemma E.3 ii)
    lam: float             # temporal scale lambda (Eq. 26)
    Lambda: float          # Layer-1 logit scale
    Gamma1: float          # Layer-1 separator gate (Prop. G.6)
    eps_bar: float         # per-block error bound N e^{-Lambda gamma} (Lemma G.8)
    Delta: float           # Layer-2 separation
    beta: float            # Layer-2 scale
    Gamma2: float          # key-validity gate (Prop. H.7)
    sigma_star: float | None
    alpha: float | None
    kappa: float | None


def circuit_parameters(layout: Layout, stochastic: bool, kappa: float = 0.01, alpha: float = 1.0,
                       Lambda: float | None = None, beta: float | None = None) -> CircuitParameters:
    """Parameters of one circuit valid for every resolvable query (App. H.7).

    Deterministic: Delta = log(2 sqrt2 (N - 1)) + 1, Lambda the least integer with
    Lambda gamma > log((2k + 2) N). Stochastic (with star): Delta = log(4N / ((1 + V alpha) kappa)),
    eps_bar = kappa / (16 k Delta), Lambda >= log(16 k N Delta / kappa) / gamma, and
    sigma_star = a + log(V alpha) with a = beta (k - 2 k eps_bar). ``Lambda`` and ``beta`` override the
    recipe (``beta`` then fixes Delta = beta (1 - (2k + 2) eps_bar)), to study the trade-off of H.4.
    """
    lat = layout.lattice
    k, V = lat.k, lat.V
    N = layout.stream_length + 1 + (1 if stochastic else 0)
    gamma = singleton_margin(layout)
    lam = temporal_scale(layout, gamma)
    if stochastic:
        check(0 < kappa <= 1 and alpha > 0, f"kappa={kappa} must lie in (0, 1] and alpha={alpha} be > 0")
        Delta = math.log(4 * N / ((1 + V * alpha) * kappa))
        need = math.log(16 * k * N * Delta / kappa) / gamma
    else:
        Delta = math.log(2 * math.sqrt(2) * (N - 1)) + 1.0
        need = math.log((2 * k + 2) * N) / gamma
    Lam = float(Lambda) if Lambda is not None else float(math.floor(need) + 1)
    eps_bar = N * math.exp(-Lam * gamma)
    if beta is None:
        beta = Delta / (1 - (2 * k + 2) * eps_bar)
    else:
        Delta = beta * (1 - (2 * k + 2) * eps_bar)
    Gamma2 = 2 * beta * k * eps_bar + Delta
    sigma = beta * (k - 2 * k * eps_bar) + math.log(V * alpha) if stochastic else None
    return CircuitParameters(N, k, V, gamma, lam, Lam, Lam * gamma, eps_bar, Delta, beta, Gamma2, sigma,
                             alpha if stochastic else None, kappa if stochastic else None)


@dataclass
class Blocks:
    """Residual coordinates of Definition G.2."""

    V: int
    d: int
    n_routing: int

    @property
    def s(self) -> int:
        return 0

    @property
    def mu(self) -> int:
        return 1

    @property
    def one(self) -> int:
        return 2

    @property
    def b1(self) -> slice:
        return slice(3, 3 + self.V)

    @property
    def b2(self) -> slice:
        start = 3 + self.V
        return slice(start, start + 2 * self.d + 3)

    @property
    def zeta(self) -> int:
        return self.b2.stop - 1

    def b3(self, j: int) -> slice:
        start = self.b2.stop + j * self.V
        return slice(start, start + self.V)

    @property
    def b4(self) -> slice:
        start = self.b2.stop + self.n_routing * self.V
        return slice(start, start + self.V)

    @property
    def d_model(self) -> int:
        return self.b4.stop


class CompiledCircuit:
    """The compiled model with its layout, routing set, parameters and residual blocks."""

    def __init__(self, model: Transformer, layout: Layout, routing: list[tuple[int, ...]],
                 params: CircuitParameters, blocks: Blocks, star: bool):
        self.model, self.layout, self.routing, self.params, self.blocks, self.star = model, layout, routing, params, blocks, star

    def tokens(self, stream_inputs: np.ndarray) -> torch.Tensor:
        """Model input for task inputs (B, N_in): the star token is prepended when the circuit has one."""
        x = torch.as_tensor(np.asarray(stream_inputs), dtype=torch.long)
        if self.star:
            x = torch.cat([torch.full((len(x), 1), self.layout.V + 2, dtype=torch.long), x], dim=1)
        return x

    @torch.no_grad()
    def predictive(self, stream_inputs: np.ndarray) -> torch.Tensor:
        """The Layer-2 output B4 at every task input position: (B, N_in, V) probabilities."""
        _, cache = self.model.run_with_cache(self.tokens(stream_inputs), names_filter=["blocks.1.hook_attn_out"])
        out = cache["blocks.1.hook_attn_out"][..., self.blocks.b4]  # (B, N_in [+1], V)
        return out[:, 1:] if self.star else out

    def sizes(self) -> dict:
        if getattr(self, "extra_sizes", None):
            return dict(self.extra_sizes, heads=[1, 1])
        lat = self.layout.lattice
        return {"heads": [len(self.routing), 1], "d_mlp": [0, 0], "d_S": 2 * lat.dim, "d_p": 2 * lat.dim + 3,
                "B3_width": len(self.routing) * lat.V, "d_model": self.blocks.d_model,
                "gamma": self.params.gamma, "Lambda": self.params.Lambda, "block_error_threshold": 1 / (2 * lat.k + 2)}

    def describe(self) -> dict:
        return {"construction": getattr(self, "construction", "I"), "routing_set": [list(u) for u in self.routing], "star": self.star,
                "parameters": asdict(self.params), "sizes": self.sizes()}


def _routing(layout: Layout) -> tuple[list[tuple[int, ...]], list[int], list[int]]:
    """U in the lattice's order, and the block indices of Sigma_K (D_K) and Sigma_Q (D_K + u_d)."""
    lat = layout.lattice
    shape = np.asarray(lat.shape)
    U = [tuple(int(a) for a in u) for u in lat.routing_set()]
    index = {tuple(np.mod(u, shape)): i for i, u in enumerate(U)}
    succ = np.zeros(lat.dim, dtype=int)
    succ[-1] = 1
    sigma_k = [index[tuple(np.mod(o, shape))] for o in lat.offsets]
    sigma_q = [index[tuple(np.mod(np.add(o, succ), shape))] for o in lat.offsets]
    return U, sigma_k, sigma_q


def construction_one(layout: Layout, stochastic: bool = False, kappa: float = 0.01, alpha: float = 1.0,
                     Lambda: float | None = None, beta: float | None = None,
                     readout_scale: float = 10.0) -> CompiledCircuit:
    """Construction I + the Layer-2 matching head for ``layout``, as a foundation Transformer."""
    lat = layout.lattice
    V, d, k = lat.V, lat.dim, lat.k
    U, sigma_k, sigma_q = _routing(layout)
    p = circuit_parameters(layout, stochastic, kappa, alpha, Lambda, beta)
    blk = Blocks(V, d, len(U))
    n_addr = 2 + 2 * d
    D = max(n_addr + 2, k * V + 1, V)  # one head width serves both layers
    star = stochastic
    vocab = V + 2 + (1 if star else 0)
    n_ctx = layout.input_length + (1 if star else 0)
    cfg = TransformerConfig(vocab_size=vocab, n_ctx=n_ctx, d_model=blk.d_model, d_head=D, n_heads=[len(U), 1],
                            d_mlp=[0, 0], norm="none", attn_out_proj=True, qkv_bias=False, attn_out_bias=False,
                            unembed_bias=True, positions="learned", init="torch")
    model = Transformer(cfg)
    root_d = math.sqrt(D)  # cancels the attention's 1 / sqrt(d_head)

    W_E = np.zeros((vocab, blk.d_model))
    W_E[:V, blk.one] = 1.0
    W_E[np.arange(V), blk.b1.start + np.arange(V)] = 1.0
    W_E[V:V + 2, blk.s] = 1.0  # ROW_SEP and TIME_SEP
    W_E[V:V + 2, blk.one] = 1.0
    if star:
        W_E[V + 2, blk.mu] = 1.0
        W_E[V + 2, blk.one] = 1.0
    W_pos = np.zeros((n_ctx, blk.d_model))
    W_pos[1 if star else 0:, blk.b2] = positional_table(layout)

    addr = slice(blk.b2.start, blk.b2.start + n_addr)  # psi and phi: the addressing coordinates
    WQ1 = np.zeros((len(U) * D, blk.d_model))
    WK1 = np.zeros_like(WQ1)
    WV1 = np.zeros_like(WQ1)
    WO1 = np.zeros((blk.d_model, len(U) * D))
    star_logit = p.Lambda * (d + p.lam - p.gamma)  # Lemma G.7(b): Lambda gamma below the target floor
    for j, delta in enumerate(U):
        r = j * D
        A = offset_form(layout, delta, p.lam)  # p^T A p' = lam h + g_delta
        WQ1[r:r + n_addr, addr] = p.Lambda * A.T  # q = Lambda A^T p_n
        WK1[r:r + n_addr, addr] = np.eye(n_addr)  # k = p_n'
        WQ1[r + n_addr, blk.one] = -p.Gamma1  # separator gate (Prop. G.6)
        WK1[r + n_addr, blk.s] = 1.0
        WQ1[r + n_addr + 1, blk.one] = star_logit
        WK1[r + n_addr + 1, blk.mu] = 1.0
        WV1[r:r + V, blk.b1] = np.eye(V)
        WO1[blk.b3(j), r:r + V] = np.eye(V)
    WQ1 *= root_d

    WQ2 = np.zeros((D, blk.d_model))
    WK2 = np.zeros_like(WQ2)
    WV2 = np.zeros_like(WQ2)
    WO2 = np.zeros((blk.d_model, D))
    for i, (bq, bk) in enumerate(zip(sigma_q, sigma_k)):
        WQ2[i * V:(i + 1) * V, blk.b3(bq)] = p.beta * np.eye(V)  # beta Sigma_Q
        WK2[i * V:(i + 1) * V, blk.b3(bk)] = np.eye(V)  # Sigma_K
    WQ2[k * V, blk.one] = 1.0
    WK2[k * V, blk.s] = -p.Gamma2  # key-validity gate nu = s + zeta (Def. H.1)
    WK2[k * V, blk.zeta] = -p.Gamma2
    if star:
        WK2[k * V, blk.mu] = p.sigma_star
    WQ2 *= root_d
    WV2[:V, blk.b1] = np.eye(V)
    WV2[:V, blk.s] = 1.0 / V  # separators and star carry the uniform vector
    WV2[:V, blk.mu] = 1.0 / V
    WO2[blk.b4, :V] = np.eye(V)

    W_U = np.zeros((vocab, blk.d_model))
    W_U[np.arange(V), blk.b4.start + np.arange(V)] = readout_scale
    b_U = np.zeros(vocab)
    b_U[V:] = -readout_scale

    weights = {"W_E.weight": W_E, "W_pos.weight": W_pos,
               "blocks.0.attn.W_Q.weight": WQ1, "blocks.0.attn.W_K.weight": WK1, "blocks.0.attn.W_V.weight": WV1,
               "blocks.0.attn.W_O.weight": WO1, "blocks.1.attn.W_Q.weight": WQ2, "blocks.1.attn.W_K.weight": WK2,
               "blocks.1.attn.W_V.weight": WV2, "blocks.1.attn.W_O.weight": WO2, "W_U.weight": W_U, "W_U.bias": b_U}
    state = model.state_dict()
    check(set(weights) == set(state), f"construction sets {sorted(set(weights) ^ set(state))} inconsistently")
    model.load_state_dict({n: torch.as_tensor(w, dtype=torch.float32) for n, w in weights.items()})
    model.eval()
    return CompiledCircuit(model, layout, U, p, blk, star)


class StarPrepended(torch.nn.Module):
    """A compiled model that takes task streams: prepends the star token and drops its output row.

    Its hooks (``.inner``) see the stream with the star at position 0.
    """

    prepends_star = True

    def __init__(self, inner: Transformer, star_id: int):
        super().__init__()
        self.inner, self.star_id = inner, star_id

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        star = torch.full((tokens.shape[0], 1), self.star_id, dtype=tokens.dtype, device=tokens.device)
        return self.inner(torch.cat([star, tokens], dim=1))[:, 1:]  # (B, T, V + 3)


def table8(layout: Layout) -> dict:
    """What the two constructions require on ``layout`` (App. G.6, Table 8).

    Construction I: heads |U|, no MLP, d_S = 2d, d_p = d_S + 3, |U| V wide B3, residual
    (|U| + 2) V + 2d + 6, block-error threshold 1 / (2k + 2), margin gamma and the least
    integer Lambda with Lambda gamma >= log((2k + 2) N). Construction II: the colors M of the best
    periodic admissible coloring (Table 6), the MLP width bound 2 |U| M (V - 1) + M + 2 and the
    aggregate width M + 1 (sizes only: Construction II is not compiled here).
    """
    from tinyscope.studies.spatial_induction.constructions.colorings import periodic_coloring

    lat = layout.lattice
    U = lat.routing_set()
    k, V, d = lat.k, lat.V, lat.dim
    N = layout.stream_length + 1
    gamma = singleton_margin(layout)
    M = int(periodic_coloring(U, lat.shape).max() + 1)
    return {
        "I": {"heads": len(U), "d_mlp": 0, "d_S": 2 * d, "d_p": 2 * d + 3, "B3_width": len(U) * V,
              "d_model": (len(U) + 2) * V + 2 * d + 6, "block_error_threshold": 1 / (2 * k + 2),
              "gamma": gamma, "Lambda": math.ceil(math.log((2 * k + 2) * N) / gamma)},
        "II": {"colors": M, "d_mlp_bound": 2 * len(U) * M * (V - 1) + M + 2, "B3_agg_width": M + 1},
    }
