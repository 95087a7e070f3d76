"""The baselines THEIA is compared with (Li 2026): a flat MLP and a transformer, both reading the
flat (B, 31) records of :mod:`tinyscope.studies.theia.task` and returning (B, 3) logits.

* :class:`FlatMLP`: the chain encoders, concatenated (7 x 128 + 4 flags = 900) into a 3-layer
  MLP; hidden 512 (799,619 parameters) or the parameter-matched 1243 (2,747,003).
* :class:`TheiaTransformer`: 8 tokens, 8 pre-LN layers of tinyscope's own transformer blocks
  (non-causal), mean-pool, LN, Linear(3): 3,582,147 parameters.
"""
from __future__ import annotations

import torch
from torch import nn

from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.models.transformer import Block, TransformerConfig
from tinyscope.studies.theia.chain import ChainEncoders
from tinyscope.studies.theia.engines import N_ARITH, N_CLASSES, N_REL
from tinyscope.studies.theia.task import (
    COL_A,
    COL_A_UNK,
    COL_ARITH,
    COL_B,
    COL_B_UNK,
    COL_D,
    COL_D_UNK,
    COL_FLAGS,
    COL_LOGIC,
    COL_REL,
    COL_SET,
    SET_SIZE,
    split_record,
)


class FlatMLP(HookedModule):
    """The flat baseline: chain encoders -> [7 x D features; 4 flags] -> Linear(900, H) -> GELU
    -> LN -> Linear(H, H) -> GELU -> LN -> Linear(H, 3). H = 512 (0.80M) or 1243 (2.75M)."""

    def __init__(self, d: int = 128, hidden: int = 512, n_ops: int = 5, number_scale: float = 1.0):
        super().__init__()
        self.number_scale = number_scale
        self.enc = ChainEncoders(d, n_ops)
        self.net = nn.Sequential(nn.Linear(7 * d + 4, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.out = nn.Linear(hidden, N_CLASSES)
        self.hook_hidden = HookPoint()
        self.setup_hooks()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = split_record(x, self.number_scale)
        e = self.enc(f)
        flags = torch.stack([f[k] for k in ("a_unk", "b_unk", "d_unk", "s_unk")], -1).float()  # (B, 4)
        feats = torch.cat([e[k] for k in ("a", "b", "d", "S", "arith", "rel", "op")] + [flags], -1)  # (B, 7D+4)
        return self.out(self.hook_hidden(self.net(feats)))  # (B, 3)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class TheiaTransformer(HookedModule):
    """The pre-LN transformer baseline (``TF8LTuned``): 8 tokens [a, b, arith, d, rel, S, op,
    flags] (a, b, d: own embeddings over 0..20 plus an Unknown sentinel 21; S and the flags:
    linear projections) plus learned positions, tinyscope transformer blocks without a causal
    mask, mean-pool, LN, Linear(D, 3)."""

    N_TOKENS = 8

    def __init__(self, d: int = 192, n_heads: int = 8, n_layers: int = 8, d_mlp: int = 768, n_ops: int = 5,
                 act: str = "gelu"):
        super().__init__()
        self.cfg = TransformerConfig(vocab_size=1, n_ctx=self.N_TOKENS, d_model=d, d_head=d // n_heads,
                                     n_heads=[n_heads] * n_layers, d_mlp=[d_mlp] * n_layers, act=act, norm="pre",
                                     attn_out_proj=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
                                     causal=False)
        self.emb_a, self.emb_b, self.emb_d = (nn.Embedding(22, d) for _ in range(3))
        self.emb_arith, self.emb_rel, self.emb_op = nn.Embedding(N_ARITH, d), nn.Embedding(N_REL, d), nn.Embedding(n_ops, d)
        self.set_proj, self.flag_proj = nn.Linear(SET_SIZE, d), nn.Linear(4, d)
        self.W_pos = nn.Parameter(torch.randn(self.N_TOKENS, d) * 0.02)
        self.blocks = nn.ModuleList(Block(self.cfg, layer) for layer in range(n_layers))
        self.ln_final = nn.LayerNorm(d)
        self.W_U = nn.Linear(d, N_CLASSES)
        self.hook_embed, self.hook_pooled = HookPoint(), HookPoint()
        self.setup_hooks()

    @staticmethod
    def number_id(x: torch.Tensor, col: int, flag: int) -> torch.Tensor:
        """Embedding id of a number: its value clamped to 0..20, or 21 when Unknown."""
        return torch.where(x[:, flag].bool(), 21, x[:, col].clamp(0, 20))  # (B,)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        x, num = x.long(), self.number_id
        tokens = torch.stack([self.emb_a(num(x, COL_A, COL_A_UNK)), self.emb_b(num(x, COL_B, COL_B_UNK)),
                              self.emb_arith(x[:, COL_ARITH]), self.emb_d(num(x, COL_D, COL_D_UNK)),
                              self.emb_rel(x[:, COL_REL]), self.set_proj(x[:, COL_SET].float()),
                              self.emb_op(x[:, COL_LOGIC]), self.flag_proj(x[:, COL_FLAGS].float())], 1)  # (B, 8, D)
        return self.hook_embed(tokens + self.W_pos)  # (B, 8, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, 8, D)
        for block in self.blocks:
            h = block(h)  # (B, 8, D)
        return self.W_U(self.ln_final(self.hook_pooled(h.mean(1))))  # (B, 3)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)
