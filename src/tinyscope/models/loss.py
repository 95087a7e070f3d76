"""Next-token cross-entropy of a language model's logits, as TransformerLens's ``lm_cross_entropy_loss``.

Position ``t`` predicts token ``t + 1``: ``loss_t = -log softmax(logits_t)[tokens_{t+1}]`` for
``t < T - 1``. With an ``attention_mask`` (1 = real token) a term counts only when both token
``t`` and token ``t + 1`` are real; the loss is the mean over the counted terms.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def lm_cross_entropy_loss(logits: torch.Tensor, tokens: torch.Tensor, attention_mask: torch.Tensor | None = None,
                          per_token: bool = False) -> torch.Tensor:
    """Mean next-token loss (a scalar), or ``per_token`` the (B, T - 1) terms (0 where masked)."""
    log_probs = F.log_softmax(logits[:, :-1].float(), dim=-1)  # (B, T-1, V)
    terms = -log_probs.gather(-1, tokens[:, 1:, None].long())[..., 0]  # (B, T-1)
    if attention_mask is None:
        return terms if per_token else terms.mean()
    counted = attention_mask[:, :-1].bool() & attention_mask[:, 1:].bool()  # (B, T-1)
    terms = terms.masked_fill(~counted, 0.0)
    return terms if per_token else terms.sum() / counted.sum().clamp_min(1)
