"""The data contract between tasks and everything else.

A task draws :class:`Batch` es from an explicit ``numpy.random.Generator`` (never global state);
the same generator state gives the same bytes. Tasks are numpy-only: no torch in samplers.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass
class Batch:
    """A batch of token streams with next-token (or per-position) targets.

    tokens:    (B, T) int64 model input.
    targets:   (B, T) int64 target at each position (ignored where ``loss_mask`` is False).
    loss_mask: (B, T) bool, positions that count in the loss.
    meta:      task-specific arrays (e.g. ``constrained`` positions, rule ids, lengths).
    """

    tokens: np.ndarray
    targets: np.ndarray
    loss_mask: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.tokens.shape != self.targets.shape or self.tokens.shape != self.loss_mask.shape:
            raise ValueError(f"tokens {self.tokens.shape}, targets {self.targets.shape} and loss_mask "
                             f"{self.loss_mask.shape} must have one shape")

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def select(self, index) -> "Batch":
        """Rows ``index`` of the batch (meta arrays whose first axis is the batch are sliced too)."""
        n = len(self)
        meta = {k: (v[index] if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == n else v)
                for k, v in self.meta.items()}
        return Batch(self.tokens[index], self.targets[index], self.loss_mask[index], meta)

    def to_torch(self, device="cpu") -> dict:
        """Tensors for the model: ``tokens``, ``targets`` (long), ``loss_mask`` (bool), and every
        numeric array of ``meta`` under its own key."""
        import torch

        out = {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in self.meta.items()
               if isinstance(v, np.ndarray) and v.dtype.kind in "biuf"}
        return out | {
            "tokens": torch.from_numpy(np.ascontiguousarray(self.tokens, dtype=np.int64)).to(device),
            "targets": torch.from_numpy(np.ascontiguousarray(self.targets, dtype=np.int64)).to(device),
            "loss_mask": torch.from_numpy(np.ascontiguousarray(self.loss_mask, dtype=bool)).to(device),
        }

    def fingerprint(self) -> str:
        return fingerprint(self.tokens, self.targets, self.loss_mask)


def fingerprint(*arrays: np.ndarray) -> str:
    """Short hash of arrays' bytes and shapes: identifies a fixed evaluation set in results."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


@runtime_checkable
class Task(Protocol):
    """What the trainer needs from a task."""

    vocab_size: int

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """A training batch drawn with ``rng``."""
        ...


@runtime_checkable
class FixedEvalSet(Protocol):
    """A task with a fixed evaluation set, identified by a fingerprint saved with the results."""

    def eval_fingerprint(self) -> str:
        ...


def step_rng(seed: int, step: int, stream: int = 0) -> np.random.Generator:
    """The generator for one training step: a pure function of (seed, step, stream).

    Making each step's data independent of history is what lets a resumed run see the same
    batches as an uninterrupted one, and lets DDP ranks slice one global batch.
    """
    return np.random.default_rng([int(seed), int(step), int(stream)])
