"""Local (windowed) multi-head attention: a dense-mask reference beside the banded version.

Query ``i`` attends to keys ``j`` with ``lo <= j - i <= hi`` that exist (0 <= j < T) and are
valid (``key_valid[b, j]``)::

    a_{ij} = softmax_j(q_i . k_j / sqrt(d_head)),   o_i = sum_j a_{ij} v_j

TraceRelay's Left attention is ``(lo, hi) = (-L, 0)`` and its Right attention ``(0, R)``; both
windows include their centre (Sec. 2.1). A query with no admissible key outputs zero.

:func:`local_attention_dense` builds the (T, T) mask: O(T^2) time and memory.
:func:`local_attention_banded` gathers each query's ``w = hi - lo + 1`` keys with a strided
view (``unfold``): O(T * w) time and memory. Both return the pattern in their own layout:
dense (B, H, T, T), banded (B, H, T, w) where slot ``s`` holds key ``i + lo + s``; the banded
version works chunk by chunk so its matmuls stay efficient.
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


def local_attention_banded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor | None,
                           lo: int, hi: int, chunk: int = 32, need_pattern: bool = False
                           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Fast path, same contract as :func:`local_attention_dense`; the pattern (only when
    ``need_pattern``) is banded, (B, H, T, w) with slot s holding key i + lo + s.

    Queries are cut into chunks of ``chunk`` positions; a chunk attends to the
    ``S = chunk + hi - lo`` keys its windows cover, as one (chunk x S) matmul with a band mask.
    Work and memory are O(T * S): linear in T, with matmuls large enough to run efficiently."""
    B, H, T, Dh = q.shape
    C = max(1, min(chunk, T))
    n = -(-T // C)
    S = C + hi - lo
    pad_q = n * C - T
    qc = torch.cat([q, q.new_zeros(B, H, pad_q, Dh)], 2).view(B, H, n, C, Dh) if pad_q else q.view(B, H, n, C, Dh)
    front, back = max(0, -lo), n * C + max(0, hi) - T
    start = front + lo  # padded index of key cC + lo for chunk c = 0

    def windows(x: torch.Tensor, fill) -> torch.Tensor:  # (..., T, D) -> (..., n, S, D)
        shape = x.shape[:-2]
        x = torch.cat([x.new_full(shape + (front, x.shape[-1]), fill), x,
                       x.new_full(shape + (back, x.shape[-1]), fill)], -2)[..., start:, :]
        return x.unfold(-2, S, C).transpose(-1, -2)

    kc, vc = windows(k, 0), windows(v, 0)  # (B, H, n, S, Dh)
    if key_valid is None:
        key_valid = torch.ones(B, T, dtype=torch.bool, device=q.device)
    kmask = windows(key_valid[..., None], False)[..., 0]  # (B, n, S)
    rel = torch.arange(S, device=q.device)[None, :] - torch.arange(C, device=q.device)[:, None]  # (C, S) s - a
    band = (rel >= 0) & (rel <= hi - lo)  # (C, S)
    mask = band[None, None] & kmask[:, :, None, :]  # (B, n, C, S)
    scores = torch.matmul(qc, kc.transpose(-1, -2)) / math.sqrt(Dh)  # (B, H, n, C, S)
    pattern = _masked_softmax(scores, mask[:, None])  # (B, H, n, C, S)
    out = torch.matmul(pattern, vc).reshape(B, H, n * C, Dh)[:, :, :T]  # (B, H, T, Dh)
    banded = None
    if need_pattern:
        idx = (torch.arange(C, device=q.device)[:, None] + torch.arange(hi - lo + 1, device=q.device)[None, :])
        banded = pattern.gather(-1, idx.expand(B, H, n, C, hi - lo + 1)).reshape(B, H, n * C, -1)[:, :, :T]
    return out, banded


def window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """One query per row against an explicit window (decoding): q (B, H, Dh), k/v (B, H, w, Dh),
    mask (B, w) bool. Returns (B, H, Dh)."""
    scores = torch.einsum("bhd,bhwd->bhw", q, k) / math.sqrt(q.shape[-1])  # (B, H, w)
    pattern = _masked_softmax(scores, mask[:, None, :])  # (B, H, w)
    return torch.einsum("bhw,bhwd->bhd", pattern, v)
