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
float32 spacing is ~2e-3, and every wrap by float32(2*pi) is off by 1.7e-7. :func:`phase_scan`
therefore accumulates and wraps in float64 and casts the wrapped phase back (one rounding).
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


def phase_scan(u: torch.Tensor, q: torch.Tensor, stride: int, inherit: bool = True,
               theta0: torch.Tensor | None = None, v0: torch.Tensor | None = None):
    """Parallel form of :func:`phase_scan_reference` (same arguments, same results).

    u: (B, T, d), q: (B, T) bool. Returns theta (B, T, d), v (B, T) bool. The prefix sums are
    accumulated in float64 and wrapped before casting back, so float32/bf16 inputs lose nothing
    to the magnitude of the running sums.
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
    acc = torch.float64 if u.dtype in (torch.float32, torch.float16, torch.bfloat16) else u.dtype
    theta = wrap(torch.cumsum(u.reshape(B, steps, W, d).to(acc), dim=1)).to(u.dtype)  # (B, n, W, d) Eq. (7)
    v = torch.cummax(q.reshape(B, steps, W).to(torch.uint8), dim=1).values.bool()  # (B, n, W)
    theta = theta.reshape(B, steps * W, d)[:, lead:lead + T]  # (B, T, d)
    v = v.reshape(B, steps * W)[:, lead:lead + T]  # (B, T)
    return theta, v
