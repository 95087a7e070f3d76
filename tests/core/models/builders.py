"""A small two-layer Transformer for the model tests: pre-LN blocks with a final norm, an output
projection, 4 then 2 heads of width 4, a 32-wide FFN in layer 0 (weights from torch seed 0)."""
import torch

from tinyscope.models.transformer import Transformer, TransformerConfig


def small_transformer(**kw) -> Transformer:
    torch.manual_seed(0)
    base = dict(vocab_size=7, n_ctx=12, d_model=16, d_head=4, n_heads=[4, 2], d_mlp=[32, 0],
                attn_out_proj=True, norm="pre", final_norm=True)
    base.update(kw)
    return Transformer(TransformerConfig(**base))
