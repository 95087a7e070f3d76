"""The paper's 4-domain transformer baseline ``BigTransformer`` (Li 2026, seed003-details Sec. 1.5):
3,641,859 parameters at d = 192, 8 heads, 8 post-LN layers, FF 768, dropout 0.1.

One record (B, 31) becomes 11 tokens, each plus a learned type embedding (one per position)::

    num(a/20), num(b/20), num(d/20)        one shared MLP: Linear(1, d/2) -> GELU -> Linear(d/2, d)
    emb_arith, emb_rel, emb_op
    unk(a_unk), unk(b_unk), unk(d_unk), unk(s_unk)     one shared Embedding(2, d)
    set(S)                                 Linear(21, d/2) -> GELU -> Linear(d/2, d)

A number whose flag is set is still fed as its value: the flag token alone says it is Unknown.
Each layer is post-LN (``torch.nn.TransformerEncoderLayer``'s order, GELU)::

    x = LN_1(x + Dropout(Attn(x)))          blocks.{l}.hook_resid_mid
    x = LN_2(x + Dropout(FF(x)))            blocks.{l}.hook_resid_post
    FF(x) = Linear(4d -> d)(Dropout(GELU(Linear(d -> 4d)(x))))

and the head is mean-pool -> Linear(d, d) -> GELU -> LN -> Linear(d, 3).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.studies.theia.engines import N_ARITH, N_CLASSES, N_REL
from tinyscope.studies.theia.task import SET_SIZE, split_record

N_TOKENS = 11
TOKEN_NAMES = ("a", "b", "d", "arith", "rel", "op", "a_unk", "b_unk", "d_unk", "s_unk", "S")


class SelfAttention(nn.Module):
    """Multi-head self-attention without a mask, fused QKV and an output projection, both with
    bias (``nn.MultiheadAttention``'s parameters); dropout on the attention pattern."""

    def __init__(self, d: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.d_head, self.dropout = n_heads, d // n_heads, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.hook_pattern, self.hook_z = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)  # (B, H, T, Dh) each
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)  # (B, H, T, T)
        pattern = self.hook_pattern(torch.softmax(scores, -1))  # (B, H, T, T)
        pattern = F.dropout(pattern, self.dropout, self.training)
        z = self.hook_z(pattern @ v)  # (B, H, T, Dh)
        return self.out(z.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class PostLNBlock(nn.Module):
    """One post-LN encoder layer (see the module docstring)."""

    def __init__(self, d: int, n_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.attn = SelfAttention(d, n_heads, dropout)
        self.ff_in, self.ff_out = nn.Linear(d, d_ff), nn.Linear(d_ff, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)
        self.hook_resid_pre, self.hook_attn_out, self.hook_resid_mid = HookPoint(), HookPoint(), HookPoint()
        self.hook_mlp_out, self.hook_resid_post = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)  # (B, T, D)
        x = self.hook_resid_mid(self.ln1(x + self.drop(self.hook_attn_out(self.attn(x)))))  # (B, T, D)
        ff = self.ff_out(self.drop(F.gelu(self.ff_in(x))))  # (B, T, D)
        return self.hook_resid_post(self.ln2(x + self.drop(self.hook_mlp_out(ff))))  # (B, T, D)


class BigTransformer(HookedModule):
    """The 4-domain transformer baseline (see the module docstring)."""

    def __init__(self, d: int = 192, n_heads: int = 8, n_layers: int = 8, d_ff: int = 768, n_ops: int = 5,
                 dropout: float = 0.1, number_scale: float = 1 / 20):
        super().__init__()
        self.number_scale = number_scale
        self.num_enc = nn.Sequential(nn.Linear(1, d // 2), nn.GELU(), nn.Linear(d // 2, d))
        self.set_enc = nn.Sequential(nn.Linear(SET_SIZE, d // 2), nn.GELU(), nn.Linear(d // 2, d))
        self.emb_arith, self.emb_rel, self.emb_op = nn.Embedding(N_ARITH, d), nn.Embedding(N_REL, d), nn.Embedding(n_ops, d)
        self.emb_unk = nn.Embedding(2, d)
        self.emb_type = nn.Embedding(N_TOKENS, d)
        self.blocks = nn.ModuleList(PostLNBlock(d, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d), nn.Linear(d, N_CLASSES))
        self.hook_embed, self.hook_pooled = HookPoint(), HookPoint()
        self.setup_hooks()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        f = split_record(x, self.number_scale)
        num = lambda v: self.num_enc(v.unsqueeze(-1))  # noqa: E731  (B,) -> (B, D)
        unk = lambda v: self.emb_unk(v.long())  # noqa: E731  (B,) -> (B, D)
        tokens = torch.stack([num(f["a"]), num(f["b"]), num(f["d"]), self.emb_arith(f["arith"]),
                              self.emb_rel(f["rel"]), self.emb_op(f["op"]), unk(f["a_unk"]), unk(f["b_unk"]),
                              unk(f["d_unk"]), unk(f["s_unk"]), self.set_enc(f["S"])], 1)  # (B, 11, D)
        return self.hook_embed(tokens + self.emb_type.weight)  # (B, 11, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, 11, D)
        for block in self.blocks:
            h = block(h)  # (B, 11, D)
        return self.head(self.hook_pooled(h.mean(1)))  # (B, 3)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)  # (B,)
