"""Position-wise feed-forward blocks, selectable per layer by name (``TransformerConfig.ffn``).

Every block maps (B, T, D) -> (B, T, D) and exposes ``hook_pre`` (hidden pre-activation) and
``hook_post`` (hidden after the nonlinearity). New kinds register in :data:`FFN_KINDS`.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ..errors import check_choice
from .hooks import HookPoint

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": nn.functional.gelu,
    "silu": nn.functional.silu,
    "tanh": torch.tanh,
    "quadratic": lambda x: x * x,
}


class MLP(nn.Module):
    """FFN(x) = W_out act(W_in x + b_in) + b_out (Vaswani et al. 2017, Eq. 2)."""

    def __init__(self, d_model: int, d_hidden: int, act: str = "gelu", bias: bool = True):
        super().__init__()
        check_choice("act", act, ACTIVATIONS)
        self.act = ACTIVATIONS[act]
        self.W_in = nn.Linear(d_model, d_hidden, bias=bias)
        self.W_out = nn.Linear(d_hidden, d_model, bias=bias)
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.hook_pre(self.W_in(x))  # (B, T, d_hidden)
        h = self.hook_post(self.act(h))  # (B, T, d_hidden)
        return self.W_out(h)  # (B, T, D)


FFN_KINDS: dict[str, Callable[..., nn.Module]] = {"mlp": MLP}


def build_ffn(kind: str, d_model: int, d_hidden: int, act: str, bias: bool) -> nn.Module:
    check_choice("ffn", kind, FFN_KINDS)
    return FFN_KINDS[kind](d_model, d_hidden, act=act, bias=bias)
