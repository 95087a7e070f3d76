"""The RoPE and FIRE looped baselines: positions enter only relatively; smoke runs write results."""
import pytest
import torch

from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.circuits.relative_baseline import FireBias, RelativeBaselineConfig, RelativeLoopedBlock, rotate


def test_rope_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 2, 16), torch.randn(1, 1, 2, 16)  # one vector per head, repeated at every position
    T = 9
    qr, kr = rotate(q.expand(1, T, 2, 16), 10000.0), rotate(k.expand(1, T, 2, 16), 10000.0)  # (1, T, H, Dh)
    s = torch.einsum("bihd,bjhd->bhij", qr, kr)[0, 0]  # (T, T)
    for off in range(-T + 1, T):
        diag = torch.diagonal(s, off)
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-5)
    assert not torch.allclose(torch.diagonal(s, 0)[0], torch.diagonal(s, 3)[0])  # but the offset matters
    assert torch.allclose(rotate(q, 10000.0), q)  # position 0 is not rotated


def test_fire_bias_is_a_learned_function_of_distance_and_direction():
    torch.manual_seed(0)
    fire = FireBias(n_heads=3, hidden=8)
    b = fire(6)  # (H, T, T)
    assert b.shape == (3, 6, 6) and torch.isfinite(b).all()
    assert not torch.allclose(b[:, 4, 1], b[:, 1, 4])  # i - j = 3 and -3 differ (the sign input)
    b.sum().backward()
    assert fire.c_raw.grad is not None and fire.L_raw.grad is not None


@pytest.mark.parametrize("positions", ["rope", "fire"])
def test_block_runs_and_smoke_run_writes_results(positions, tmp_path):
    model = RelativeLoopedBlock(RelativeBaselineConfig(vocab_size=8, positions=positions))
    assert model(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, 8)
    torch.set_num_threads(1)
    res = run_experiment(f"circuit-boolean-baseline-{positions}", "smoke", out=tmp_path / positions, progress=False)
    assert {"depth3_acc", "depth3_fits_context", "train_depth1_acc", "train_depth2_acc"} <= set(res["metrics"])
