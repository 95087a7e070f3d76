"""Attention ablation as hooks (spatial-induction paper, App. I.6).

``zero_and_renormalize``: in chosen query rows, set the attention weights on chosen key positions
to zero and renormalize the row to sum to 1 (per head; a row whose mass would vanish is left as
it was). It is returned as a ``hook_pattern`` function, so it applies to any HookedModule whose
attention exposes that hook.

``drop_keys``: the same intervention applied to the pre-softmax scores (``hook_attn_scores``):
the dropped keys get -inf, and the softmax renormalizes over the rest. The two agree wherever
the remaining weights are representable; the score form stays exact when they underflow (sharp
compiled heads put e^-400 on every other key), so the analysis uses it.

``isolated_rows_logits`` makes a Layer-1 intervention act on *one query row at a time*, as the
paper's protocol reads, in two forward passes for all queries together: since the row of query n
changes only the residual at n, the Layer-2 attention of query n sees clean keys and values at
m < n and its own ablated key/value at m = n. That is recomputed exactly at ``hook_z`` of the last
attention layer from the clean pass's keys and values; it requires that layer to be plain scaled
dot-product attention with a causal mask (tinyscope's Transformer).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch


def _as_index(batch: np.ndarray, pos: np.ndarray, keys: np.ndarray) -> tuple[torch.Tensor, ...]:
    """Query rows (batch[i], pos[i]) and their key mask (Q, T) as tensors for advanced indexing."""
    return torch.as_tensor(batch), torch.as_tensor(pos), torch.as_tensor(keys)


def zero_and_renormalize(batch: np.ndarray, pos: np.ndarray, keys: np.ndarray,
                         heads: list[int] | None = None) -> Callable:
    """Hook for ``hook_pattern`` (B, H, T, T): zero ``keys`` (Q, T) bool in rows (batch[i], pos[i])."""
    b, n, drop = _as_index(batch, pos, keys)

    def hook(pattern: torch.Tensor, hook=None) -> torch.Tensor:
        out = pattern.clone()
        rows = out[b, :, n]  # (Q, H, T)
        kept = rows.masked_fill(drop[:, None, :], 0.0)
        total = kept.sum(-1, keepdim=True)  # (Q, H, 1)
        renorm = torch.where(total > 0, kept / total.clamp_min(1e-30), rows)
        if heads is not None:
            sel = torch.zeros(rows.shape[1], dtype=torch.bool)
            sel[list(heads)] = True
            renorm = torch.where(sel[None, :, None], renorm, rows)
        out[b, :, n] = renorm
        return out

    return hook


def clean_keys_values(model, tokens: torch.Tensor, last_layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    pre = f"blocks.{last_layer}.attn."
    _, clean = model.run_with_cache(tokens, names_filter=[pre + "hook_k", pre + "hook_v"])
    return clean[pre + "hook_k"], clean[pre + "hook_v"]  # (B, T, H, Dh) each


def drop_keys(batch: np.ndarray, pos: np.ndarray, keys: np.ndarray) -> Callable:
    """Hook for ``hook_attn_scores`` (B, H, T, T): -inf on ``keys`` (Q, T) in rows (batch[i], pos[i]);
    a row whose every visible key would be dropped is left unchanged."""
    b, n, drop = _as_index(batch, pos, keys)

    def hook(scores: torch.Tensor, hook=None) -> torch.Tensor:
        out = scores.clone()
        rows = out[b, :, n]  # (Q, H, T)
        masked = rows.masked_fill(drop[:, None, :], float("-inf"))
        empty = torch.isinf(masked).all(-1, keepdim=True) & (masked < 0).all(-1, keepdim=True)
        out[b, :, n] = torch.where(empty, rows, masked)
        return out

    return hook


def isolated_rows_logits(model, tokens: torch.Tensor, ablate_hooks: list, last_layer: int,
                         clean_kv: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Logits when each query row hooked by ``ablate_hooks`` (layer ``last_layer - 1``) is ablated
    on its own. ``clean_kv``: the clean pass's keys and values of ``last_layer`` if already known.
    """
    pre = f"blocks.{last_layer}.attn."
    k_clean, v_clean = clean_kv if clean_kv is not None else clean_keys_values(model, tokens, last_layer)
    seen: dict[str, torch.Tensor] = {}

    def grab(x: torch.Tensor, hook) -> None:
        seen[hook.name] = x

    def rebuild_z(z: torch.Tensor, hook) -> torch.Tensor:
        q, k_abl, v_abl = seen[pre + "hook_q"], seen[pre + "hook_k"], seen[pre + "hook_v"]  # (B, T, H, Dh)
        T, Dh = q.shape[1], q.shape[-1]
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k_clean) / math.sqrt(Dh)  # (B, H, T, T)
        own = torch.einsum("bthd,bthd->bht", q, k_abl) / math.sqrt(Dh)  # (B, H, T) query's own key
        eye = torch.eye(T, dtype=torch.bool)
        scores = torch.where(eye, own[..., None], scores)
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        pattern = torch.softmax(scores, -1)  # (B, H, T, T)
        zc = torch.einsum("bhqk,bkhd->bqhd", pattern, v_clean)  # (B, T, H, Dh)
        diag = torch.diagonal(pattern, dim1=-2, dim2=-1).permute(0, 2, 1)[..., None]  # (B, T, H, 1)
        return zc + diag * (v_abl - v_clean)

    hooks = list(ablate_hooks) + [(pre + "hook_q", grab), (pre + "hook_k", grab), (pre + "hook_v", grab),
                                  (pre + "hook_z", rebuild_z)]
    return model.run_with_hooks(tokens, fwd_hooks=hooks)
