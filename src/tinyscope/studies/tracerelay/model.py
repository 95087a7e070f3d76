"""TraceRelay: attention-aligned recurrence over rolling traces (paper 001, Sec. 2-3).

One layer with input stream h (B, T, H), trace width d, windows L (left) and R (right), stride
W > R, and RMSNorm where Sec. 2.1 puts it (before Right, before Left, before the FFN)::

    o^R_i   = Attn_R(h_i, h_{i:i+R})                      Eq. (1), width d, keys valid & in range
    delta_i = alpha * tanh(P_delta(o^R_i))                 Eq. (1), alpha = pi
    u_t     = delta_{t-W} if t >= W and source valid       Eq. (2); q_t = source t-W is valid
    theta_t = wrap(theta_{t-W} + u_t),  v_t = v_{t-W} | q_t     Eq. (3); ablation: wrap(u_t), q_t
    m_t     = h_t + P_phi([cos theta_t; sin theta_t] * v_t)   Eq. (4), zero readout until v_t
    o^L_t   = Attn_L(m_t, m_{t-L:t})                       Eq. (5), width d
    h~_t    = m_t + P_L(o^L_t),   h'_t = h~_t + FFN(h~_t)  Eq. (6), SwiGLU FFN

Every map is bias-free. The model: a one-hot (bias-free) input projection V -> H, the layers,
a final RMSNorm and an output head with bias (Sec. 3; parameter counts of Table 5).

Initialization, which the paper does not state: every map is PyTorch's default for its module.
The input projection is stored as an embedding table (V, H); ``embed_init`` chooses its start:
``"normal"``, N(0, 1), ``nn.Embedding``'s default, or ``"onehot_linear"``, U(-1/sqrt(V), 1/sqrt(V)),
what ``nn.Linear(V, H, bias=False)`` applied to one-hot symbols starts from (Sec. 3's "one-hot
symbols, a bias-free input projection"). The two differ only in that table (``"onehot_linear"``
redraws it after every other weight, so one seed gives both the same layers). ``init_std`` = s
replaces all of that with one normal start: every Linear weight and the input table N(0, s^2),
the head's bias zero (GPT-2's s = 0.02 is the common choice); RMSNorm gains stay 1.

Execution: the fast path uses banded local attention (O(T * window)) and the stride-wise
cumulative-sum phase scan; ``use_reference(True)`` switches to dense-mask attention and the
per-position loop. ``prefill(tokens)`` returns a :class:`RelayState` whose size is fixed
(per layer: the last W normalized inputs the Right writer needs, the phase tail of the W
lineages, the last L keys/values of Left attention), and ``step(token, state)`` advances by
one token; decoding reproduces the parallel forward.

Padding: ``valid`` (B, T) marks real tokens. Invalid positions are masked as attention keys
and as relay sources (zero increment, no lineage initialization); the relay still advances over
them (Sec. 2.2). Left padding therefore leaves every valid position's output unchanged, which
is what batched decoding of different-length prompts uses.

Input checks: ``forward`` and ``prefill`` (hence ``run_with_cache`` / ``run_with_hooks``) take
integer ids (B, T), T >= 1 (no upper bound: the model has no context limit), in
[0, vocab_size - 1], and ``valid`` of the same shape (bool, or 0/1); ``step`` takes (B,) ids
and a :class:`RelayState` of the same batch. Anything else raises
:class:`~tinyscope.errors.InputError` naming the argument (:mod:`tinyscope.models.inputs`).

Hook names: ``blocks.{l}.hook_resid_pre``, ``blocks.{l}.right.hook_q|k|v|pattern``,
``blocks.{l}.relay.hook_increment`` (delta at source positions), ``blocks.{l}.relay.hook_phase``
(theta), ``blocks.{l}.relay.hook_readout`` (P_phi output), ``blocks.{l}.hook_resid_mid`` (m),
``blocks.{l}.left.hook_q|k|v|pattern``, ``blocks.{l}.hook_attn_out`` (P_L o^L),
``blocks.{l}.mlp.hook_pre|post``, ``blocks.{l}.hook_mlp_out``, ``blocks.{l}.hook_resid_post``.
Banded patterns are (B, heads, T, window), slot s = key i + lo + s. ``step`` runs no hooks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.errors import InputError, check
from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.models.inputs import check_mask, check_tokens
from tinyscope.studies.tracerelay.ops.local_attention import (
    local_attention_banded,
    local_attention_dense,
    window_attention,
)
from tinyscope.studies.tracerelay.ops.phase_scan import phase_scan, phase_scan_reference, wrap

EMBED_INITS = ("normal", "onehot_linear")


@dataclass
class TraceRelayConfig:
    """Geometry of a TraceRelay model; defaults are the paper's (Sec. 3) at d_c = 64."""

    vocab_size: int = 2
    n_out: int = 3
    d_model: int = 64                                           # H, residual width
    d_trace: list[int] = field(default_factory=lambda: [64, 64, 64])  # d per layer
    n_heads: int = 4
    d_ffn: int = 256
    left_window: int = 15                                       # L: preceding positions Left sees
    right_window: int = 7                                       # R: following positions Right sees
    stride: int = 8                                             # W, relay stride (W > R)
    alpha: float = math.pi                                      # phase-update scale
    inherit: bool = True                                        # False: the no-inheritance ablation
    norm_eps: float = 1e-6
    embed_init: str = "normal"                                  # "normal" N(0,1) | "onehot_linear" U(+-1/sqrt V)
    init_std: float | None = None                               # None: PyTorch's starts; s: every weight N(0, s^2)

    def __post_init__(self):
        if isinstance(self.d_trace, int):
            self.d_trace = [self.d_trace] * 3
        check(self.vocab_size >= 1, f"model.vocab_size={self.vocab_size} must be >= 1")
        check(self.n_out >= 1, f"model.n_out={self.n_out} must be >= 1")
        check(self.d_model >= 1, f"model.d_model={self.d_model} must be >= 1")
        check(len(self.d_trace) >= 1, "model.d_trace must list at least one layer")
        check(self.n_heads >= 1, f"model.n_heads={self.n_heads} must be >= 1")
        for d in self.d_trace:
            check(d >= 1 and d % self.n_heads == 0,
                  f"model.d_trace={self.d_trace}: each width must be a positive multiple of n_heads={self.n_heads}")
        check(self.d_ffn >= 1, f"model.d_ffn={self.d_ffn} must be >= 1")
        check(self.left_window >= 0, f"model.left_window={self.left_window} must be >= 0")
        check(self.right_window >= 0, f"model.right_window={self.right_window} must be >= 0")
        check(self.stride > self.right_window,
              f"model.stride={self.stride} must exceed model.right_window={self.right_window} (causality: W > R)")
        check(self.alpha > 0, f"model.alpha={self.alpha} must be > 0")
        check(self.embed_init in EMBED_INITS,
              f"model.embed_init={self.embed_init!r} must be one of {', '.join(EMBED_INITS)}")
        check(self.init_std is None or (math.isfinite(self.init_std) and self.init_std > 0),
              f"model.init_std={self.init_std} must be None or a positive number")
        check(self.init_std is None or self.embed_init == "normal",
              f"model.init_std={self.init_std} draws the input table too; leave model.embed_init at 'normal'")

    @property
    def n_layers(self) -> int:
        return len(self.d_trace)


class SwiGLU(nn.Module):
    """FFN(x) = W_down(silu(W_gate x) * W_up x), three bias-free H x d_ffn matrices."""

    def __init__(self, d_model: int, d_ffn: int):
        super().__init__()
        self.W_gate = nn.Linear(d_model, d_ffn, bias=False)
        self.W_up = nn.Linear(d_model, d_ffn, bias=False)
        self.W_down = nn.Linear(d_ffn, d_model, bias=False)
        self.hook_pre, self.hook_post = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.hook_pre(self.W_gate(x))  # (..., d_ffn)
        hidden = self.hook_post(F.silu(gate) * self.W_up(x))  # (..., d_ffn)
        return self.W_down(hidden)  # (..., H)


class LocalAttention(nn.Module):
    """Multi-head attention over a local window; Q/K/V map H -> d, output projection d -> d."""

    def __init__(self, d_model: int, d: int, n_heads: int, lo: int, hi: int):
        super().__init__()
        self.n_heads, self.d_head, self.lo, self.hi = n_heads, d // n_heads, lo, hi
        self.W_Q = nn.Linear(d_model, d, bias=False)
        self.W_K = nn.Linear(d_model, d, bias=False)
        self.W_V = nn.Linear(d_model, d, bias=False)
        self.W_O = nn.Linear(d, d, bias=False)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_pattern, self.hook_z = HookPoint(), HookPoint()

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.n_heads, self.d_head)).transpose(-2, -3)  # (B, nh, T, dh)

    def forward(self, x: torch.Tensor, valid: torch.Tensor | None, reference: bool = False) -> torch.Tensor:
        q = self.hook_q(self.heads(self.W_Q(x)))  # (B, nh, T, dh)
        k = self.hook_k(self.heads(self.W_K(x)))  # (B, nh, T, dh)
        v = self.hook_v(self.heads(self.W_V(x)))  # (B, nh, T, dh)
        if reference:
            z, pattern = local_attention_dense(q, k, v, valid, self.lo, self.hi)  # (B, nh, T, dh), (B, nh, T, T)
        else:
            z, pattern = local_attention_banded(q, k, v, valid, self.lo, self.hi,
                                                need_pattern=self.hook_pattern.has_hooks)  # (B, nh, T, w)
        if pattern is not None:
            self.hook_pattern(pattern)
        z = self.hook_z(z)
        return self.W_O(z.transpose(1, 2).flatten(2))  # (B, T, d)

    def kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.heads(self.W_K(x)), self.heads(self.W_V(x))  # (B, nh, T, dh) each

    def attend_window(self, x_query: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
        """One query per row (decoding): x_query (B, H), k/v (B, nh, w, dh), mask (B, w) -> (B, d)."""
        q = self.W_Q(x_query).unflatten(-1, (self.n_heads, self.d_head))  # (B, nh, dh)
        return self.W_O(window_attention(q, k, v, mask).flatten(1))  # (B, d)


class Relay(nn.Module):
    """The bounded increment, the delayed delivery, the phase scan and the cos/sin readout."""

    def __init__(self, cfg: TraceRelayConfig, d: int):
        super().__init__()
        self.stride, self.alpha, self.inherit = cfg.stride, cfg.alpha, cfg.inherit
        self.P_delta = nn.Linear(d, d, bias=False)
        self.P_phi = nn.Linear(2 * d, cfg.d_model, bias=False)
        self.hook_increment, self.hook_phase, self.hook_readout = HookPoint(), HookPoint(), HookPoint()

    def increment(self, o_right: torch.Tensor) -> torch.Tensor:
        return self.alpha * torch.tanh(self.P_delta(o_right))  # (..., d), |delta| <= alpha

    def readout(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        feats = torch.cat([torch.cos(theta), torch.sin(theta)], -1) * v[..., None].to(theta.dtype)  # (..., 2d)
        return self.P_phi(feats)  # (..., H), exactly zero where v is False

    def forward(self, o_right: torch.Tensor, valid: torch.Tensor, reference: bool = False):
        """o_right: (B, T, d) at source positions; valid: (B, T). Returns (readout, theta, v)."""
        B, T, d = o_right.shape
        W = self.stride
        delta = self.hook_increment(self.increment(o_right))  # (B, T, d)
        u = torch.cat([delta.new_zeros(B, min(W, T), d), delta[:, :max(T - W, 0)]], 1)  # (B, T, d) Eq. (2)
        q = torch.cat([valid.new_zeros(B, min(W, T)), valid[:, :max(T - W, 0)]], 1)  # (B, T)
        u = u * q[..., None].to(u.dtype)
        scan = phase_scan_reference if reference else phase_scan
        theta, v = scan(u, q, W, inherit=self.inherit)  # (B, T, d), (B, T)
        theta = self.hook_phase(theta)
        return self.hook_readout(self.readout(theta, v)), theta, v


def _tail(x: torch.Tensor, n: int, dim: int, fill=0) -> torch.Tensor:
    """The last ``n`` entries of ``x`` along ``dim``, front-filled with ``fill`` when shorter."""
    T = x.shape[dim]
    if T >= n:
        return x.narrow(dim, T - n, n)
    shape = list(x.shape)
    shape[dim] = n - T
    return torch.cat([x.new_full(shape, fill), x], dim)


@dataclass
class LayerState:
    """Bounded decoding state of one layer (no entry grows with the sequence)."""

    right_x: torch.Tensor      # (B, W, H) normalized inputs of positions t-W .. t-1
    right_valid: torch.Tensor  # (B, W)
    theta: torch.Tensor        # (B, W, d) phases of positions t-W .. t-1 (one per lineage)
    v: torch.Tensor            # (B, W) lineage validity flags
    left_k: torch.Tensor       # (B, nh, L, dh) Left keys of positions t-L .. t-1
    left_v: torch.Tensor       # (B, nh, L, dh)
    left_valid: torch.Tensor   # (B, L)

    def tensors(self) -> list[torch.Tensor]:
        return [self.right_x, self.right_valid, self.theta, self.v, self.left_k, self.left_v, self.left_valid]


@dataclass
class RelayState:
    layers: list[LayerState]
    last_logits: torch.Tensor  # (B, n_out) logits at the last position seen
    position: int = 0          # tokens consumed (bookkeeping only; not needed by the recurrence)

    def numel(self) -> int:
        return sum(t.numel() for layer in self.layers for t in layer.tensors()) + self.last_logits.numel()

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for layer in self.layers for t in layer.tensors()) \
            + self.last_logits.numel() * self.last_logits.element_size()


class TraceRelayLayer(nn.Module):
    def __init__(self, cfg: TraceRelayConfig, d: int):
        super().__init__()
        H = cfg.d_model
        self.cfg = cfg
        self.norm_right = nn.RMSNorm(H, eps=cfg.norm_eps)
        self.right = LocalAttention(H, d, cfg.n_heads, 0, cfg.right_window)
        self.relay = Relay(cfg, d)
        self.norm_left = nn.RMSNorm(H, eps=cfg.norm_eps)
        self.left = LocalAttention(H, d, cfg.n_heads, -cfg.left_window, 0)
        self.P_L = nn.Linear(d, H, bias=False)
        self.norm_ffn = nn.RMSNorm(H, eps=cfg.norm_eps)
        self.mlp = SwiGLU(H, cfg.d_ffn)
        self.hook_resid_pre, self.hook_resid_mid, self.hook_resid_post = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_out, self.hook_mlp_out = HookPoint(), HookPoint()

    def forward(self, h: torch.Tensor, valid: torch.Tensor, dense: bool = False, loop: bool = False,
                collect: bool = False):
        """dense: dense-mask attention instead of banded; loop: the loop phase scan."""
        h = self.hook_resid_pre(h)  # (B, T, H)
        x = self.norm_right(h)  # (B, T, H)
        o_right = self.right(x, valid, dense)  # (B, T, d) Eq. (1) at source positions
        readout, theta, v = self.relay(o_right, valid, loop)  # (B, T, H)
        m = self.hook_resid_mid(h + readout)  # (B, T, H) Eq. (4)
        y = self.norm_left(m)  # (B, T, H)
        h_tilde = m + self.hook_attn_out(self.P_L(self.left(y, valid, dense)))  # (B, T, H) Eq. (6)
        out = self.hook_resid_post(h_tilde + self.hook_mlp_out(self.mlp(self.norm_ffn(h_tilde))))  # (B, T, H)
        if not collect:
            return out, None
        W, L = self.cfg.stride, self.cfg.left_window
        k, vv = self.left.kv(y)  # (B, nh, T, dh)
        state = LayerState(
            right_x=_tail(x, W, 1), right_valid=_tail(valid, W, 1, False),
            theta=_tail(theta, W, 1), v=_tail(v, W, 1, False),
            left_k=_tail(k, L, 2), left_v=_tail(vv, L, 2), left_valid=_tail(valid, L, 1, False))
        return out, state

    def step(self, h: torch.Tensor, s: LayerState) -> tuple[torch.Tensor, LayerState]:
        """One new (valid) position t: h (B, H) -> (B, H) and the advanced state."""
        R = self.cfg.right_window
        x = self.norm_right(h)  # (B, H)
        # the increment delivered now was written at t - W from keys t-W .. t-W+R (all in the past)
        k, v = self.right.kv(s.right_x[:, :R + 1])  # (B, nh, R+1, dh)
        o_right = self.right.attend_window(s.right_x[:, 0], k, v, s.right_valid[:, :R + 1])  # (B, d)
        q = s.right_valid[:, 0]  # (B,)
        u = self.relay.increment(o_right) * q[:, None].to(h.dtype)  # (B, d)
        if self.relay.inherit:
            theta, flag = wrap(s.theta[:, 0] + u), s.v[:, 0] | q  # (B, d), (B,)
        else:
            theta, flag = wrap(u), q
        m = h + self.relay.readout(theta, flag)  # (B, H)
        y = self.norm_left(m)  # (B, H)
        k_new, v_new = self.left.kv(y[:, None])  # (B, nh, 1, dh)
        keys = torch.cat([s.left_k, k_new], 2)  # (B, nh, L+1, dh)
        values = torch.cat([s.left_v, v_new], 2)  # (B, nh, L+1, dh)
        kmask = torch.cat([s.left_valid, s.left_valid.new_ones(h.shape[0], 1)], 1)  # (B, L+1)
        h_tilde = m + self.P_L(self.left.attend_window(y, keys, values, kmask))  # (B, H)
        out = h_tilde + self.mlp(self.norm_ffn(h_tilde))  # (B, H)
        ones = s.right_valid.new_ones(h.shape[0], 1)
        new = LayerState(
            right_x=torch.cat([s.right_x[:, 1:], x[:, None]], 1), right_valid=torch.cat([s.right_valid[:, 1:], ones], 1),
            theta=torch.cat([s.theta[:, 1:], theta[:, None]], 1), v=torch.cat([s.v[:, 1:], flag[:, None]], 1),
            left_k=keys[:, :, 1:], left_v=values[:, :, 1:], left_valid=kmask[:, 1:])
        return out, new


class TraceRelay(HookedModule):
    """``forward(tokens, valid=None) -> logits`` (B, T, n_out); logits at t read tokens <= t."""

    def __init__(self, cfg: TraceRelayConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)  # one-hot x bias-free projection
        self.blocks = nn.ModuleList(TraceRelayLayer(cfg, d) for d in cfg.d_trace)
        self.norm_final = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.n_out, bias=True)
        self.dense_attention = False
        self.loop_scan = False
        self.hook_embed = HookPoint()
        if cfg.embed_init == "onehot_linear":  # after every other weight: the layers match "normal"'s
            bound = 1 / math.sqrt(cfg.vocab_size)
            nn.init.uniform_(self.embed.weight, -bound, bound)
        if cfg.init_std is not None:
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, std=cfg.init_std)
                    if getattr(module, "bias", None) is not None:
                        nn.init.zeros_(module.bias)
        self.setup_hooks()

    def use_reference(self, on: bool = True, attention: bool = True, scan: bool = True) -> "TraceRelay":
        """Switch to the references (slow; for checking the fast path): dense-mask attention
        when ``attention``, the per-position loop scan when ``scan``."""
        self.dense_attention, self.loop_scan = on and attention, on and scan
        return self

    def check_tokens(self, tokens: torch.Tensor, name: str = "tokens", ndim: int = 2) -> torch.Tensor:
        """Raise :class:`~tinyscope.errors.InputError` unless ``tokens`` is an integer (B, T) tensor
        (``ndim=1``: (B,)) with T >= 1 and ids in [0, vocab_size - 1] on the model's device."""
        V = self.cfg.vocab_size
        return check_tokens(tokens, vocab_size=V, name=name, ndim=ndim, range_note=f"model.vocab_size={V}",
                            device=self.head.weight.device)

    def _valid(self, tokens: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """Check ``tokens`` and ``valid``; the validity mask as bool (B, T), all True when None."""
        self.check_tokens(tokens)
        if valid is None:
            return torch.ones_like(tokens, dtype=torch.bool)
        return check_mask(valid, like=tokens, name="valid")

    def forward(self, tokens: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        valid = self._valid(tokens, valid)  # (B, T)
        h = self.hook_embed(self.embed(tokens))  # (B, T, H)
        for block in self.blocks:
            h, _ = block(h, valid, self.dense_attention, self.loop_scan)  # (B, T, H)
        return self.head(self.norm_final(h))  # (B, T, n_out)

    @torch.no_grad()
    def prefill(self, tokens: torch.Tensor, valid: torch.Tensor | None = None) -> RelayState:
        """Run the prompt in parallel and keep only the bounded state ``step`` needs.

        Prompts of different lengths: left-pad them and pass ``valid`` (padding is inert)."""
        valid = self._valid(tokens, valid)
        h = self.embed(tokens)  # (B, T, H)
        states = []
        for block in self.blocks:
            h, s = block(h, valid, self.dense_attention, self.loop_scan, collect=True)  # (B, T, H)
            states.append(s)
        logits = self.head(self.norm_final(h[:, -1]))  # (B, n_out)
        return RelayState(states, logits, tokens.shape[1])

    def empty_state(self, batch_size: int, device=None, dtype=torch.float32) -> RelayState:
        """The state before any token (every buffer slot invalid)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 0:
            raise InputError(f"batch_size={batch_size!r} must be an integer >= 0")
        cfg, B = self.cfg, batch_size
        W, L, H = cfg.stride, cfg.left_window, cfg.d_model

        def zeros(*shape, dt=dtype):
            return torch.zeros(*shape, dtype=dt, device=device)

        layers = [LayerState(zeros(B, W, H), zeros(B, W, dt=torch.bool), zeros(B, W, d), zeros(B, W, dt=torch.bool),
                             zeros(B, cfg.n_heads, L, d // cfg.n_heads), zeros(B, cfg.n_heads, L, d // cfg.n_heads),
                             zeros(B, L, dt=torch.bool)) for d in cfg.d_trace]
        return RelayState(layers, zeros(B, cfg.n_out), 0)

    def _check_step(self, token: torch.Tensor, state: RelayState) -> None:
        if not isinstance(state, RelayState):
            raise InputError(f"state must be the RelayState that prefill, empty_state or step returned, "
                             f"got {type(state).__name__}")
        if len(state.layers) != self.cfg.n_layers:
            raise InputError(f"state has {len(state.layers)} layers but the model has {self.cfg.n_layers}: "
                             f"pass a state this model made")
        self.check_tokens(token, name="token", ndim=1)
        B = state.last_logits.shape[0]
        if token.shape[0] != B:
            raise InputError(f"token has {token.shape[0]} rows but state holds {B}; step takes one token per row "
                             f"of the state, shape ({B},)")

    @torch.no_grad()
    def step(self, token: torch.Tensor, state: RelayState) -> tuple[torch.Tensor, RelayState]:
        """Feed one token per row: token (B,) -> logits (B, n_out) at that position, new state."""
        self._check_step(token, state)
        h = self.embed(token)  # (B, H)
        layers = []
        for block, s in zip(self.blocks, state.layers):
            h, s = block.step(h, s)  # (B, H)
            layers.append(s)
        logits = self.head(self.norm_final(h))  # (B, n_out)
        return logits, RelayState(layers, logits, state.position + 1)
