"""Attention alignment (spatial-induction paper, App. I.5): the attention mass a head puts on a
given set of key positions, for chosen query rows.

For query i (batch b_i, position n_i) and head h, ``mass[i, h] = sum_{m in S_i} A_h[b_i, n_i, m]``.
A layer's score for one query is the mean of its heads' masses (one head: the mass itself); the
reported score is the micro-average over all queries.
"""
from __future__ import annotations

import numpy as np
import torch


def attention_mass(pattern: torch.Tensor, batch: np.ndarray, pos: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Mass on ``targets`` (Q, T) bool of the rows (batch[i], :, pos[i]) of ``pattern`` (B, H, T, T).

    Returns (Q, H) float64.
    """
    rows = pattern[torch.as_tensor(batch), :, torch.as_tensor(pos)]  # (Q, H, T)
    mask = torch.as_tensor(targets, dtype=rows.dtype)  # (Q, T)
    return torch.einsum("qht,qt->qh", rows.double(), mask.double()).numpy()


def summarize(mass: np.ndarray) -> dict:
    """Per-head means and the layer score (heads averaged per query, then micro-averaged)."""
    return {"layer": float(mass.mean(1).mean()) if len(mass) else float("nan"),
            "per_head": [float(m) for m in mass.mean(0)] if len(mass) else [],
            "n_queries": int(len(mass))}
