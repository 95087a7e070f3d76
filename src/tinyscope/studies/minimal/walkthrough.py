"""One sequence traced through the model, step by step (Mahajne & Moldwin, Sec. 3.6, Fig. 11-15).

For a sequence of T tokens, :func:`trace_sequence` recomputes the attention of layer 0, head
``head``, from the hooked queries and keys exactly as Sec. 2.2 defines it::

    scores_ij  = q_i . k_j                      (raw, Fig. 13b; -inf above the diagonal)
    A_ij       = softmax_j(q_i . k_j / sqrt(d_k)) over j <= i   (Fig. 13c)
    Attn(e)_i  = sum_j A_ij v_j                 (Fig. 14)
    z_i        = e_i + Attn(e)_i                (Fig. 15; read from blocks.0.hook_resid_mid)

and records the model's own next-token probabilities. The tests check the recomputed pattern
against the model's cached ``hook_pattern``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from tinyscope.errors import TinyscopeError
from tinyscope.studies.minimal.geometry import EMBED, POS_EMBED, model_dims, owned, subscript

DEFAULT_SEQUENCE = "4 1 + 4 6 9 5 +"


def parse_sequence(text: str, labels: list[str]) -> list[int]:
    """Token ids of a space-separated sequence of token names (``"4 1 + 4 6 9 5 +"``)."""
    index = {lab: i for i, lab in enumerate(labels)}
    ids = []
    for word in text.split():
        if word not in index:
            raise TinyscopeError(f"token {word!r} of sequence {text!r} is not in the vocabulary "
                                 f"({' '.join(labels)})")
        ids.append(index[word])
    if not ids:
        raise TinyscopeError("the walkthrough sequence is empty; pass tokens separated by spaces")
    return ids


@dataclass
class Trace:
    """Every intermediate of one sequence; T = sequence length.

    x, p, e (T, D): token, position and combined embeddings; q, k, v (T, Dh); scores (T, T) raw
    q.k with -inf where masked; pattern (T, T); head_out (T, Dh) = pattern @ v; attn_out (T, D)
    what attention adds to the residual; z (T, D) the first residual; probs (T, n_out).
    """

    tokens: list[int]
    labels: list[str]
    x: np.ndarray
    p: np.ndarray
    e: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    pattern: np.ndarray
    head_out: np.ndarray
    attn_out: np.ndarray
    z: np.ndarray
    probs: np.ndarray

    @property
    def T(self) -> int:
        return len(self.tokens)

    @property
    def token_names(self) -> list[str]:
        return [self.labels[t] for t in self.tokens]

    def point_labels(self) -> list[str]:
        return [f"{self.labels[t]}{subscript(i)}" for i, t in enumerate(self.tokens)]

    @property
    def prediction(self) -> np.ndarray:
        return self.probs.argmax(-1)


def attention_from_qk(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw masked scores q.k (T, T) and the causal softmax pattern of q.k / sqrt(d_k) (Sec. 2.2)."""
    T, dk = q.shape
    raw = q @ k.T  # (T, T)
    mask = np.tril(np.ones((T, T), dtype=bool))
    scores = np.where(mask, raw, -np.inf)
    scaled = scores / math.sqrt(dk)
    scaled = scaled - scaled.max(-1, keepdims=True)
    w = np.exp(scaled) * mask
    return scores, w / w.sum(-1, keepdims=True)


@torch.no_grad()
def trace_sequence(model, tokens: list[int], labels: list[str], head: int = 0) -> Trace:
    """Trace ``tokens`` through layer 0 of ``model`` (Sec. 3.6)."""
    V, n_ctx = model_dims(model)
    if len(tokens) > n_ctx:
        raise TinyscopeError(f"the walkthrough sequence has {len(tokens)} tokens; the model's context is {n_ctx}")
    device = next(model.parameters()).device
    names = [EMBED, POS_EMBED, "blocks.0.attn.hook_q", "blocks.0.attn.hook_k", "blocks.0.attn.hook_v",
             "blocks.0.hook_attn_out", "blocks.0.hook_resid_mid"]
    names = [n for n in names if n in model.hook_dict]
    t = torch.tensor([tokens], dtype=torch.long, device=device)  # (1, T)
    logits, cache = model.run_with_cache(t, names_filter=names)

    def get(name: str) -> np.ndarray:
        return owned(cache[name][0])  # a copy: hook_pos_embed is a view of W_pos

    x = get(EMBED)  # (T, D)
    p = get(POS_EMBED) if POS_EMBED in cache else np.zeros_like(x)  # (T, D)
    q = get("blocks.0.attn.hook_q")[:, head]  # (T, Dh)
    k = get("blocks.0.attn.hook_k")[:, head]  # (T, Dh)
    v = get("blocks.0.attn.hook_v")[:, head]  # (T, Dh)
    scores, pattern = attention_from_qk(q, k)  # (T, T) each
    head_out = pattern @ v  # (T, Dh)
    attn_out = get("blocks.0.hook_attn_out")  # (T, D)
    z = get("blocks.0.hook_resid_mid")  # (T, D)
    probs = torch.softmax(logits[0].float(), -1).cpu().numpy()  # (T, n_out)
    return Trace(list(tokens), labels, x, p, x + p, q, k, v, scores, pattern, head_out, attn_out, z, probs)
