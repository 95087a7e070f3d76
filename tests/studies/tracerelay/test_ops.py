"""TraceRelay kernels against their plain references: phase scan vs loop, banded vs dense attention."""
import math

import numpy as np
import pytest
import torch

from tinyscope.studies.tracerelay.ops.local_attention import (
    local_attention_banded,
    local_attention_dense,
    window_attention,
)
from tinyscope.studies.tracerelay.ops.phase_scan import phase_scan, phase_scan_reference, wrap

TWO_PI = 2 * math.pi


def circular_error(a, b) -> float:
    d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) % TWO_PI
    return float(np.minimum(d, TWO_PI - d).max())


@pytest.mark.parametrize("inherit", [True, False])
@pytest.mark.parametrize("T,W", [(1, 8), (7, 8), (8, 8), (103, 8), (50, 3)])
def test_phase_scan_matches_loop_float64(inherit, T, W):
    g = torch.Generator().manual_seed(T * 10 + W)
    u = (torch.rand(2, T, 5, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    q = torch.rand(2, T, generator=g) > 0.3
    u = u * q[..., None]
    ref, v_ref = phase_scan_reference(u, q, W, inherit)
    fast, v_fast = phase_scan(u, q, W, inherit)
    assert circular_error(ref, fast) < 1e-12
    assert torch.equal(v_ref, v_fast)
    assert fast.min() >= 0 and fast.max() < TWO_PI


def test_phase_scan_lineages_and_flags_by_hand():
    # W = 2: lineage 0 holds positions 0, 2, 4; lineage 1 holds 1, 3, 5
    u = torch.tensor([[1.0, 0.0, 2.0, 0.5, 4.0, 0.0]], dtype=torch.float64)[..., None]
    q = torch.tensor([[True, False, True, True, False, False]])
    theta, v = phase_scan(u, q, 2)
    assert torch.allclose(theta[0, :, 0], torch.tensor([1.0, 0.0, 3.0, 0.5, 7.0 - TWO_PI, 0.5], dtype=torch.float64))
    assert v[0].tolist() == [True, False, True, True, True, True]  # an invalid source never clears a flag
    theta, v = phase_scan(u, q, 2, inherit=False)
    assert v[0].tolist() == q[0].tolist()
    assert torch.allclose(theta[0, :, 0], wrap(u[0, :, 0]))


def test_phase_scan_continuation_from_saved_tail():
    g = torch.Generator().manual_seed(1)
    u = torch.rand(3, 77, 4, generator=g, dtype=torch.float64) * math.pi
    q = torch.rand(3, 77, generator=g) > 0.5
    full, v_full = phase_scan(u, q, 8)
    head, v_head = phase_scan(u[:, :30], q[:, :30], 8)
    tail, v_tail = phase_scan(u[:, 30:], q[:, 30:], 8, theta0=head[:, -8:], v0=v_head[:, -8:])
    ref_tail, ref_v = phase_scan_reference(u[:, 30:], q[:, 30:], 8, theta0=head[:, -8:], v0=v_head[:, -8:])
    assert circular_error(torch.cat([head, tail], 1), full) < 1e-12
    assert circular_error(tail, ref_tail) < 1e-12
    assert torch.equal(torch.cat([v_head, v_tail], 1), v_full) and torch.equal(ref_v, v_tail)


def test_phase_scan_float32_at_65536_within_tolerance():
    """The hardest case for wrap-around accumulation: every increment positive, so a lineage
    wraps ~2,000 times. Stated tolerance: 1e-4 rad (circular) against a float64 loop on the same
    float32 inputs (measured ~3e-5); a plain float32 cumsum + remainder misses it (~8e-4)."""
    T, W = 65536, 8
    rng = np.random.default_rng(0)
    u = rng.uniform(0, math.pi, (T, 3)).astype(np.float32).astype(np.float64)
    theta, ref = np.zeros((W, 3)), np.empty_like(u)
    for t in range(T):  # the loop reference, in numpy float64 (fast enough at this length)
        theta[t % W] = (theta[t % W] + u[t]) % TWO_PI
        ref[t] = theta[t % W]
    u32 = torch.from_numpy(u).float()[None]
    fast, _ = phase_scan(u32, torch.ones(1, T, dtype=torch.bool), W)
    assert fast.dtype == torch.float32
    assert circular_error(fast[0], ref) < 1e-4
    plain = torch.remainder(torch.cumsum(u32.view(1, T // W, W, 3), 1), TWO_PI).view(T, 3)
    assert circular_error(plain, ref) > 3e-4  # the tolerance is tight enough to matter
    loop, _ = phase_scan_reference(u32[:, :4096].double(), torch.ones(1, 4096, dtype=torch.bool), W)
    assert circular_error(loop[0], ref[:4096]) < 1e-12  # the torch loop agrees with this one


def test_phase_scan_gradient_matches_loop():
    g = torch.Generator().manual_seed(2)
    u1 = (torch.rand(1, 40, 3, generator=g, dtype=torch.float64) * 6).requires_grad_()
    u2 = u1.detach().clone().requires_grad_()
    q = torch.ones(1, 40, dtype=torch.bool)
    w = torch.randn(1, 40, 3, generator=g, dtype=torch.float64)
    (torch.sin(phase_scan(u1, q, 8)[0]) * w).sum().backward()
    (torch.sin(phase_scan_reference(u2, q, 8)[0]) * w).sum().backward()
    assert torch.allclose(u1.grad, u2.grad)


@pytest.mark.parametrize("lo,hi", [(-15, 0), (0, 7), (-3, 2), (0, 0)])
@pytest.mark.parametrize("chunk", [1, 5, 32])
def test_banded_attention_matches_dense(lo, hi, chunk):
    g = torch.Generator().manual_seed(hash((lo, hi, chunk)) % 1000)
    q, k, v = torch.randn(3, 2, 4, 41, 8, generator=g, dtype=torch.float64).unbind(0)
    valid = torch.rand(2, 41, generator=g) > 0.25
    valid[1] = False  # a row with no admissible key anywhere gives zeros, not NaN
    out_d, pat_d = local_attention_dense(q, k, v, valid, lo, hi)
    out_b, pat_b = local_attention_banded(q, k, v, valid, lo, hi, chunk=chunk, need_pattern=True)
    assert torch.allclose(out_d, out_b, atol=1e-12)
    assert not torch.isnan(out_b).any() and torch.equal(out_b[1], torch.zeros_like(out_b[1]))
    T, w = 41, hi - lo + 1
    j = torch.arange(T)[:, None] + lo + torch.arange(w)[None, :]  # (T, w) key of each slot
    inside = (j >= 0) & (j < T)
    dense_band = pat_d.gather(-1, j.clamp(0, T - 1).expand(2, 4, T, w)) * inside
    assert torch.allclose(dense_band, pat_b, atol=1e-12)


def test_banded_attention_gradients_match_dense():
    g = torch.Generator().manual_seed(3)
    base = torch.randn(3, 1, 2, 30, 4, generator=g, dtype=torch.float64)
    a = [t.clone().requires_grad_() for t in base.unbind(0)]
    b = [t.clone().requires_grad_() for t in base.unbind(0)]
    valid = torch.rand(1, 30, generator=g) > 0.2
    local_attention_dense(*a, valid, -5, 0)[0].pow(2).sum().backward()
    local_attention_banded(*b, valid, -5, 0, chunk=7)[0].pow(2).sum().backward()
    for x, y in zip(a, b):
        assert torch.allclose(x.grad, y.grad, atol=1e-12)


def test_window_attention_is_one_row_of_dense():
    g = torch.Generator().manual_seed(4)
    q, k, v = torch.randn(3, 2, 3, 20, 4, generator=g, dtype=torch.float64).unbind(0)
    out, _ = local_attention_dense(q, k, v, None, -6, 0)
    row = window_attention(q[:, :, 19], k[:, :, 13:20], v[:, :, 13:20], torch.ones(2, 7, dtype=torch.bool))
    assert torch.allclose(row, out[:, :, 19])
