"""A tiny task and model for the trainer's machine tests: seconds, no study."""
from __future__ import annotations

import numpy as np
import torch

from tinyscope.tasks.base import Batch


class CountingTask:
    """Copy the previous token (vocab 8, length 12); counts the batches drawn (a stateful task,
    like the horizon curriculum of spatial induction)."""

    vocab_size = 8

    def __init__(self):
        self.drawn = 0

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        tokens = rng.integers(0, 8, size=(batch_size, 12))  # (B, T)
        targets = np.roll(tokens, 1, axis=1)  # (B, T)
        mask = np.ones_like(tokens, dtype=bool)
        mask[:, 0] = False
        self.drawn += 1
        return Batch(tokens, targets, mask)

    def state_dict(self) -> dict:
        return {"drawn": self.drawn}

    def load_state_dict(self, state: dict) -> None:
        self.drawn = int(state["drawn"])


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Embedding(8, 32), torch.nn.LayerNorm(32), torch.nn.Dropout(0.1),
                               torch.nn.Linear(32, 8))


def weights(model: torch.nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
