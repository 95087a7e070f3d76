"""The TraceRelay phase recurrence (Sec. 2.3-2.5): a naive loop beside the parallel scan.

Definition (Eq. 3, with validity flags of Sec. 2.4)::

    theta_t = wrap(theta_{t-W} + u_t)          (inherit=True)
    theta_t = wrap(u_t)                        (inherit=False, the no-inheritance ablation)
    v_t     = v_{t-W} or q_t                   (inherit=True;  v_t = q_t when inherit=False)
    theta_{t<0} = 0, v_{t<0} = False, wrap(a) = a mod 2*pi

There are W interleaved lineages r + nW (r = 0..W-1). By Eq. (7) the phase of a lineage is the
wrapped prefix sum of its increments, so a reshape to (B, T/W, W, d) and a cumulative sum over
the lineage axis give every phase at once.

Float32 accuracy: a float32 cumsum of ~8,000 increments bounded by pi reaches ~25,000, where
float32 spacing is ~2e-3, and wrapping by float32(2*pi) is off by 1.7e-7 per turn. The scan
therefore sums in blocks of ``block`` lineage steps in the input dtype (running sums stay below
``block * pi``), accumulates the few block totals in float64, wraps them there, and adds each
block's wrapped carry before one final wrap of a value below ``(block + 2) * pi``.
"""
from __future__ import annotations

import math

import torch

TWO_PI = 2.0 * math.pi


def wrap(a: torch.Tensor) -> torch.Tensor:
    """``a mod 2*pi`` in [0, 2*pi); its gradient is the identity."""
    return torch.remainder(a, TWO_PI)


def phase_scan_reference(u: torch.Tensor, q: torch.Tensor, stride: int, inherit: bool = True,
                         theta0: torch.Tensor | None = None, v0: torch.Tensor | None = None):
    """Plain loop over t. u: (B, T, d) delivered increments; q: (B, T) bool valid deliveries.

    ``theta0`` (B, W, d) and ``v0`` (B, W) are the phase and flags of the W positions before
    t = 0 (a saved tail; zeros/False for a fresh sequence). Returns theta (B, T, d), v (B, T).
    """
    B, T, d = u.shape
    W = stride
    tail = list((theta0 if theta0 is not None else u.new_zeros(B, W, d)).unbind(1))  # W x (B, d)
    vtail = list((v0 if v0 is not None else torch.zeros(B, W, dtype=torch.bool, device=u.device)).unbind(1))
    thetas, flags = [], []
    for t in range(T):
        prev_theta, prev_v = (tail[t], vtail[t]) if t < W else (thetas[t - W], flags[t - W])
        if inherit:
            thetas.append(wrap(prev_theta + u[:, t]))  # (B, d)
            flags.append(prev_v | q[:, t])  # (B,)
        else:
            thetas.append(wrap(u[:, t]))
            flags.append(q[:, t].clone())
    if T == 0:
        return u.new_zeros(B, 0, d), torch.zeros(B, 0, dtype=torch.bool, device=u.device)
    return torch.stack(thetas, 1), torch.stack(flags, 1)


def _wrapped_prefix_sum(x: torch.Tensor, block: int) -> torch.Tensor:
    """``wrap(cumsum(x, dim=1))`` with the blocked float64 carry described above."""
    if x.dtype in (torch.float16, torch.bfloat16):  # half-precision sums would lose the phase entirely
        x = x.float()
    B, n = x.shape[:2]
    nb = -(-n // block)
    if nb * block != n:
        x = torch.cat([x, x.new_zeros((B, nb * block - n) + x.shape[2:])], 1)
    xb = x.reshape((B, nb, block) + x.shape[2:])  # (B, nb, block, ...)
    inner = torch.cumsum(xb, 2)  # (B, nb, block, ...) |.| <= block * max|x|
    totals = inner[:, :, -1].to(torch.float64)  # (B, nb, ...)
    carry = wrap(torch.cumsum(totals, 1) - totals).to(x.dtype)  # (B, nb, ...) wrapped sum of earlier blocks
    # in place: large fresh allocations dominate this op's CPU time; no backward needs these values
    inner.add_(carry[:, :, None]).remainder_(TWO_PI)
    return inner.reshape((B, nb * block) + x.shape[2:])[:, :n]


def phase_scan(u: torch.Tensor, q: torch.Tensor, stride: int, inherit: bool = True,
               theta0: torch.Tensor | None = None, v0: torch.Tensor | None = None, block: int = 16):
    """Parallel form of :func:`phase_scan_reference` (same arguments, same results).

    u: (B, T, d), q: (B, T) bool. Returns theta (B, T, d) (float32 for half-precision u), v (B, T) bool.
    """
    if not inherit:
        return wrap(u), q.clone()
    B, T, d = u.shape
    W = stride
    n = -(-T // W)  # lineage steps
    pad = n * W - T
    if theta0 is not None:  # continuation: the saved tail is step -1 of each lineage
        u = torch.cat([theta0.to(u.dtype), u], 1)  # (B, W + T, d)
        q = torch.cat([v0, q], 1) if v0 is not None else torch.cat([q.new_zeros(B, W), q], 1)
    elif v0 is not None:
        u = torch.cat([u.new_zeros(B, W, d), u], 1)
        q = torch.cat([v0, q], 1)
    lead = u.shape[1] - T  # 0 or W
    if pad:
        u = torch.cat([u, u.new_zeros(B, pad, d)], 1)
        q = torch.cat([q, q.new_zeros(B, pad)], 1)
    steps = u.shape[1] // W
    theta = _wrapped_prefix_sum(u.reshape(B, steps, W, d), block)  # (B, n, W, d) Eq. (7)
    v = torch.cummax(q.reshape(B, steps, W).to(torch.uint8), dim=1).values.bool()  # (B, n, W)
    theta = theta.reshape(B, steps * W, d)[:, lead:lead + T]  # (B, T, d)
    v = v.reshape(B, steps * W)[:, lead:lead + T]  # (B, T)
    return theta, v
