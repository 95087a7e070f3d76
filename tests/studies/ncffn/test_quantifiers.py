"""Sequence quantifiers: the O(T) scans equal the loop recurrences, causality, gradients."""
import math

import pytest
import torch
import torch.nn.functional as F

from tinyscope.studies.ncffn.quantifiers import (
    QuantifierBlock,
    decayed_cumsum,
    existential_loop,
    existential_scan,
    proportion_loop,
    proportion_scan,
)


def _inputs(B, T, U, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    pre = torch.randn(B, T, U, generator=g, dtype=dtype) * 3
    theta = torch.linspace(-6, 9, U, dtype=dtype)  # decays from 0.0025 to 0.9999
    return pre, theta


def test_existential_scan_equals_loop_at_T4096():
    pre, theta = _inputs(2, 4096, 6)
    scan = existential_scan(F.logsigmoid(pre), F.logsigmoid(theta))
    loop = existential_loop(torch.sigmoid(pre), torch.sigmoid(theta))
    torch.testing.assert_close(scan, loop, rtol=1e-10, atol=1e-12)


def test_proportion_scan_equals_loop_at_T4096():
    pre, theta = _inputs(2, 4096, 6, seed=1)
    scan = proportion_scan(torch.sigmoid(pre), F.logsigmoid(theta))
    loop = proportion_loop(torch.sigmoid(pre), torch.sigmoid(theta))
    torch.testing.assert_close(scan, loop, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("T,chunk", [(1, 4), (5, 4), (37, 4), (200, 3)])
def test_scans_at_odd_lengths_and_chunks(T, chunk):
    """Padding and the recursion over chunk levels (T=200, chunk 3: five levels)."""
    pre, theta = _inputs(3, T, 4, seed=T)
    torch.testing.assert_close(existential_scan(F.logsigmoid(pre), F.logsigmoid(theta), chunk),
                               existential_loop(torch.sigmoid(pre), torch.sigmoid(theta)), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(decayed_cumsum(pre, F.logsigmoid(theta), chunk),
                               proportion_loop(pre, torch.sigmoid(theta)) / (1 - torch.sigmoid(theta)),
                               rtol=1e-9, atol=1e-9)


def test_float32_block_scan_matches_loop():
    torch.manual_seed(0)
    q = QuantifierBlock(16, 5, 7, init_decay=0.9)
    with torch.no_grad():
        q.theta_gamma.uniform_(-4, 6)
        q.theta_lam.uniform_(-4, 6)
    x = torch.randn(2, 512, 16)
    fast = q(x)
    q.use_scan = False
    torch.testing.assert_close(fast, q(x), rtol=1e-4, atol=2e-5)


def test_block_is_causal():
    torch.manual_seed(0)
    q = QuantifierBlock(8, 4, 4)
    x = torch.randn(1, 300, 8)
    y = q(x)
    x2 = x.clone()
    x2[:, 150] += 5.0
    y2 = q(x2)
    assert torch.equal(y[:, :150], y2[:, :150])
    assert not torch.allclose(y[:, 150], y2[:, 150])


def test_gradients_reach_gamma_and_lambda_and_match_loop():
    torch.manual_seed(0)
    q = QuantifierBlock(8, 3, 3, init_decay=0.8).double()
    x = torch.randn(2, 70, 8, dtype=torch.float64)
    grads = []
    for use_scan in (True, False):
        q.zero_grad()
        q.use_scan = use_scan
        q(x).pow(2).sum().backward()
        grads.append((q.theta_gamma.grad.clone(), q.theta_lam.grad.clone()))
    (gs, ls), (gl, ll) = grads
    assert gs.abs().min() > 0 and ls.abs().min() > 0
    torch.testing.assert_close(gs, gl)
    torch.testing.assert_close(ls, ll)


def test_sticky_init_and_half_lives():
    q = QuantifierBlock(4, 2, 3, init_decay=0.99)
    torch.testing.assert_close(q.gamma, torch.full((2,), 0.99))
    hl = q.half_lives()
    torch.testing.assert_close(hl["prop"], torch.full((3,), math.log(0.5) / math.log(0.99)))
    assert hl["exist"].shape == (2,)
