"""Local (windowed) multi-head attention: a dense-mask reference beside the banded version.

Query ``i`` attends to keys ``j`` with ``lo <= j - i <= hi`` that exist (0 <= j < T) and are
valid (``key_valid[b, j]``)::

    a_{ij} = softmax_j(q_i . k_j / sqrt(d_head)),   o_i = sum_j a_{ij} v_j

TraceRelay's Left attention is ``(lo, hi) = (-L, 0)`` and its Right attention ``(0, R)``; both
windows include their centre (Sec. 2.1). A query with no admissible key outputs zero.

:func:`local_attention_dense` builds the (T, T) mask: O(T^2) time and memory.
:func:`local_attention_banded` gathers each query's ``w = hi - lo + 1`` keys with a strided
view (``unfold``): O(T * w) time and memory. Both return the pattern in their own layout:
dense (B, H, T, T), banded (B, H, T, w) where slot ``s`` holds key ``i + lo + s``.
"""
from __future__ import annotations

import math

import torch


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis restricted to ``mask``; rows with no admissible key give 0.

    A finite fill (not -inf) keeps fully masked rows free of NaN in forward and backward."""
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask  # exact zeros where masked


def local_attention_dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor | None,
                          lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference. q, k, v: (B, H, T, Dh); key_valid: (B, T) bool or None.
    Returns (out (B, H, T, Dh), pattern (B, H, T, T))."""
    T, Dh = q.shape[2], q.shape[3]
    idx = torch.arange(T, device=q.device)
    offset = idx[None, :] - idx[:, None]  # (T, T) j - i
    mask = ((offset >= lo) & (offset <= hi))[None, None]  # (1, 1, T, T)
    if key_valid is not None:
        mask = mask & key_valid[:, None, None, :]  # (B, 1, T, T)
    scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(Dh)  # (B, H, T, T)
    pattern = _masked_softmax(scores, mask)  # (B, H, T, T)
    return torch.einsum("bhij,bhjd->bhid", pattern, v), pattern


def band_keys(x: torch.Tensor, lo: int, hi: int, fill=0) -> torch.Tensor:
    """Each position's window of ``x`` along axis -2 (for k/v) as a strided view.

    x: (..., T, D) -> (..., T, w, D) with slot s holding position i + lo + s (``fill`` outside)."""
    T, w = x.shape[-2], hi - lo + 1
    pad_front, pad_back = max(0, -lo), max(0, hi)
    shape = x.shape[:-2]
    x = torch.cat([x.new_full(shape + (pad_front, x.shape[-1]), fill), x,
                   x.new_full(shape + (pad_back, x.shape[-1]), fill)], dim=-2)  # (..., T + w - 1, D)
    start = pad_front + lo
    x = x[..., start:start + T + w - 1, :]
    return x.unfold(-2, w, 1).transpose(-1, -2)  # (..., T, w, D)


def band_mask(key_valid: torch.Tensor | None, B: int, T: int, lo: int, hi: int, device) -> torch.Tensor:
    """(B, T, w) bool: slot s of query i is admissible (key exists and is valid)."""
    if key_valid is None:
        key_valid = torch.ones(B, T, dtype=torch.bool, device=device)
    return band_keys(key_valid[..., None], lo, hi, fill=False)[..., 0]  # (B, T, w)


def local_attention_banded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor | None,
                           lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fast path, same contract as :func:`local_attention_dense` but the pattern is (B, H, T, w)."""
    B, H, T, Dh = q.shape
    kb = band_keys(k, lo, hi)  # (B, H, T, w, Dh)
    vb = band_keys(v, lo, hi)  # (B, H, T, w, Dh)
    mask = band_mask(key_valid, B, T, lo, hi, q.device)[:, None]  # (B, 1, T, w)
    scores = torch.einsum("bhtd,bhtwd->bhtw", q, kb) / math.sqrt(Dh)  # (B, H, T, w)
    pattern = _masked_softmax(scores, mask)  # (B, H, T, w)
    return torch.einsum("bhtw,bhtwd->bhtd", pattern, vb), pattern


def window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """One query per row against an explicit window (decoding): q (B, H, Dh), k/v (B, H, w, Dh),
    mask (B, w) bool. Returns (B, H, Dh)."""
    scores = torch.einsum("bhd,bhwd->bhw", q, k) / math.sqrt(q.shape[-1])  # (B, H, w)
    pattern = _masked_softmax(scores, mask[:, None, :])  # (B, H, w)
    return torch.einsum("bhw,bhwd->bhd", pattern, v)
