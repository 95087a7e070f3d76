"""Checks of what a model's public entry points are given: token ids, their shape, masks.

Every model's ``forward``, ``prefill`` and ``step`` (and so ``run_with_cache`` and
``run_with_hooks``, which call ``forward``) checks its input once, before any layer runs, and
raises :class:`~tinyscope.errors.InputError` naming the argument, the bad value and what is
allowed, instead of a raw torch error (an ``IndexError`` on CPU, a device-side assert on CUDA).

Definitions:

* a *token tensor* is an integer tensor (``torch.int64`` or ``torch.int32``) of shape
  ``(batch, positions)`` (``(batch,)`` for one decoding step); ``batch`` may be 0, ``positions``
  may not;
* its ids are *in range* when ``low <= id <= high`` for every entry (``high`` inclusive);
* a *mask* has the token tensor's shape and is ``torch.bool``, or numeric holding only 0 and 1.

Cost: one ``torch.aminmax`` over the token tensor (one pass, one host sync on CUDA) plus
shape and dtype tests; the position of a bad id is looked up only once the check has failed.
"""
from __future__ import annotations

import torch

from tinyscope.errors import InputError

TOKEN_DTYPES = (torch.int64, torch.int32)


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(n) for n in t.shape) + ("," if t.dim() == 1 else "") + ")"


def _first(mask: torch.Tensor) -> str:
    """Index of the first True entry of ``mask``, as ``[i, j]``."""
    where = mask.nonzero()[0].tolist()
    return "[" + ", ".join(map(str, where)) + "]"


def check_tokens(tokens, *, vocab_size: int, name: str = "tokens", max_len: int | None = None,
                 ndim: int = 2, low: int = 0, range_note: str = "", context_note: str = "",
                 device: torch.device | None = None) -> torch.Tensor:
    """Check a token tensor; return it unchanged.

    ``vocab_size``: ids must lie in ``[low, vocab_size - 1]``; ``range_note`` says where that
    range comes from (e.g. ``"model.vocab_size=12"``). ``max_len``: the most positions allowed
    (``None``: unbounded), explained by ``context_note``. ``ndim``: 2 for ``(batch, positions)``,
    1 for one decoding step ``(batch,)``. ``device``: the model's device, when known.
    """
    if not isinstance(tokens, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor of integer token ids, got {type(tokens).__name__}; "
                         f"wrap it with torch.tensor(..., dtype=torch.long)")
    if tokens.dtype not in TOKEN_DTYPES:
        raise InputError(f"{name} has dtype {tokens.dtype}; token ids must be integers (torch.int64 or "
                         f"torch.int32): pass {name}.long()")
    if tokens.dim() != ndim:
        want = "(batch, positions)" if ndim == 2 else "(batch,)"
        hint = f"; for one sequence pass {name}[None]" if ndim == 2 and tokens.dim() == 1 else ""
        raise InputError(f"{name} has shape {_shape(tokens)}; expected {want}{hint}")
    if ndim == 2:
        T = tokens.shape[1]
        if T == 0:
            raise InputError(f"{name} has shape {_shape(tokens)}: an empty sequence; each sequence needs at least "
                             f"1 position")
        if max_len is not None and T > max_len:
            note = f" ({context_note})" if context_note else ""
            raise InputError(f"{name} has {T} positions, which exceeds the context of {max_len}{note}; the model "
                             f"takes 1 to {max_len}: shorten the sequence or build the model with a larger context")
    if device is not None and tokens.device != device:
        raise InputError(f"{name} is on {tokens.device} but the model is on {device}: move it with "
                         f"{name}.to({str(device)!r})")
    if tokens.numel():
        lo, hi = (int(v) for v in torch.aminmax(tokens))
        high = vocab_size - 1
        if lo < low or hi > high:
            bad, kind = (lo, tokens < low) if lo < low else (hi, tokens > high)
            note = f" ({range_note})" if range_note else ""
            raise InputError(f"{name} holds id {bad} at {_first(kind)}; token ids must lie in [{low}, {high}]{note}")
    return tokens


def check_mask(mask, *, like: torch.Tensor, name: str = "mask", tokens_name: str = "tokens") -> torch.Tensor:
    """Check a mask of the token tensor ``like``'s shape; return it as ``torch.bool``."""
    if not isinstance(mask, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor (bool, shape {_shape(like)} like {tokens_name}), "
                         f"got {type(mask).__name__}")
    if mask.shape != like.shape:
        raise InputError(f"{name} has shape {_shape(mask)}; it must match {tokens_name}, {_shape(like)}")
    if mask.device != like.device:
        raise InputError(f"{name} is on {mask.device} but {tokens_name} is on {like.device}")
    if mask.dtype == torch.bool:
        return mask
    if mask.is_complex():
        raise InputError(f"{name} has dtype {mask.dtype}; a mask is torch.bool (or numbers 0 and 1)")
    other = (mask != 0) & (mask != 1)
    if mask.numel() and bool(other.any()):
        raise InputError(f"{name} holds {mask[other][0].item()!r} at {_first(other)}; a mask holds only "
                         f"True/False (or 1/0)")
    return mask.bool()
