"""Learning-rate schedules as multipliers of the base rate, a pure function of the step.

``lr(step) = base * m(step)`` with a linear warmup from ``warmup_start`` to 1 over
``warmup_steps``, then ``constant`` (1), ``cosine`` (to ``min_ratio`` at ``total``),
``linear`` (to ``min_ratio`` at ``total``) or ``wsd`` (warmup-stable-decay: 1 until the last
``decay_fraction`` of the steps, then a cosine to ``min_ratio`` at ``total``; a long stretch at
the full rate lets slow circuits such as induction heads form before the rate falls).
"""
from __future__ import annotations

import math


def lr_multiplier(step: int, *, total: int, warmup_steps: int = 0, warmup_start: float = 0.0,
                  kind: str = "constant", min_ratio: float = 0.0,
                  decay_fraction: float = 0.2) -> float:
    if warmup_steps > 0 and step < warmup_steps:
        return warmup_start + (1.0 - warmup_start) * step / warmup_steps
    if kind == "constant":
        return 1.0
    if kind == "wsd":
        decay_start = max(warmup_steps, total - round(decay_fraction * total))
        if step < decay_start:
            return 1.0
        frac = min(1.0, (step - decay_start) / max(1, total - decay_start))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * frac))
    span = max(1, total - warmup_steps)
    frac = min(1.0, (step - warmup_steps) / span)
    if kind == "cosine":
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * frac))
    if kind == "linear":
        return 1.0 - (1.0 - min_ratio) * frac
    raise ValueError(f"unknown schedule {kind!r}; choose constant, cosine, linear or wsd")
