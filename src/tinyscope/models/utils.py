"""Facts about a model that every study asks: how many parameters it has and where it lives."""
from __future__ import annotations

import torch


def count_parameters(model: torch.nn.Module) -> int:
    """The number of scalar parameters of ``model`` (every tensor of ``model.parameters()``)."""
    return sum(p.numel() for p in model.parameters())


def device_of(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (a model lives on one device)."""
    return next(model.parameters()).device
