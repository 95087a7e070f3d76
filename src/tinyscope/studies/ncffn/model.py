"""A GPT whose layers may carry a sequence-quantifier block after their FFN (NC-FFN paper).

Layer l of :class:`QuantifiedTransformer` is the foundation's :class:`Block` followed, when l is
in ``quant.layers``, by a residual quantifier block::

    x = Block_l(x)                                  blocks.l.hook_resid_post
    x = x + Q_l(LN(x))                              blocks.l.quant.hook_exist | hook_prop | hook_membership

(``LN`` only when ``model.norm="pre"``). The FFN kind per layer comes from ``model.ffn``.
:func:`equal_parameter_widths` shrinks the FFN widths of quantified layers so that the whole
model has the parameter count of its quantifier-free twin.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from tinyscope.errors import check
from tinyscope.models.transformer import Transformer, TransformerConfig, count_parameters
from tinyscope.studies.ncffn.quantifiers import QuantifierBlock, QuantifierConfig


class QuantifiedTransformer(Transformer):
    """Transformer + quantifier blocks; ``forward(tokens) -> (B, T, n_out)`` logits."""

    def __init__(self, cfg: TransformerConfig, quant: QuantifierConfig | None = None):
        super().__init__(cfg)
        self.quant_cfg = quant = quant or QuantifierConfig()
        check(all(l < cfg.n_layers for l in quant.layers),
              f"quant.layers={quant.layers} names a layer beyond the model's {cfg.n_layers}")
        for l in quant.layers:
            block = self.blocks[l]
            block.ln_quant = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
            block.quant = QuantifierBlock(cfg.d_model, quant.n_exist, quant.n_prop, quant.init_decay)
        self.setup_hooks()

    def quantifier_blocks(self) -> dict[int, QuantifierBlock]:
        return {l: self.blocks[l].quant for l in self.quant_cfg.layers}

    def forward(self, tokens: torch.Tensor, check: bool = False) -> torch.Tensor:
        if check:
            self.check_tokens(tokens)
        x = self.embed(tokens)  # (B, T, D)
        for block in self.blocks:
            x = block(x)  # (B, T, D)
            quant = getattr(block, "quant", None)
            if quant is not None:
                x = x + quant(block.ln_quant(x))  # (B, T, D)
        return self.W_U(self.ln_final(x))  # (B, T, n_out)


def quantifier_parameters(d_model: int, quant: QuantifierConfig, norm: str) -> int:
    """Parameters of one quantifier block (with its LayerNorm under pre-LN)."""
    u = quant.n_exist + quant.n_prop
    return 2 * d_model * u + u + d_model + u + (2 * d_model if norm == "pre" else 0)


def equal_parameter_widths(cfg: TransformerConfig, quant: QuantifierConfig) -> TransformerConfig:
    """A copy of ``cfg`` whose quantified layers have FFNs narrower by the blocks' parameters.

    One hidden unit of the two-matrix FFN costs ``2 D + 1`` parameters (with biases), so each
    quantified layer gives up ``round(q / (2 D + 1))`` units; the totals then differ by less than
    one unit per layer (gated kinds round their matched widths again).
    """
    per_unit = 2 * cfg.d_model + (1 if cfg.mlp_bias else 0)
    q = quantifier_parameters(cfg.d_model, quant, cfg.norm)
    d_mlp = list(cfg.d_mlp)
    for l in quant.layers:
        check(d_mlp[l] > 0, f"quant.layers includes layer {l}, whose FFN (d_mlp=0) has no width to give up")
        d_mlp[l] = max(2, d_mlp[l] - round(q / per_unit))
    out = copy.deepcopy(cfg)
    out.d_mlp = d_mlp
    return out


def parameter_report(model: nn.Module) -> dict[str, int]:
    """Total, FFN and quantifier parameter counts of a (quantified) transformer."""
    ffn = sum(count_parameters(b.mlp) for b in model.blocks if b.mlp is not None)
    quant = sum(count_parameters(b.quant) + count_parameters(b.ln_quant)
                for b in model.blocks if getattr(b, "quant", None) is not None)
    return {"total": count_parameters(model), "ffn": ffn, "quantifiers": quant}
