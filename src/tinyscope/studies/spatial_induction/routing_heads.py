"""Which routing cells the layer-1 heads gather: a check of the Dedicated-heads gather that is
cheap enough to run at every validation.

For layer-1 head h and routing cell u in U = D_K u (D_K + u_d) (Definition 2), the routing mass is
the attention the scored queries put on their cell u, averaged over queries:

    m[h, u] = mean_q  A1[h, q, rho(t_q - 1, kappa_q + u)]

A head *points at* argmax_u m[h, u] when that mass is at least ``floor``; a diffuse head points
nowhere. ``distinct_routing_peaks`` counts the distinct cells the heads point at. Construction I
has one head per cell, so it points at all |U| of them. The converged ECA Dedicated-heads model
points at 3. A V = 3 start that copies one weighted gather (the Shared-head code, App. G.4) into
three heads points at 1 (docs/results/spatial_induction.md).

A Shared-head layer 1 gathers the whole neighbourhood through its one head, so what tells a
gathering head from one that reads older rows is its *routing coverage*, max_h sum_u m[h, u]: the
most attention one head puts on the routing cells. Measured on Shared-head ECA starts at their
first full-length evaluations: 0.88-0.93 for a start that gathers, 0.03-0.11 for one that reads
older rows (docs/results/spatial_induction.md, 2026-12-06).
"""
from __future__ import annotations

import numpy as np
import torch

from tinyscope.studies.spatial_induction.construction_sets import routing_positions
from tinyscope.studies.spatial_induction.serialize import Layout

PEAK_FLOOR = 0.1  # diffuse heads put ~0.01-0.03 on any one cell in the trained models measured


@torch.no_grad()
def routing_mass(model: torch.nn.Module, tokens: np.ndarray, layout: Layout, T0: int) -> torch.Tensor:
    """m[h, u] (H, |U|) over the scored queries of ``tokens`` (B, N_in)."""
    queries, pos = routing_positions(layout, T0)  # (q,), (q, |U|)
    device = next(model.parameters()).device
    x = torch.as_tensor(np.asarray(tokens), dtype=torch.long, device=device)  # (B, N_in)
    _, cache = model.run_with_cache(x, names_filter=["blocks.0.attn.hook_pattern"])
    rows = cache["pattern", 0][:, :, torch.as_tensor(queries, device=device)].float()  # (B, H, q, N_in)
    idx = torch.as_tensor(pos, device=device)[None, None].expand(*rows.shape[:2], -1, -1)  # (B, H, q, |U|)
    return rows.gather(-1, idx).mean((0, 2)).double().cpu()  # (H, |U|)


def distinct_routing_peaks(mass: torch.Tensor, floor: float = PEAK_FLOOR) -> int:
    """The number of distinct routing cells that some head points at (mass (H, |U|))."""
    best, cell = mass.max(-1)  # (H,), (H,)
    return len(set(cell[best >= floor].tolist()))


def routing_coverage(mass: torch.Tensor) -> float:
    """max_h sum_u m[h, u]: the most attention one layer-1 head puts on the routing cells (mass (H, |U|))."""
    return float(mass.sum(-1).max())
