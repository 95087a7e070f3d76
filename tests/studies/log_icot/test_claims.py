"""The Log-ICoT claims: registered with the paper's numbers, their runs build, their measures compute
what they say, and a run's final evaluation can be redone on a fresh test set."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tinyscope.runs import registry
from tinyscope.runs.claims import RunRecord, all_claims, measure_claim
from tinyscope.runs.rundir import build
from tinyscope.studies.log_icot import claims as li
from tinyscope.studies.log_icot.experiment import own_level_attention
from tinyscope.studies.log_icot.model import ConstrainedParityConfig, ConstrainedParityTransformer, set_tree_attention
from tinyscope.studies.log_icot.task import Parity, ParityConfig

BY_ID = {c.id: c for c in li.CLAIMS}
EXPERIMENTS = [f"parity-{k}" for k in ("direct", "cot", "icot", "logicot")]


def test_every_claim_is_owned_by_exactly_one_experiment():
    owned = [c for name in EXPERIMENTS for c in registry.get(name).claims()]
    assert sorted(c.id for c in owned) == sorted(BY_ID) and len(owned) == len(set(BY_ID))
    assert {c.id for c in all_claims("log_icot")} == set(BY_ID)
    assert all(c.id.startswith("log_icot/") for c in li.CLAIMS)


def test_paper_values_typed_in():
    # the digest: n = 30, k = 16, a 4-layer transformer through 4 stages, validation accuracy 100%
    head = BY_ID["log_icot/experiments/n30-k16/logicot/single_pass_acc"]
    assert head.paper.value == 1.0 and head.target.op == ">=" and head.target.value == 0.999
    assert head.needs_gpu and head.preset == "paper" and head.unit == "%"
    assert BY_ID["log_icot/experiments/n30-k16/logicot/stages_reached"].paper.value == 4.0
    assert BY_ID["log_icot/experiments/n30-k16/logicot/n_layers"].paper.value == 4.0
    # the abstract: L = log2 k stages; ICoT's k - 1 (digest)
    assert BY_ID["log_icot/abstract/stages/logicot-k16"].paper.value == 4.0
    assert BY_ID["log_icot/abstract/stages/icot-k16"].paper.value == 15.0
    assert BY_ID["log_icot/experiments/n30-k16/icot/stages_reached"].target.value == 15.0
    assert BY_ID["log_icot/experiments/n20-k8/icot/stages_reached"].target.value == 7.0
    # the digest's n^(2+eps)
    assert BY_ID["log_icot/abstract/poly-n/logicot_exponent"].paper.value == 2.0


def test_computed_claims_are_met():
    for cid in ("log_icot/abstract/stages/logicot-k16", "log_icot/abstract/stages/icot-k16",
                "log_icot/abstract/stages/icot-over-logicot-k16", "log_icot/experiments/n30-k16/logicot/n_layers"):
        assert measure_claim(BY_ID[cid], []).verdict == "met", cid


@pytest.mark.parametrize("claim", li.CLAIMS, ids=lambda c: c.id)
def test_runs_build_a_config(claim):
    for rs in claim.runs:
        cfg = registry.get(rs.experiment).config(rs.preset, rs.seeds[0], list(rs.overrides))
        assert cfg.kind == rs.experiment.removeprefix("parity-")
        if claim.where == li.HEADLINE:
            assert (cfg.task.n, cfg.task.k) == (30, 16)
        if claim.needs_gpu:
            assert rs.preset == "paper"


def test_scaling_runs_span_the_input_lengths():
    claim = BY_ID["log_icot/abstract/poly-n/exponent_gap"]
    ns = [registry.get(rs.experiment).config(rs.preset, 0, list(rs.overrides)).task.n for rs in claim.runs]
    assert ns == list(li.N_SCALING) * 2
    assert [rs.experiment for rs in claim.runs] == ["parity-logicot"] * 5 + ["parity-cot"] * 5
    # n = 20 is the cpu-scale setting itself, so those runs are shared with the cpu-scale claims
    assert claim.runs[1].key == BY_ID["log_icot/experiments/n20-k8/logicot/single_pass_acc"].runs[0].key


def test_constrained_scaling_runs_train_the_theorys_model_at_every_n():
    claim = BY_ID["log_icot/abstract/poly-n/constrained/exponent_gap"]
    cfgs = [registry.get(rs.experiment).config(rs.preset, 0, list(rs.overrides)) for rs in claim.runs]
    assert [c.task.n for c in cfgs] == list(li.N_SCALING) * 2
    assert {(c.arch, c.task.k, c.train.lr, c.model.n_ctx - c.task.n) for c in cfgs} == {("constrained", 8, 0.03, 7)}
    assert BY_ID["log_icot/abstract/poly-n/constrained/cot_exponent"].row == "CoT, constrained model"


def test_bilinear_scaling_registers_cot_alone_on_the_wide_bilinear_model():
    ids = [c.id for c in li.CLAIMS if c.id.startswith("log_icot/abstract/poly-n/bilinear/")]
    assert ids == ["log_icot/abstract/poly-n/bilinear/cot_exponent"]
    claim = BY_ID[ids[0]]
    cfgs = [registry.get(rs.experiment).config(rs.preset, 0, list(rs.overrides)) for rs in claim.runs]
    assert [c.task.n for c in cfgs] == list(li.N_SCALING)
    assert {(c.kind, c.model.ffn, c.model.d_model, tuple(c.model.n_heads)) for c in cfgs} == {("cot", "bilinear", 64,
                                                                                                (4, 4, 4))}


def _rec(seed, samples, done=1.0):
    return RunRecord(seed, {"metrics": {"samples": samples, "curriculum_done": done}})


def test_samples_measures():
    assert li.samples_to_target(_rec(0, 1000.0)) == 1000.0
    assert math.isinf(li.samples_to_target(_rec(0, 1000.0, done=0.0)))
    runs = [{0: _rec(0, 900.0), 1: _rec(1, 900.0, 0.0)}, {0: _rec(0, 300.0), 1: _rec(1, 300.0)}]
    ratios = li.samples_ratio()(runs)
    assert ratios[0] == pytest.approx(3.0) and math.isinf(ratios[1])


def test_fitted_exponent_recovers_a_power_law():
    ns = li.N_SCALING
    assert li.fitted_exponent(ns, [7.0 * n ** 2.2 for n in ns]) == pytest.approx(2.2)
    assert math.isinf(li.fitted_exponent(ns, [1.0, 2.0, math.inf, 4.0, 5.0]))
    runs = [{0: _rec(0, 3.0 * n ** 2)} for n in ns] + [{0: _rec(0, 5.0 * n ** 1.5)} for n in ns]
    assert li.sample_exponent()(runs)[0] == pytest.approx(2.0)
    assert li.sample_exponent(first=5)(runs)[0] == pytest.approx(1.5)
    assert li.exponent_gap()(runs)[0] == pytest.approx(0.5)


def test_own_level_attention_of_the_exact_tree_is_one_and_of_uniform_attention_is_not():
    task = Parity(ParityConfig(n=12, k=8, subset_seed=3))
    model = ConstrainedParityTransformer(ConstrainedParityConfig(), 12, 8)
    uniform = own_level_attention(model, task, n_examples=64)
    assert uniform["attn_own_level_mass_layer1"] == pytest.approx(8 / 12, abs=1e-5)  # all bits alike
    set_tree_attention(model, task.subset)
    exact = own_level_attention(model, task, n_examples=64)
    assert set(exact) == {"attn_own_level_mass_layer1", "attn_own_level_mass_layer2", "attn_own_level_mass_layer3",
                          "attn_own_level_mass_min"}
    assert exact["attn_own_level_mass_min"] > 0.999


def _weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", ["parity-logicot", "parity-cot"])
def test_fresh_evaluation_set(name):
    exp = registry.get(name)
    cfg = exp.config("smoke")
    task, model = build(exp, cfg)
    fresh = exp.fresh_eval_config(cfg, cfg.task.data_seed, 16)  # the run's own data seed: still a new set
    fresh_task = exp.build_task(fresh)
    assert fresh.model == cfg.model and fresh.train == cfg.train and fresh.arch == cfg.arch
    assert np.array_equal(fresh_task.task.subset, task.task.subset)  # the same secret subset
    assert np.array_equal(fresh_task.task.fixed("val")[0], task.task.fixed("val")[0])
    assert exp.eval_fingerprint(fresh, fresh_task) != exp.eval_fingerprint(cfg, task)
    assert exp.eval_fingerprint(cfg, exp.build_task(exp.config("smoke"))) == exp.eval_fingerprint(cfg, task)
    bits, _ = fresh_task.task.fixed("test")
    assert bits.shape == (16, cfg.task.n) and not np.array_equal(bits, task.task.fixed("test")[0][:16])
    model.eval()
    before = _weights(model)
    metrics = exp.final_evaluation(fresh, fresh_task, model)
    assert 0.0 <= metrics["test_acc"] <= 1.0 and metrics["n_stages"] == len(fresh_task.curriculum.stages)
    assert all(np.array_equal(v, before[k]) for k, v in model.state_dict().items())
    assert ("attn_own_level_mass_min" in metrics) == (name == "parity-logicot")


def test_cpu_scale_headline_claims_run_n30_k16_on_a_cpu():
    cpu16 = [c for c in li.CLAIMS if c.where == li.CPU_HEADLINE]
    assert {c.id.removeprefix("log_icot/experiments/n30-k16-cpu/") for c in cpu16} == {
        "logicot/single_pass_acc", "logicot/stages_reached", "logicot/own_level_attention", "cot/acc",
        "icot/single_pass_acc", "icot/stages_reached", "direct/single_pass_acc", "logicot-over-cot/samples_ratio"}
    for claim in cpu16:
        assert not claim.needs_gpu
        for rs in claim.runs:
            cfg = registry.get(rs.experiment).config(rs.preset, 0, list(rs.overrides))
            assert rs.preset == "cpu" and (cfg.task.n, cfg.task.k, cfg.model.n_layers) == (30, 16, 4)
            assert cfg.model.d_model == 64 and cfg.train.optimizer == "muon" and cfg.train.steps == 12000


def test_samples_to_target_counts_the_fine_tune_when_the_curriculum_fell_short(tmp_path):
    """A last stage below the threshold that the fine-tune lifts: the curriculum's samples plus
    the fine-tune's up to its first evaluation at the threshold; a curriculum that stopped before
    its last stage counts as never."""
    import json

    from tinyscope.runs.rundir import _config_record

    exp = registry.get("parity-logicot")
    cfg = exp.config("smoke", overrides=["train.batch_size=64"])
    (tmp_path / "config.json").write_text(json.dumps(_config_record(exp, "smoke", cfg)))
    ft = tmp_path / "stages" / "finetune"
    ft.mkdir(parents=True)
    (ft / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"step": 0, "split": "eval", "acc": 0.98}, {"step": 50, "split": "train", "loss": 0.1},
        {"step": 200, "split": "eval", "acc": 0.992}, {"step": 250, "split": "eval", "acc": 1.0}]) + "\n")
    metrics = {"samples": 1000.0, "curriculum_done": 0.0, "stages_reached": 4.0, "n_stages": 4.0}
    assert li.samples_to_target(RunRecord(0, {"metrics": metrics}, tmp_path)) == 1000.0 + 200 * 64
    short = dict(metrics, stages_reached=3.0)
    assert math.isinf(li.samples_to_target(RunRecord(0, {"metrics": short}, tmp_path)))
    (ft / "metrics.jsonl").write_text(json.dumps({"step": 0, "split": "eval", "acc": 0.9}) + "\n")
    assert math.isinf(li.samples_to_target(RunRecord(0, {"metrics": metrics}, tmp_path)))
