"""Position-wise feed-forward blocks, selectable per layer by name (``TransformerConfig.ffn``).

Every block maps (B, T, D) -> (B, T, D) and exposes ``hook_pre`` (hidden pre-activation) and
``hook_post`` (hidden after the nonlinearity). New kinds register in :data:`FFN_KINDS`.

Kinds, all built *parameter-matched* to the two-matrix FFN of hidden width ``d_hidden``
(``D*d + d*D`` weights, plus ``d + D`` biases):

=========== ========================================================================= ==========
kind        hidden unit                                                               width
=========== ========================================================================= ==========
``mlp``     ``act(w.x)`` with ``model.act`` (Vaswani et al. 2017, Eq. 2)               d
``gelu``    ``gelu(w.x)``, the baseline of the NC-FFN paper                            d
``swiglu``  ``silu(w.x) * (v.x)`` (Shazeer 2020, "GLU variants", Eq. 6)               ~2d/3
``bilinear`` ``(w.x) * (v.x)`` (Shazeer 2020 Eq. 5; Pearce et al. 2024)                ~2d/3
``nc``      75% GELU units, 25% fuzzy pairs ``A.B`` and ``A.(1-B)`` (NC-FFN)            d
``nc_bool`` fuzzy pairs only, no GELU share (the paper's "fully Boolean" FFN)          d
=========== ========================================================================= ==========

The gated kinds have three matrices, so their width is :func:`matched_width` (the count then
differs from the GELU FFN's by less than one unit's worth of weights); NC-FFN keeps the GELU
FFN's exact shapes, so its count is identical.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.errors import check, check_choice
from tinyscope.models.hooks import HookPoint

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


class GatedFFN(nn.Module):
    """FFN(x) = W_out (gate(W_gate x) * W_in x): SwiGLU with ``gate="silu"``, bilinear with
    ``gate="none"`` (Shazeer 2020, Eqs. 5-6). ``d_hidden`` is the true number of hidden units.

    ``hook_pre`` holds both pre-activations side by side, ``[W_gate x, W_in x]``, shape
    (B, T, 2*d_hidden); ``hook_post`` the product, (B, T, d_hidden).
    """

    def __init__(self, d_model: int, d_hidden: int, gate: str = "silu", bias: bool = True):
        super().__init__()
        check_choice("gate", gate, ("silu", "none"))
        self.gate = gate
        self.d_hidden = d_hidden
        self.W_in = nn.Linear(d_model, 2 * d_hidden, bias=bias)  # [gate | value] rows
        self.W_out = nn.Linear(d_hidden, d_model, bias=bias)
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.hook_pre(self.W_in(x))  # (B, T, 2*d_hidden)
        g, v = h.split(self.d_hidden, dim=-1)  # (B, T, d_hidden) each
        if self.gate == "silu":
            g = F.silu(g)
        return self.W_out(self.hook_post(g * v))  # (B, T, D)


class NCFFN(nn.Module):
    """The negation-capable FFN (Oskin 2026, NC-FFN): a parameter-neutral replacement of the
    GELU FFN in which a share of the hidden units are explicit fuzzy set operations.

    ``W_in`` maps D to ``d_hidden`` channels laid out as ``[smooth | a | b]`` with ``n_smooth``,
    ``n_pairs`` and ``n_pairs`` channels. Memberships are ``A = sigmoid(a)`` and ``B = sigmoid(b)``
    in [0, 1]; each pair j outputs two units::

        intersection    A_j * B_j          ("A and B")
        set-difference  A_j * (1 - B_j)    ("A but not B": bounded, positive negation)

    so the hidden vector ``[gelu(smooth) | A*B | A*(1-B)]`` again has ``d_hidden`` channels and
    ``W_out`` maps it back to D. The shapes are the GELU FFN's, hence the parameter count is
    identical. ``gelu_share`` (default 0.75, the digest's "gradient highway") is the fraction of
    channels kept as GELU units; 0 gives the fully Boolean FFN, which the paper reports diverges
    in LM training. ``n_smooth`` is rounded so the logic channels split evenly into pairs.
    """

    def __init__(self, d_model: int, d_hidden: int, act: str = "gelu", bias: bool = True,
                 gelu_share: float = 0.75):
        super().__init__()
        check(0.0 <= gelu_share <= 1.0, f"gelu_share={gelu_share} must lie in [0, 1]")
        check_choice("act", act, ACTIVATIONS)
        n_smooth = round(gelu_share * d_hidden)
        if (d_hidden - n_smooth) % 2:
            n_smooth += 1 if n_smooth < d_hidden else -1
        self.act = ACTIVATIONS[act]
        self.n_smooth, self.n_pairs = n_smooth, (d_hidden - n_smooth) // 2
        self.d_hidden = d_hidden
        self.W_in = nn.Linear(d_model, d_hidden, bias=bias)
        self.W_out = nn.Linear(d_hidden, d_model, bias=bias)
        self.hook_pre = HookPoint()
        self.hook_A, self.hook_B = HookPoint(), HookPoint()
        self.hook_post = HookPoint()

    def memberships(self, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A and B from the pre-activation (…, d_hidden): two tensors (…, n_pairs)."""
        s, p = self.n_smooth, self.n_pairs
        return torch.sigmoid(pre[..., s:s + p]), torch.sigmoid(pre[..., s + p:])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.hook_pre(self.W_in(x))  # (B, T, d_hidden)
        a, b = self.memberships(pre)  # (B, T, n_pairs) each
        a, b = self.hook_A(a), self.hook_B(b)
        both = a * b  # (B, T, n_pairs)  intersection
        post = torch.cat([self.act(pre[..., :self.n_smooth]), both, a - both], dim=-1)  # (B, T, d_hidden)
        return self.W_out(self.hook_post(post))  # (B, T, D)

    # ------------------------------------------------------------ legibility
    def unit_channels(self, j: int) -> tuple[int, int]:
        """Hidden channels (in ``hook_post`` order) of pair j's intersection and set-difference."""
        return self.n_smooth + j, self.n_smooth + self.n_pairs + j

    def logical_form(self, j: int, top: int = 3, names: list[str] | None = None) -> dict:
        """Which inputs drive A and B of pair j: the ``top`` input weights by magnitude of each.

        Returns ``{"A": [(name, weight), ...], "A_bias": float, "B": [...], "B_bias": float,
        "text": "A=σ(+2.1 x3 -1.4 x0 +0.2) B=σ(...) -> A∧B, A∧¬B"}``.
        """
        check(0 <= j < self.n_pairs, f"unit {j} out of range: this NC-FFN has {self.n_pairs} fuzzy pairs")
        w = self.W_in.weight.detach()  # (d_hidden, D)
        bias = self.W_in.bias.detach() if self.W_in.bias is not None else torch.zeros(self.d_hidden)
        names = names or [f"x{i}" for i in range(w.shape[1])]
        out: dict = {}
        texts = []
        for key, row in (("A", self.n_smooth + j), ("B", self.n_smooth + self.n_pairs + j)):
            order = w[row].abs().argsort(descending=True)[:top].tolist()
            out[key] = [(names[i], float(w[row, i])) for i in order]
            out[f"{key}_bias"] = float(bias[row])
            terms = " ".join(f"{v:+.2f} {n}" for n, v in out[key])
            texts.append(f"{key}=σ({terms} {out[f'{key}_bias']:+.2f})")
        out["text"] = " ".join(texts) + " -> A∧B, A∧¬B"
        return out


def matched_width(kind: str, d_model: int, d_hidden: int, bias: bool = True) -> int:
    """Hidden width of ``kind`` whose parameter count is closest to the GELU FFN of ``d_hidden``."""
    if kind not in ("swiglu", "bilinear"):
        return d_hidden
    target = 2 * d_model * d_hidden + (d_hidden + d_model if bias else 0)
    per_unit = 3 * d_model + (2 if bias else 0)
    fixed = d_model if bias else 0
    return max(1, round((target - fixed) / per_unit))


def _gated(gate: str, d_model: int, d_hidden: int, act: str = "gelu", bias: bool = True) -> GatedFFN:
    kind = "swiglu" if gate == "silu" else "bilinear"
    return GatedFFN(d_model, matched_width(kind, d_model, d_hidden, bias), gate=gate, bias=bias)


def _nc(gelu_share: float, d_model: int, d_hidden: int, act: str = "gelu", bias: bool = True) -> NCFFN:
    return NCFFN(d_model, d_hidden, act="gelu", bias=bias, gelu_share=gelu_share)


def _gelu(d_model: int, d_hidden: int, act: str = "gelu", bias: bool = True) -> MLP:
    return MLP(d_model, d_hidden, act="gelu", bias=bias)


FFN_KINDS: dict[str, Callable[..., nn.Module]] = {
    "mlp": MLP,
    "gelu": _gelu,
    "swiglu": partial(_gated, "silu"),
    "bilinear": partial(_gated, "none"),
    "nc": partial(_nc, 0.75),
    "nc_bool": partial(_nc, 0.0),
}


def build_ffn(kind: str, d_model: int, d_hidden: int, act: str, bias: bool) -> nn.Module:
    """The FFN ``kind`` parameter-matched to a two-matrix FFN of hidden width ``d_hidden``."""
    check_choice("ffn", kind, FFN_KINDS)
    return FFN_KINDS[kind](d_model, d_hidden, act=act, bias=bias)

