"""Legibility across training: the two-operand test of a fuzzy pair, the decays' own optimizer
group (rate and weight decay), the trajectory summary, the erosion claim's measure, and
`tinyscope analyze` on a smoke run's checkpoints."""
from __future__ import annotations

import math
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tinyscope.errors import ConfigError, TinyscopeError
from tinyscope.runs.claims import RunRecord
from tinyscope.runs.experiment import AnalysisOptions
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.ncffn import claims as nc
from tinyscope.studies.ncffn import legibility_training as lt
from tinyscope.studies.ncffn.experiment import NCLMExperiment, gpt
from tinyscope.studies.ncffn.model import QuantifiedTransformer
from tinyscope.studies.ncffn.quantifiers import QuantifierConfig, decay_parameters
from tinyscope.train.trainer import TrainConfig, Trainer


def test_pair_logic_tells_two_operands_from_a_gate_and_a_repeated_operand():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, (2000, 1))  # (N, 1)
    b_indep = rng.uniform(0, 1, (2000, 1))
    b_const = np.full((2000, 1), 0.7) + rng.normal(0, 0.01, (2000, 1))  # a soft gate: A scaled by ~0.7
    b_same = a + rng.normal(0, 0.01, (2000, 1))  # one proposition twice
    crisp = (rng.uniform(0, 1, (2000, 2)) > 0.5).astype(float)  # Boolean operands
    p = lt.pair_logic(np.hstack([a, a, a, crisp[:, :1]]), np.hstack([b_indep, b_const, b_same, crisp[:, 1:]]))
    assert p["two_operand"].tolist() == [True, False, False, True]
    assert p["booleanness"][3] == pytest.approx(1.0) and p["booleanness"][0] == pytest.approx(0.5, abs=0.03)
    assert p["spread"][1] < lt.MIN_SPREAD and p["corr"][2] > lt.MAX_CORR


def _model(**quant):
    cfg = gpt(vocab_size=20, n_ctx=16, d_model=16, d_head=8, n_heads=[2, 2], d_mlp=[32, 32], ffn="nc")
    return QuantifiedTransformer(cfg, QuantifierConfig(layers=[0, 1], n_exist=2, n_prop=2, **quant))


def test_decays_have_their_own_rate_and_weight_decay_in_the_trainer():
    torch.manual_seed(0)
    model = _model(decay_lr_mult=10.0)
    groups = model.optimizer_groups(1e-3, 0.1)
    ids = [{id(p) for p in g["params"]} for g in groups]
    assert ids[1] == {id(p) for p in decay_parameters(model)} and len(ids[1]) == 4
    assert not ids[0] & ids[1] and len(ids[0]) + len(ids[1]) == len(list(model.parameters()))
    assert [g["base_lr"] for g in groups] == [1e-3, pytest.approx(1e-2)]
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    opt = Trainer(model, SimpleNamespace(sample=None), TrainConfig(lr=1e-3, weight_decay=0.1), seed=0).opt
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    # weight decay alone (no gradient) shrinks a decay logit only when quant.decay_weight_decay asks for it
    for wd, shrinks in ((0.0, False), (0.5, True)):
        m = _model(decay_weight_decay=wd)
        theta0 = m.blocks[0].quant.theta_gamma.detach().clone()
        opt = torch.optim.AdamW(m.optimizer_groups(0.1, 0.5))
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        moved = m.blocks[0].quant.theta_gamma.detach()
        assert bool((moved < theta0).all()) is shrinks
        if shrinks:
            torch.testing.assert_close(moved, theta0 * (1 - 0.1 * 0.5))
    with pytest.raises(ConfigError, match="quant.decay_lr_mult=0"):
        QuantifierConfig(decay_lr_mult=0)
    with pytest.raises(ConfigError, match="quant.decay_weight_decay=-1"):
        QuantifierConfig(decay_weight_decay=-1)


def _record(step, hl, share):
    return {"step": step, "half_lives": {0: hl}, "kinds": {0: ["exist"] * len(hl)},
            "logic": {0: {"two_operand_share": share, "operand_spread": 0.2, "booleanness": 0.4, "n_pairs": 4.0}}}


def test_trajectory_summary_and_erosion_from_the_log():
    recs = [_record(0, [69.0, 69.0], 0.0), _record(100, [10.0, 20.0], 0.8), _record(200, [1.0, 3.0], 0.6)]
    s = lt.summarize_trajectory(recs)
    assert s["half_life_median_l0"] == 2.0 and s["half_life_median_l0_over_training"] == [69.0, 15.0, 2.0]
    assert s["two_operand_peak_l0"] == 0.8 and s["two_operand_peak_step_l0"] == 100
    assert s["two_operand_erosion_l0"] == pytest.approx(0.25)
    assert lt.summarize_trajectory([_record(0, [1.0], 0.0)])["two_operand_erosion_l0"] is None
    ev = lambda step, v: {"step": step, "split": "eval", "two_operand_share_l0": v}  # noqa: E731
    hist = [ev(0, 0.0), ev(200, 0.5), {"step": 250, "split": "train", "loss": 1.0}, ev(400, 0.4)]
    assert lt.erosion_from_history(hist, "two_operand_share_l0") == pytest.approx(0.2)
    rec = RunRecord(0, {}, None, _history=hist)
    assert nc.logic_erosion()([{0: rec}]) == {0: pytest.approx(0.2)}
    with pytest.raises(TinyscopeError, match="logged no 'two_operand_share_l0'"):
        nc.logic_erosion()([{0: RunRecord(0, {}, None, _history=[{"step": 0, "split": "eval"}])}])
    assert lt.plot_half_lives_over_training(recs).axes and lt.plot_logic_over_training(recs).axes


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ncffn") / "r"
    res = run_experiment("ncffn-lm", "smoke", overrides=["model.ffn=nc", "quant.layers=0,1", "train.checkpoint_every=20",
                                                         "train.keep_checkpoints=true"], out=out, progress=False)
    return out, res["metrics"]


def test_analyze_across_the_checkpoints_of_a_smoke_run(smoke_run):
    path, m = smoke_run
    assert {"half_life_median_l0", "half_life_median_l1", "two_operand_share_l0", "two_operand_share_l1"} <= set(m)
    run = load_run(path)
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    exp = NCLMExperiment()
    assert exp.analyses() == ("legibility_over_training",)
    out = exp.analyze(run, AnalysisOptions(n=8, seed=3))
    assert out.numbers["steps"] == [0, 20, 40, 60] and out.numbers["n_windows"] == 8
    assert len(out.numbers["half_life_median_l0_over_training"]) == 4
    assert set(out.figures) == {"half_lives_over_training", "two_operand_logic_over_training"}
    assert all(torch.equal(before[k], v) for k, v in run.model.state_dict().items())  # weights given back
    # the last checkpoint's medians are the last evaluation's (half-lives do not depend on the data)
    last = [r for r in run.metrics() if r.get("split") == "eval"][-1]
    assert last["step"] == 60 and out.numbers["half_life_median_l1"] == pytest.approx(last["half_life_median_l1"])
    assert math.isfinite(out.numbers["two_operand_share_l0"])


def test_analyze_refuses_a_run_without_checkpoints(smoke_run, tmp_path):
    shutil.copytree(smoke_run[0], tmp_path / "r", ignore=shutil.ignore_patterns("step_*"))
    run = load_run(tmp_path / "r")
    assert run.checkpoint_steps() == []  # as a run trained with the preset's train.checkpoint_every=0
    with pytest.raises(TinyscopeError, match="keep_checkpoints=true"):
        NCLMExperiment().analyze(run, AnalysisOptions(n=4))


def test_weight_decay_alone_and_the_rate_budget():
    train = TrainConfig(steps=10, lr=0.1, schedule="constant")
    assert lt.rate_budget(train) == pytest.approx(1.0)
    assert lt.weight_decay_half_life(train, 0.99, 0.0) == pytest.approx(math.log(0.5) / math.log(0.99))
    # ten AdamW steps with no gradient leave the decay logits where the formula says
    m = _model(decay_weight_decay=0.5)
    opt = torch.optim.AdamW(m.optimizer_groups(0.1, 0.5))
    for _ in range(10):
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
    hl = m.blocks[0].quant.half_lives()["exist"]
    torch.testing.assert_close(hl, torch.full_like(hl, lt.weight_decay_half_life(train, 0.99, 0.5)))
    # the cpu preset: weight decay 0.1 on the logits alone gives ~30.6 tokens; the budget is under 4.1
    cpu = NCLMExperiment().config("cpu").train
    assert lt.weight_decay_half_life(cpu, 0.99, 0.1) == pytest.approx(30.57, abs=0.05)
    assert lt.rate_budget(cpu) == pytest.approx(1.965, abs=1e-3)


def test_decay_gradient_signal():
    torch.manual_seed(0)
    m = _model()
    batches = [{"tokens": torch.randint(0, 20, (2, 16))} for _ in range(3)]
    loss = lambda model, b: model(b["tokens"]).logsumexp(-1).mean()  # noqa: E731
    sig = lt.decay_gradient_signal(m, batches, loss)
    assert sig["ratio"].shape == (8,) and np.all(np.abs(sig["ratio"]) <= 1 + 1e-12)
    assert sig["layer"].tolist() == [0] * 4 + [1] * 4 and sig["kind"].tolist()[:4] == ["exist", "exist", "prop", "prop"]
    assert all(p.grad is None for p in m.parameters())
