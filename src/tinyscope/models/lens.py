"""The logit lens: a residual-stream vector read as the model would read its last one.

``logit_lens(model, x) = W_U LN_f(x) + b_U`` for a stream vector or a stack of them
(nostalgebraist, "interpreting GPT: the logit lens", 2020): the final norm is applied to each
entry with that entry's own statistics, so the stream leaving the last layer gives the model's
logits exactly.
"""
from __future__ import annotations

import torch
from torch import nn


def logit_lens(model: nn.Module, resid: torch.Tensor) -> torch.Tensor:
    """Logits (..., n_out) of stream vectors ``resid`` (..., D) through ``model.ln_final`` and ``model.W_U``."""
    return model.W_U(model.ln_final(resid))  # (..., n_out)
