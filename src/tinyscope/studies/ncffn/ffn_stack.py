"""Pure feed-forward stacks for the N-bit parity probe (NC-FFN paper).

``x_0 = input (N)``; ``x_{l+1} = x_l + FFN_l(x_l)`` for ``depth`` residual layers whose FFN is one
basis of :mod:`tinyscope.models.ffn` with ``width`` true hidden units; ``logit = w . x_L + b``.
No attention, no normalisation: the basis is the only nonlinearity, so the smallest stack that
fits parity measures the basis's reasoning efficiency.

Bases: ``gelu`` (two-matrix GELU FFN), ``swiglu`` and ``bilinear`` (three matrices, ``width``
products), ``nc`` (75% GELU + fuzzy pairs) and ``nc_bool`` (fuzzy pairs only).
"""
from __future__ import annotations

import torch
from torch import nn

from tinyscope.errors import check_choice
from tinyscope.models.ffn import MLP, NCFFN, GatedFFN
from tinyscope.models.hooks import HookedModule

PARITY_BASES = ("gelu", "swiglu", "bilinear", "nc", "nc_bool")


def make_layer(basis: str, d_model: int, width: int) -> nn.Module:
    """One FFN layer of ``basis`` with ``width`` hidden units (no parameter matching)."""
    check_choice("basis", basis, PARITY_BASES)
    if basis == "gelu":
        return MLP(d_model, width, act="gelu")
    if basis in ("swiglu", "bilinear"):
        return GatedFFN(d_model, width, gate="silu" if basis == "swiglu" else "none")
    return NCFFN(d_model, width, gelu_share=0.75 if basis == "nc" else 0.0)


class FeedForwardStack(HookedModule):
    """Residual stack of FFN layers with a linear readout: (B, N) -> (B,) logits."""

    def __init__(self, n_inputs: int, basis: str, width: int, depth: int):
        super().__init__()
        self.basis, self.width, self.depth = basis, width, depth
        self.layers = nn.ModuleList(make_layer(basis, n_inputs, width) for _ in range(depth))
        self.readout = nn.Linear(n_inputs, 1)
        self.setup_hooks()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer(x)  # (B, N)
        return self.readout(x).squeeze(-1)  # (B,)
