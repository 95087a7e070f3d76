"""THEIA's models (Li 2026, seed003-details Sec. 1.3 and 1.6): which network a config names, and
how to build it and read its predictions. The networks live along their seams:

* :mod:`~tinyscope.studies.theia.engines`: :class:`Theia`, the 4-domain network of arithmetic,
  order, set and logic engines (2,751,232 parameters at D = 128), and its building blocks;
* :mod:`~tinyscope.studies.theia.chain`: the mod-3 chain's :class:`TheiaStep` (1,508,096),
  :class:`TransitionNet` (4,803) and :class:`ChainModel` (step + transition, hard one-hots
  between steps);
* :mod:`~tinyscope.studies.theia.baselines`: :class:`FlatMLP` (799,619 at hidden 512; 2,747,003
  at 1243) and the chain's :class:`TheiaTransformer` (``TF8LTuned``, pre-LN, 3,582,147);
* :mod:`~tinyscope.studies.theia.big_transformer`: the 4-domain :class:`BigTransformer` (post-LN,
  11 tokens, 3,641,859).

Every model reads the flat 31-integer record of :mod:`tinyscope.studies.theia.task`
(``[a, b, arith, d, rel, S_0..S_20, logic, a_unk, b_unk, d_unk, s_unk]``, shape (B, 31); the
layout and :func:`split_record` are defined there) and returns (B, 3) logits over F, T, U;
:func:`predict` gives the class the paper reads off. This module re-exports the classes, so
``from tinyscope.studies.theia.model import Theia`` keeps working.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from tinyscope.errors import check, check_choice
from tinyscope.studies.theia.baselines import FlatMLP, TheiaTransformer
from tinyscope.studies.theia.big_transformer import BigTransformer
from tinyscope.studies.theia.chain import (
    ChainEncoders,
    ChainModel,
    SubspaceEngine,
    TheiaStep,
    TransitionNet,
    straight_through_gumbel,
)
from tinyscope.studies.theia.engines import N_CLASSES, Encoder, Theia
from tinyscope.studies.theia.task import split_record

__all__ = ["ARCHS", "BigTransformer", "ChainEncoders", "ChainModel", "Encoder", "FlatMLP", "N_CLASSES", "SubspaceEngine", "Theia",
           "TheiaModelConfig", "TheiaStep", "TheiaTransformer", "TransitionNet", "build_theia_model", "predict",
           "split_record", "straight_through_gumbel", "tile_number_encoders"]


ARCHS = ("theia", "theia_step", "flat_mlp", "transformer", "big_transformer")
LOGIC_ENGINES = ("three_branch", "single_mlp")


@dataclass
class TheiaModelConfig:
    """Which network: ``theia`` (4-domain, D = 128), ``theia_step`` (chain step model),
    ``flat_mlp`` (hidden ``flat_hidden``: 512 or the parameter-matched 1243), ``transformer``
    (the chain's pre-LN TF8LTuned), ``big_transformer`` (the 4-domain post-LN BigTransformer;
    ``tf_*`` give its sizes, ``dropout`` its dropout). ``logic_engine`` and ``bridges``: the
    ablations of the 4-domain THEIA (Sec. 1.8)."""

    arch: Literal["theia", "theia_step", "flat_mlp", "transformer", "big_transformer"] = "theia"
    d_model: int = 128
    num_hidden: int = 64           # 4-domain number / set encoder hidden width
    dropout: float = 0.1
    flat_hidden: int = 512
    tf_d_model: int = 192
    tf_heads: int = 8
    tf_layers: int = 8
    tf_d_mlp: int = 768
    number_scale: float | None = None   # None: 1/20 for the 4-domain THEIA, raw integers otherwise
    number_init: Literal["default", "tiled"] = "default"   # tiled: see tile_number_encoders (no-op for transformer)
    tile_slope: float = 2.0             # tiled: pre-activation change per unit of the integer input
    logic_engine: Literal["three_branch", "single_mlp"] = "three_branch"   # theia: single_mlp = the 2.49M ablation
    bridges: bool = True                # theia: False = the no-bridge ablation (2.72M)

    def __post_init__(self):
        check_choice("model.arch", self.arch, ARCHS)
        check_choice("model.number_init", self.number_init, ("default", "tiled"))
        check_choice("model.logic_engine", self.logic_engine, LOGIC_ENGINES)
        check(self.tile_slope > 0, f"model.tile_slope={self.tile_slope} must be > 0")
        check(self.d_model >= 3, f"model.d_model={self.d_model} must be >= 3")
        check(self.flat_hidden >= 1, f"model.flat_hidden={self.flat_hidden} must be >= 1")
        check(self.tf_d_model % self.tf_heads == 0,
              f"model.tf_d_model={self.tf_d_model} must be divisible by model.tf_heads={self.tf_heads}")
        check(0.0 <= self.dropout < 1.0, f"model.dropout={self.dropout} must lie in [0, 1)")


def tile_number_encoders(model: nn.Module, scale: float, slope: float = 2.0, span: tuple[int, int] = (0, 20)) -> int:
    """Re-initialise the first layer of every scalar number :class:`Encoder` (``Linear(1, h)``)
    so that its h GELU kinks tile the integer range: unit j computes
    GELU(s_j * slope * (n - t_j)) of the integer n = x / scale, with t_j ~ U(lo - 1/2, hi + 1/2)
    and a random sign s_j. PyTorch's default init (w, b ~ U(-1, 1)) puts most kinks outside
    the range of a/20, so the encoding starts nearly affine in n and the network must learn to
    tell neighbouring integers apart, which makes the set lookup S[c] slow (docs/theia.md).
    Draws from torch's global generator; returns the number of layers changed."""
    lo, hi = span
    changed = 0
    for mod in model.modules():
        if isinstance(mod, Encoder) and mod.net[0].in_features == 1:
            lin = mod.net[0]
            kinks = lo - 0.5 + (hi - lo + 1) * torch.rand(lin.out_features)  # (h,)
            sign = torch.where(torch.rand(lin.out_features) < 0.5, -1.0, 1.0)  # (h,)
            with torch.no_grad():
                lin.weight.copy_((sign * slope / scale).unsqueeze(-1))  # (h, 1)
                lin.bias.copy_(-sign * slope * kinks)  # (h,)
            changed += 1
    return changed


def build_theia_model(cfg: TheiaModelConfig, n_ops: int = 5) -> nn.Module:
    if cfg.arch in ("theia", "big_transformer"):
        scale = 1 / 20 if cfg.number_scale is None else cfg.number_scale
        if cfg.arch == "theia":
            model = Theia(cfg.d_model, cfg.num_hidden, n_ops, scale, cfg.dropout, logic_engine=cfg.logic_engine,
                          bridges=cfg.bridges)
        else:
            model = BigTransformer(cfg.tf_d_model, cfg.tf_heads, cfg.tf_layers, cfg.tf_d_mlp, n_ops, cfg.dropout, scale)
    else:
        scale = 1.0 if cfg.number_scale is None else cfg.number_scale
        if cfg.arch == "theia_step":
            model = TheiaStep(cfg.d_model, n_ops, scale)
        elif cfg.arch == "flat_mlp":
            model = FlatMLP(cfg.d_model, cfg.flat_hidden, n_ops, scale)
        else:
            model = TheiaTransformer(cfg.tf_d_model, cfg.tf_heads, cfg.tf_layers, cfg.tf_d_mlp, n_ops)
    if cfg.number_init == "tiled":  # the transformer embeds numbers as tokens: nothing to tile
        tile_number_encoders(model, scale, cfg.tile_slope)
    return model


def predict(model: nn.Module, x: torch.Tensor, batch: int = 8192) -> torch.Tensor:
    """Class predictions (B,) of any model here, in batches, in eval mode."""
    was = model.training
    model.eval()
    with torch.no_grad():
        out = torch.cat([model.predict(x[i:i + batch]) for i in range(0, len(x), batch)]) if len(x) else \
            torch.zeros(0, dtype=torch.long)
    model.train(was)
    return out
