"""The looped softmax baseline with relative positions (Ito et al., Table 2's RoPE and FIRE rows).

One weight-shared bidirectional pre-LN block, the shape of the learned-PE baseline (d_model 64,
4 heads of 16, GELU MLP 256, final LayerNorm, untied unembedding), with no absolute positions:

* ``rope`` (Su et al., RoFormer): per head, q and k are rotated pairwise by ``angle = i * base^(-2m/d_head)``
  (base 10,000) before ``softmax(q k^T / sqrt(d_head))``, so scores depend on i - j only.
* ``fire`` (Li et al., "Functional Interpolation for Relative Positions"): an additive score
  bias ``b_h(i, j) = f_h(psi(|i - j|) / psi(max(L, i + 1)), sign(i - j))`` with
  ``psi(x) = log(c x + 1)``, ``f`` an MLP 2 -> 32 -> heads (ReLU), c and L learned (softplus-
  positive, init 1 and 8). FIRE is defined for causal attention; the sign input is our reading
  for a bidirectional block.

``forward(tokens) -> logits (B, T, vocab)``; ``cfg.n_ctx`` is only the evaluation's length bound
(as the learned baseline's), relative positions themselves have none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.errors import check, check_choice


@dataclass
class RelativeBaselineConfig:
    vocab_size: int = 8
    positions: str = "rope"      # rope | fire
    d_model: int = 64
    n_heads: int = 4
    d_mlp: int = 256
    n_ctx: int = 512             # evaluation length bound (expressions longer count as wrong)
    rope_base: float = 10000.0
    fire_hidden: int = 32

    def __post_init__(self):
        check_choice("baseline.positions", self.positions, ("rope", "fire"))
        check(self.d_model % self.n_heads == 0 and (self.d_model // self.n_heads) % 2 == 0,
              f"baseline.d_model={self.d_model} must split into {self.n_heads} heads of even width")
        check(self.vocab_size >= 2 and self.n_ctx >= 1 and self.d_mlp >= 1 and self.fire_hidden >= 1,
              "baseline.vocab_size >= 2, n_ctx, d_mlp and fire_hidden >= 1")


def rotate(x: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE: rotate dimension pairs (2m, 2m+1) of x (B, T, H, Dh) by position * base^(-2m/Dh)."""
    B, T, H, Dh = x.shape
    freq = base ** (-torch.arange(0, Dh, 2, device=x.device, dtype=x.dtype) / Dh)  # (Dh/2,)
    ang = torch.arange(T, device=x.device, dtype=x.dtype)[:, None] * freq  # (T, Dh/2)
    cos, sin = ang.cos()[None, :, None], ang.sin()[None, :, None]  # (1, T, 1, Dh/2)
    a, b = x[..., 0::2], x[..., 1::2]  # (B, T, H, Dh/2)
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)  # (B, T, H, Dh)


class FireBias(nn.Module):
    """b_h(i, j) = f_h(psi(|i-j|) / psi(max(L, i+1)), sign(i-j)), psi(x) = log(c x + 1)."""

    def __init__(self, n_heads: int, hidden: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, n_heads))
        self.c_raw = nn.Parameter(torch.tensor(math.log(math.e - 1)))   # softplus -> 1
        self.L_raw = nn.Parameter(torch.tensor(8.0))                   # softplus -> ~8

    def forward(self, T: int) -> torch.Tensor:
        c, L = F.softplus(self.c_raw), F.softplus(self.L_raw)
        i = torch.arange(T, device=c.device, dtype=c.dtype)
        rel = i[:, None] - i[None, :]  # (T, T)
        psi = lambda x: torch.log(c * x + 1)  # noqa: E731
        dist = psi(rel.abs()) / psi(torch.maximum(L, i[:, None] + 1))  # (T, T)
        feats = torch.stack([dist, rel.sign()], dim=-1)  # (T, T, 2)
        return self.mlp(feats).permute(2, 0, 1)  # (H, T, T)


class RelativeLoopedBlock(nn.Module):
    """Embedding, one pre-LN block (attention with RoPE or FIRE, GELU MLP), final LN, unembedding."""

    def __init__(self, cfg: RelativeBaselineConfig):
        super().__init__()
        self.cfg = cfg
        D, H = cfg.d_model, cfg.n_heads
        self.embed = nn.Embedding(cfg.vocab_size, D)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, cfg.d_mlp), nn.GELU(), nn.Linear(cfg.d_mlp, D))
        self.unembed = nn.Linear(D, cfg.vocab_size)
        self.fire = FireBias(H, cfg.fire_hidden) if cfg.positions == "fire" else None

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        H = self.cfg.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, H, D // H).unbind(2)  # (B, T, H, Dh) each
        bias = None
        if self.fire is None:
            q, k = rotate(q, self.cfg.rope_base), rotate(k, self.cfg.rope_base)
        else:
            bias = self.fire(T).unsqueeze(0)  # (1, H, T, T)
        z = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=bias)  # (B, H, T, Dh)
        return self.out(z.transpose(1, 2).reshape(B, T, D))  # (B, T, D)

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embed(tokens)  # (B, T, D)

    def block(self, x: torch.Tensor) -> torch.Tensor:
        """The weight-shared block: pre-LN attention and MLP with residuals. (B, T, D) -> (B, T, D)"""
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.unembed(self.ln_f(x))  # (B, T, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.embed_tokens(tokens)))  # (B, T, vocab)
