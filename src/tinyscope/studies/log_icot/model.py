"""The constrained L-layer transformer of the Log-ICoT theory, as this project reads it.

What is public of the paper's construction (seed003-details.md, Sec. 2): L = log2 k layers; the
attention is trainable but its scores depend only on positions; the value map is fixed; a
tree-level attention mask; gated connections with preset gate weights; a link function. The full
construction (block shifts, quantised updates, exact constants) is not public. This module is one
concrete reading, on the token layout of :mod:`tinyscope.studies.log_icot.task` (blank removal):

* the residual stream has two numbers per position: the token channel ``e[p]`` (+1 for token 0,
  -1 for token 1, 0 for SEP and BLANK: bits in the +-1 encoding, so XOR is a product), never
  overwritten, and the computed channel ``h[p]`` (starts at 0), written by the layers;
* layer ``l`` (1-based) has a trainable score matrix ``S_l`` (T, 2T) over positions of the two
  channels; its pattern is ``softmax`` of ``S_l`` restricted by the **tree-level mask**: only the
  *slots* of level-``l`` nodes (the positions that predict them) attend, and only to keys that can
  hold a level-``l-1`` value: the input bits' token channel for ``l = 1``; for ``l > 1`` the
  computed channel at the slots of the level-``l-1`` nodes (``level_sources="slots"``, default)
  or, with ``"slots+tokens"``, the token channel of their CoT tokens as well (the channels are
  separate because a node's token shares its position with the next node's slot);
* the **fixed value map** is the identity: ``a_q = sum_p A_l[q, p] [e; h][p]``;
* the **link** ``phi(a) = 2 a^2 - 1`` maps the mean of two +-1 values to their product (XOR);
* the **gate** writes the result only at the level's slots:
  ``h[q] <- g phi(a_q) + (1 - g) h[q]`` with the preset ``g = gate`` there and 0 elsewhere;
* the readout is ``logits = beta * (h, -h)`` (classes 0 and 1) with a trainable scale ``beta``.

With ``level_sources="slots"`` the CoT acts as intermediate supervision: each stage removes the
supervision of one more level, which the layers must then keep computing without it. With
``"slots+tokens"`` layer ``l`` may read the given CoT tokens of level ``l-1``; it learns to read
them under CoT (they are right before its slots are), and when the level is blanked the read
values drop to 0, the link's gradient (``4a``) vanishes with them and training stalls at chance
(observed, n = 10, k = 4): a reason this reading reads slots by default.

With the right pairs selected, every slot holds its node's value exactly, and the answer comes out
of one forward pass over ``x, SEP, BLANK...``. Hook points: ``blocks.{l}.attn.hook_pattern``
(B, 1, T, 2T) and ``blocks.{l}.hook_resid_post`` (B, T, 1), in the standard names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from tinyscope.errors import check, check_choice
from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.studies.log_icot.task import BLANK, SEP, node_levels


@dataclass
class ConstrainedParityConfig:
    level_sources: Literal["slots", "slots+tokens"] = "slots"
    gate: float = 1.0                # preset gate at a level's slots
    score_init: float = 0.0          # initial positional scores (0 = uniform attention over allowed keys)
    beta_init: float = 2.0           # initial readout scale

    def __post_init__(self):
        check_choice("constrained.level_sources", self.level_sources, ("slots", "slots+tokens"))
        check(0.0 < self.gate <= 1.0, f"constrained.gate={self.gate} must lie in (0, 1]")


def tree_level_mask(n: int, k: int, level: int, with_tokens: bool) -> np.ndarray:
    """(T, 2T) bool: which keys each query may attend to in the layer of ``level``; keys ``0..T-1`` are
    the token channel of each position, ``T..2T-1`` its computed channel."""
    T = n + k - 1
    lv = node_levels(k)
    slot = n + np.arange(k - 1)            # slot of node j
    token = slot + 1                        # token of node j (the answer has none)
    mask = np.zeros((T, 2 * T), dtype=bool)
    queries = slot[lv == level]
    if level == 1:
        sources = np.arange(n)                                   # the bits' token channel
    else:
        below = np.flatnonzero(lv == level - 1)
        sources = T + slot[below]                                # computed values of the level below
        if with_tokens:
            sources = np.concatenate([sources, token[below]])    # ... and its CoT tokens
    mask[np.ix_(queries, sources)] = True
    return mask


class PositionalTreeLayer(nn.Module):
    def __init__(self, n: int, k: int, level: int, cfg: ConstrainedParityConfig):
        super().__init__()
        mask = torch.from_numpy(tree_level_mask(n, k, level, cfg.level_sources == "slots+tokens"))
        self.register_buffer("mask", mask, persistent=False)  # (T, 2T)
        self.register_buffer("gate", mask.any(-1).float() * cfg.gate, persistent=False)  # (T,)
        self.scores = nn.Parameter(torch.full(mask.shape, float(cfg.score_init)))  # (T, 2T)
        self.attn = nn.Module()
        self.attn.hook_pattern = HookPoint()
        self.hook_resid_post = HookPoint()

    def pattern(self) -> torch.Tensor:
        scores = self.scores.masked_fill(~self.mask, float("-inf"))  # (T, 2T)
        return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # rows without keys: all zero

    def forward(self, e: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        B, T = h.shape
        pattern = self.attn.hook_pattern(self.pattern().expand(B, 1, T, 2 * T))  # (B, 1, T, 2T)
        a = torch.einsum("bqk,bk->bq", pattern[:, 0], torch.cat([e, h], dim=1))  # (B, T)
        h = self.gate * (2 * a * a - 1) + (1 - self.gate) * h  # (B, T)
        return self.hook_resid_post(h.unsqueeze(-1)).squeeze(-1)  # (B, T)


class ConstrainedParityTransformer(HookedModule):
    """``forward(tokens) -> logits`` (B, T, 2), on the blank-placeholder layout of length n + k - 1."""

    def __init__(self, cfg: ConstrainedParityConfig, n: int, k: int):
        super().__init__()
        self.cfg, self.n, self.k = cfg, n, k
        self.blocks = nn.ModuleList(PositionalTreeLayer(n, k, lvl, cfg) for lvl in range(1, k.bit_length()))
        self.beta = nn.Parameter(torch.tensor(float(cfg.beta_init)))
        self.hook_embed = HookPoint()
        self.setup_hooks()

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        h = 1.0 - 2.0 * tokens.float()  # (B, T): token 0 -> +1, token 1 -> -1
        return h.masked_fill((tokens == SEP) | (tokens == BLANK), 0.0)  # (B, T)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.shape[1] != self.n + self.k - 1:
            raise ValueError(f"the constrained model reads the blank layout of {self.n + self.k - 1} tokens "
                             f"(task.removal=blank), got {tokens.shape[1]}")
        e = self.hook_embed(self.embed(tokens).unsqueeze(-1)).squeeze(-1)  # (B, T) token channel
        h = torch.zeros_like(e)  # (B, T) computed channel
        for block in self.blocks:
            h = block(e, h)  # (B, T)
        return self.beta * torch.stack([h, -h], dim=-1)  # (B, T, 2)


def tree_children(k: int) -> list[tuple[int, int]]:
    """Children of each node ``j``: indices into the selected bits for level 1, node indices above."""
    levels = node_levels(k)
    start = {lvl: int(np.flatnonzero(levels == lvl)[0]) for lvl in np.unique(levels)}
    out = []
    for j, lvl in enumerate(levels):
        i = j - start[lvl]
        base = 0 if lvl == 1 else start[lvl - 1]
        out.append((base + 2 * i, base + 2 * i + 1))
    return out


@torch.no_grad()
def set_tree_attention(model: ConstrainedParityTransformer, subset, strength: float = 30.0) -> None:
    """Hand-set the positional scores to the exact tree: each slot attends to its two children
    (the selected bits, or the computed slots of the level below) -- the construction the training
    should find. ``strength`` is the score margin over the other allowed keys."""
    n, k = model.n, model.k
    T = n + k - 1
    subset = np.sort(np.asarray(subset))
    levels = node_levels(k)
    for block in model.blocks:
        block.scores.zero_()
    for j, (a, b) in enumerate(tree_children(k)):
        block = model.blocks[int(levels[j]) - 1]
        keys = (subset[a], subset[b]) if levels[j] == 1 else (T + n + a, T + n + b)
        block.scores[n + j, list(keys)] = strength
