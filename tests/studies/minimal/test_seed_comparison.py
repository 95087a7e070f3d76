"""Seed comparison: orthogonal Procrustes recovers a rotation or reflection, and a model compared
with a rotated (or reflected) copy of itself, the same function, aligns to ~0 residual."""
import types

import numpy as np
import torch

from tinyscope.runs import registry
from tinyscope.runs.rundir import build
from tinyscope.studies.minimal.seed_comparison import compare_runs, comparison_figure, procrustes


def _orthogonal(angle: float, reflect: bool) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    R = np.array([[c, -s], [s, c]])
    return R @ np.diag([1.0, -1.0]) if reflect else R


def test_procrustes_recovers_a_reflection():
    X = np.random.default_rng(0).normal(size=(40, 2))
    Q = _orthogonal(0.7, reflect=True)
    R = procrustes(X, X @ Q)
    assert np.allclose(R, Q, atol=1e-10) and np.isclose(np.linalg.det(R), -1.0)


def _rotated_copy(model, R: np.ndarray, S: np.ndarray):
    """The same function with the residual plane mapped by R and the query/key plane by S."""
    copy = build(*_exp_cfg())[1]
    R, S = torch.tensor(R, dtype=torch.float32), torch.tensor(S, dtype=torch.float32)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    sd["W_E.weight"] = sd["W_E.weight"] @ R
    sd["W_pos.weight"] = sd["W_pos.weight"] @ R
    for name in ("W_Q", "W_K"):
        sd[f"blocks.0.attn.{name}.weight"] = S.T @ sd[f"blocks.0.attn.{name}.weight"] @ R
    sd["blocks.0.attn.W_V.weight"] = R.T @ sd["blocks.0.attn.W_V.weight"] @ R
    sd["blocks.0.mlp.W_in.weight"] = sd["blocks.0.mlp.W_in.weight"] @ R
    sd["blocks.0.mlp.W_out.weight"] = R.T @ sd["blocks.0.mlp.W_out.weight"]
    sd["blocks.0.mlp.W_out.bias"] = sd["blocks.0.mlp.W_out.bias"] @ R
    sd["W_U.weight"] = sd["W_U.weight"] @ R
    copy.load_state_dict(sd)
    return copy.eval()


def _exp_cfg(seed: int = 3):
    exp = registry.get("plus-last-even")
    return exp, exp.config("smoke", seed, ["task.n_sequences=20", "task.n_eval_sequences=5"])


def test_a_rotated_copy_aligns_to_zero_residual():
    exp, cfg = _exp_cfg()
    task, model = build(exp, cfg)
    model.eval()
    R, S = _orthogonal(1.1, reflect=True), _orthogonal(-2.0, reflect=False)
    copy = _rotated_copy(model, R, S)
    tokens = torch.randint(0, 12, (8, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(model(tokens), copy(tokens), atol=1e-5)  # the symmetry is exact
    other = build(*_exp_cfg(seed=4))[1].eval()
    runs = [types.SimpleNamespace(model=m, task=task, results={}) for m in (model, copy, other)]
    ref, aligned, unrelated = compare_runs(runs, ["ref", "copy", "other"], grid=24)
    assert ref.residual < 1e-6 and aligned.residual < 1e-5 and aligned.residual_qk < 1e-5
    assert np.allclose(aligned.R, R.T, atol=1e-5)
    assert np.allclose(aligned.geometry.emb, ref.geometry.emb, atol=1e-5)
    assert np.allclose(aligned.geometry.q, ref.geometry.q, atol=1e-5)
    assert unrelated.residual > 0.1
    assert (aligned.landscape.argmax == ref.landscape.argmax).mean() > 0.99  # one frame, one landscape
    fig = comparison_figure([ref, aligned, unrelated])
    assert len(fig.axes) == 9


def test_merged_tokens_share_one_label():
    from tinyscope.studies.minimal.seed_comparison import merged_groups

    pts = np.array([[0.0, 0.0], [5.0, 5.0], [0.01, 0.0], [5.0, 5.02], [9.0, 0.0]])
    assert merged_groups(pts, np.array([10.0, 10.0])) == [[0, 2], [1, 3], [4]]
    assert merged_groups(pts, np.array([0.1, 0.1])) == [[0], [1], [2], [3], [4]]


def test_compare_seeds_cli_writes_the_figure_and_the_fits(tmp_path, capsys):
    import json
    import shutil
    from pathlib import Path

    from tinyscope.cli import main

    fixture = Path(__file__).parents[2] / "fixtures" / "premove-plus-last-even"
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(fixture, a)
    shutil.copytree(fixture, b)
    assert main(["compare-seeds", str(a), str(b), "--out", str(tmp_path / "cmp"), "--checkpoint", "0"]) == 0
    fits = json.loads((tmp_path / "cmp" / "alignment.json").read_text())
    assert (tmp_path / "cmp" / "seed_comparison.png").stat().st_size > 10_000
    assert [f["step"] for f in fits] == [0, 0] and fits[1]["residual"] < 1e-6
    assert main(["compare-seeds", str(a), "--out", str(tmp_path / "x")]) == 2
    assert "at least two runs" in capsys.readouterr().err
