"""A GPT whose layers may carry a sequence-quantifier block after their FFN (NC-FFN paper).

:class:`QuantifiedTransformer` is the core :class:`Transformer` whose blocks in ``quant.layers``
declare a :class:`QuantifierBlock` as their quantifier sublayer (:meth:`Block.add_quant`), so
layer l computes, inside the block::

    x_ffn  = x_mid + FFN(LN(x_mid))                 blocks.l.hook_mlp_out
    x_post = x_ffn + Q_l(LN(x_ffn))                 blocks.l.hook_quant_out, blocks.l.quant.hook_membership | hook_exist | hook_prop
                                                    blocks.l.hook_resid_post == blocks.l+1.hook_resid_pre

(``LN`` only when ``model.norm="pre"``). The FFN kind per layer comes from ``model.ffn``.
:func:`equal_parameter_widths` shrinks the FFN widths of quantified layers so that the whole
model has the parameter count of its quantifier-free twin.
"""
from __future__ import annotations

import copy
import dataclasses

from torch import nn

from tinyscope.errors import check
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.models.utils import count_parameters
from tinyscope.studies.ncffn.quantifiers import QuantifierBlock, QuantifierConfig, optimizer_groups


class QuantifiedTransformer(Transformer):
    """:class:`Transformer` with a quantifier sublayer in the blocks of ``quant.layers``.

    The quantifiers are created after the whole transformer (its ``init="gpt2"`` included), so
    they keep PyTorch's default initialisation and the other weights draw exactly what the
    quantifier-free twin draws. ``forward(tokens) -> (B, T, n_out)`` logits is the Transformer's.
    """

    def __init__(self, cfg: TransformerConfig, quant: QuantifierConfig | None = None):
        super().__init__(cfg)
        self.quant_cfg = quant = quant or QuantifierConfig()
        check(all(l < cfg.n_layers for l in quant.layers),
              f"quant.layers={quant.layers} names a layer beyond the model's {cfg.n_layers}")
        for l in quant.layers:
            self.blocks[l].add_quant(QuantifierBlock(cfg.d_model, quant.n_exist, quant.n_prop, quant.init_decay))
        self.setup_hooks()

    def quantifier_blocks(self) -> dict[int, QuantifierBlock]:
        """The quantifier sublayer of each quantified layer, by layer index."""
        return {l: self.blocks[l].quant for l in self.quant_cfg.layers}

    def optimizer_groups(self, lr: float, weight_decay: float) -> list[dict]:
        """AdamW groups: the decay logits at ``quant.decay_lr_mult`` and ``quant.decay_weight_decay``
        (:func:`~tinyscope.studies.ncffn.quantifiers.optimizer_groups`); the Trainer asks for them."""
        return optimizer_groups(self, lr, weight_decay, self.quant_cfg)


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


def lm_model_config(model: TransformerConfig, quant: QuantifierConfig, vocab_size: int,
                    match_params: bool = True) -> TransformerConfig:
    """The transformer config a run builds: ``vocab_size`` set and, when ``match_params``, the
    FFNs of the quantified layers narrowed by :func:`equal_parameter_widths`."""
    out = dataclasses.replace(model, vocab_size=vocab_size)
    return equal_parameter_widths(out, quant) if match_params and quant.layers else out


def parameter_report(model: nn.Module) -> dict[str, int]:
    """Total, FFN and quantifier parameter counts of a (quantified) transformer."""
    ffn = sum(count_parameters(b.mlp) for b in model.blocks if b.mlp is not None)
    quant = sum(count_parameters(b.quant) + count_parameters(b.ln_quant)
                for b in model.blocks if b.quant is not None)
    return {"total": count_parameters(model), "ffn": ffn, "quantifiers": quant}
