"""Sequence quantifiers (NC-FFN paper, "self-forgetting quantifiers"): a small causal block that
turns per-token fuzzy memberships into running soft quantifiers over the prefix.

For memberships ``M_t in [0, 1]^U`` (``M_t = sigmoid(W_m x_t + b_m)``) and per-unit decays::

    soft existential   E_t = max(M_t, gamma * E_{t-1})          "some earlier token was M"
    soft proportion    P_t = (1 - lam) * M_t + lam * P_{t-1}     "what share of recent tokens were M"

with ``E_{-1} = P_{-1} = 0``. Unrolled, ``E_t = max_{s<=t} gamma^(t-s) M_s`` and
``P_t = sum_{s<=t} (1-lam) lam^(t-s) M_s``. The decays are ``gamma = sigmoid(theta_gamma)`` and
``lam = sigmoid(theta_lam)``, learned per unit and initialised sticky (``init_decay``, 0.99 by
default: a half-life of ~69 tokens). A unit's half-life is ``ln 0.5 / ln gamma`` tokens.

How the decay logits ``theta`` are optimised is open in the paper (digest: "per-unit learned
decays, initialised at the non-forgetting limit"; the parametrisation is MISSING), so both knobs
are parameters (:func:`optimizer_groups`): ``decay_lr_mult`` scales their AdamW rate, and
``decay_weight_decay`` is their own AdamW weight decay, 0 by default. Decoupled weight decay on a
logit pulls it to 0, i.e. the decay to 0.5 (a half-life of 1 token): applied to theta it
shortens every half-life whether or not the loss asks for it, so a "learned" half-life would be
the regulariser's (docs/results/ncffn.md measures this); nanoGPT's recipe, which the presets
follow, likewise decays only the 2-D weight matrices.

Two implementations that must agree (``tests/studies/ncffn/test_quantifiers.py``):

* :func:`existential_loop` / :func:`proportion_loop`: the recurrences, a Python loop over time;
* :func:`existential_scan` / :func:`proportion_scan`: O(T) with no loop over time. The existential
  is a running maximum in log space, ``log E_t = max_{s<=t}(log M_s + (t-s) log gamma)``, the
  proportion a decayed prefix sum; both work in chunks of C tokens (within a chunk: ``cummax`` /
  a (C, C) decay matmul; across chunks: the same recurrence on the K = T/C chunk ends), so no
  offset grows with T and float32 stays exact to ~1e-6.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.errors import check
from tinyscope.models.hooks import HookPoint


@dataclass
class QuantifierConfig:
    """Where and how big the quantifier blocks of a GPT are (``layers=[]``: none)."""

    layers: list[int] = field(default_factory=list)  # insert a block after the FFN of these layers
    n_exist: int = 16        # soft-existential units per block
    n_prop: int = 16         # soft-proportion units per block
    init_decay: float = 0.99  # gamma and lam at init ("sticky", half-life ~69 tokens)
    decay_lr_mult: float = 1.0  # AdamW rate of the decay logits theta, in units of train.lr
    decay_weight_decay: float = 0.0  # AdamW (decoupled) weight decay of theta; train.weight_decay elsewhere

    def __post_init__(self):
        if isinstance(self.layers, int):
            self.layers = [self.layers]
        check(all(l >= 0 for l in self.layers), f"quant.layers={self.layers} must be layer indices >= 0")
        check(self.n_exist >= 0 and self.n_prop >= 0 and self.n_exist + self.n_prop >= 1,
              f"quant.n_exist={self.n_exist}, quant.n_prop={self.n_prop}: need >= 0 each and >= 1 unit in all")
        check(0.0 < self.init_decay < 1.0, f"quant.init_decay={self.init_decay} must lie in (0, 1)")
        check(self.decay_lr_mult > 0 and math.isfinite(self.decay_lr_mult),
              f"quant.decay_lr_mult={self.decay_lr_mult} must be a positive number")
        check(self.decay_weight_decay >= 0 and math.isfinite(self.decay_weight_decay),
              f"quant.decay_weight_decay={self.decay_weight_decay} must be a number >= 0")


# ---------------------------------------------------------------- reference recurrences
def existential_loop(m: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """E_t = max(M_t, gamma E_{t-1}), E_{-1} = 0, step by step. m: (B, T, U), gamma: (U,)."""
    e = torch.zeros_like(m[:, 0])  # (B, U)
    out = []
    for t in range(m.shape[1]):
        e = torch.maximum(m[:, t], gamma * e)  # (B, U)
        out.append(e)
    return torch.stack(out, dim=1)  # (B, T, U)


def proportion_loop(m: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """P_t = (1 - lam) M_t + lam P_{t-1}, P_{-1} = 0, step by step. m: (B, T, U), lam: (U,)."""
    p = torch.zeros_like(m[:, 0])  # (B, U)
    out = []
    for t in range(m.shape[1]):
        p = (1 - lam) * m[:, t] + lam * p  # (B, U)
        out.append(p)
    return torch.stack(out, dim=1)  # (B, T, U)


# ---------------------------------------------------------------- parallel scans
CHUNK = 32      # tokens per chunk of the two-level scans
MIN_LOG_DECAY = -30.0  # decays below e^-30 act as exactly "no memory" (clamped in both forms)


def _chunked(x: torch.Tensor, chunk: int, fill: float) -> tuple[torch.Tensor, int]:
    """(B, T, U) -> (B, U, K, C) with time padded at the end by ``fill`` to K*C; returns (x, T)."""
    B, T, U = x.shape
    K = -(-T // chunk)
    x = x.transpose(1, 2)  # (B, U, T)
    if K * chunk != T:
        x = F.pad(x, (0, K * chunk - T), value=fill)
    return x.reshape(B, U, K, chunk), T


def _unchunked(y: torch.Tensor, T: int) -> torch.Tensor:
    """(B, U, K, C) -> (B, T, U)."""
    B, U = y.shape[:2]
    return y.reshape(B, U, -1)[..., :T].transpose(1, 2)  # (B, T, U)


def existential_scan(log_m: torch.Tensor, log_gamma: torch.Tensor, chunk: int = CHUNK) -> torch.Tensor:
    """The soft existential in O(T) as a running maximum in log space, in two levels.

    ``log E_t = max_{s<=t} (log M_s + (t-s) lg)`` with lg = log(gamma). Within each chunk of C
    tokens: ``cummax_r(log M_r - r lg) + r lg`` (offsets stay below C |lg|, so float32 is exact
    enough); across the K = T/C chunks the chunk maxima are combined by the same recurrence with
    decay ``C lg``, ``G_k = k C lg + cummax_j(L_j - j C lg)``, in float64 on the small (B, U, K).

    log_m: (B, T, U) log-memberships (<= 0); log_gamma: (U,) (<= 0). Returns E: (B, T, U).
    """
    x, T = _chunked(log_m, chunk, fill=-1e4)  # (B, U, K, C)
    K = x.shape[2]
    lg = log_gamma.clamp_min(MIN_LOG_DECAY).to(x.dtype).view(1, -1, 1, 1)  # (1, U, 1, 1)
    r = torch.arange(chunk, device=x.device, dtype=x.dtype)  # (C,)
    local = torch.cummax(x - r * lg, dim=-1).values + r * lg  # (B, U, K, C) max over this chunk only
    lg64 = lg.double().view(1, -1, 1)  # (1, U, 1)
    k = torch.arange(K, device=x.device, dtype=torch.float64) * chunk  # (K,)
    ends = local[..., -1].double()  # (B, U, K) chunk maxima, measured at the chunk's end
    carry = torch.cummax(ends - k * lg64, dim=-1).values + k * lg64  # (B, U, K) log E at each chunk end
    before = F.pad(carry[..., :-1], (1, 0), value=-1e4).to(x.dtype).unsqueeze(-1)  # (B, U, K, 1)
    out = torch.maximum(local, before + (r + 1) * lg)  # (B, U, K, C)
    return _unchunked(torch.exp(out), T)  # (B, T, U)


def decayed_cumsum(x: torch.Tensor, log_decay: torch.Tensor, chunk: int = CHUNK) -> torch.Tensor:
    """``y_t = sum_{s<=t} decay^(t-s) x_s`` (i.e. ``y_t = x_t + decay y_{t-1}``) in O(T).

    Chunks of C tokens are summed with a (C, C) lower-triangular decay matrix (one batched matmul
    per unit); the chunk totals form the same recurrence with decay ``decay^C`` over K = T/C
    steps, solved by recursion (depth log_C T), and are added back with ``decay^(r+1)``. Every
    factor is a power ``decay^n <= 1``: nothing overflows. x: (B, T, U); log_decay: (U,).
    Returns (B, T, U).
    """
    B, T, U = x.shape
    ld = log_decay.clamp_min(MIN_LOG_DECAY).to(x.dtype)  # (U,)
    c = min(chunk, T)
    K = -(-T // c)
    idx = torch.arange(c, device=x.device)
    lag = (idx.view(1, -1) - idx.view(-1, 1)).to(x.dtype)  # (C, C) [s, d] -> d - s
    mat = torch.exp(lag.clamp_min(0) * ld.view(-1, 1, 1)) * (lag >= 0)  # (U, C, C) decay^(d-s) for d >= s
    xu = x.permute(2, 0, 1)  # (U, B, T)
    if K * c != T:
        xu = F.pad(xu, (0, K * c - T))
    local = torch.bmm(xu.reshape(U, B * K, c), mat).view(U, B, K, c)  # (U, B, K, C) sums within a chunk
    if K > 1:
        totals = local[..., -1].permute(1, 2, 0)  # (B, K, U)
        carry = decayed_cumsum(totals, ld * c, chunk).permute(2, 0, 1)  # (U, B, K) y at each chunk end
        before = F.pad(carry[..., :-1], (1, 0)).unsqueeze(-1)  # (U, B, K, 1)
        r1 = torch.arange(1, c + 1, device=x.device, dtype=x.dtype)  # (C,)
        local = local + before * torch.exp(r1 * ld.view(-1, 1, 1, 1))  # (U, B, K, C)
    return local.reshape(U, B, K * c)[..., :T].permute(1, 2, 0)  # (B, T, U)


def proportion_scan(m: torch.Tensor, log_lam: torch.Tensor, chunk: int = CHUNK) -> torch.Tensor:
    """The soft proportion ``P_t = (1-lam) sum_{s<=t} lam^(t-s) M_s`` by :func:`decayed_cumsum`.

    m: (B, T, U) memberships; log_lam: (U,) (<= 0). Returns P: (B, T, U).
    """
    return -torch.expm1(log_lam) * decayed_cumsum(m, log_lam, chunk)  # (B, T, U)


# ---------------------------------------------------------------- the block
class QuantifierBlock(nn.Module):
    """y = W_o [E ; P] with E, P the soft existential and proportion of M = sigmoid(W_m x).

    x: (B, T, D) -> y: (B, T, D); causal (y_t depends on x_{<=t} only). Hooks:
    ``hook_membership`` (B, T, n_exist + n_prop), ``hook_exist`` (B, T, n_exist),
    ``hook_prop`` (B, T, n_prop). ``use_scan=False`` runs the loop reference instead.
    """

    def __init__(self, d_model: int, n_exist: int = 16, n_prop: int = 16, init_decay: float = 0.99,
                 bias: bool = True):
        super().__init__()
        self.n_exist, self.n_prop = n_exist, n_prop
        self.W_m = nn.Linear(d_model, n_exist + n_prop, bias=bias)
        self.W_o = nn.Linear(n_exist + n_prop, d_model, bias=bias)
        logit = math.log(init_decay / (1 - init_decay))
        self.theta_gamma = nn.Parameter(torch.full((n_exist,), logit))
        self.theta_lam = nn.Parameter(torch.full((n_prop,), logit))
        self.use_scan = True
        self.hook_membership, self.hook_exist, self.hook_prop = HookPoint(), HookPoint(), HookPoint()

    @property
    def gamma(self) -> torch.Tensor:
        return torch.sigmoid(self.theta_gamma)  # (n_exist,)

    @property
    def lam(self) -> torch.Tensor:
        return torch.sigmoid(self.theta_lam)  # (n_prop,)

    def half_lives(self) -> dict[str, torch.Tensor]:
        """Tokens for each unit's memory to halve: ln 0.5 / ln(decay)."""
        ln_half = math.log(0.5)
        return {"exist": ln_half / F.logsigmoid(self.theta_gamma.detach()),
                "prop": ln_half / F.logsigmoid(self.theta_lam.detach())}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.W_m(x)  # (B, T, U)
        m = self.hook_membership(torch.sigmoid(pre))  # (B, T, U)
        if self.use_scan:
            # log M: exact and stable from the pre-activation, unless a hook replaced M
            log_m = torch.log(m.clamp_min(1e-30)) if self.hook_membership.has_hooks else F.logsigmoid(pre)
            e = existential_scan(log_m[..., :self.n_exist], F.logsigmoid(self.theta_gamma))  # (B, T, n_exist)
            p = proportion_scan(m[..., self.n_exist:], F.logsigmoid(self.theta_lam))  # (B, T, n_prop)
        else:
            e = existential_loop(m[..., :self.n_exist], self.gamma)  # (B, T, n_exist)
            p = proportion_loop(m[..., self.n_exist:], self.lam)  # (B, T, n_prop)
        e, p = self.hook_exist(e), self.hook_prop(p)
        return self.W_o(torch.cat([e, p], dim=-1))  # (B, T, D)


# ---------------------------------------------------------------- optimisation of the decays
def decay_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The decay logits (``theta_gamma``, ``theta_lam``) of every quantifier block in ``module``."""
    return [p for m in module.modules() if isinstance(m, QuantifierBlock) for p in (m.theta_gamma, m.theta_lam)]


def optimizer_groups(module: nn.Module, lr: float, weight_decay: float, quant: QuantifierConfig) -> list[dict]:
    """AdamW parameter groups: every parameter at (``lr``, ``weight_decay``) except the decay
    logits, at (``quant.decay_lr_mult * lr``, ``quant.decay_weight_decay``). ``base_lr`` is the
    rate the trainer's schedule multiplies."""
    decays = decay_parameters(module)
    ids = {id(p) for p in decays}
    rest = [p for p in module.parameters() if id(p) not in ids]
    groups = [dict(params=rest, lr=lr, base_lr=lr, weight_decay=weight_decay)]
    if decays:
        dlr = lr * quant.decay_lr_mult
        groups.append(dict(params=decays, lr=dlr, base_lr=dlr, weight_decay=quant.decay_weight_decay))
    return groups
