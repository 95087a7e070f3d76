"""The NC-FFN claims: registered with the paper's numbers, their runs build, the computed ones are
right, their measures compute what they say, and ncffn-lm's final evaluation can be redone on fresh
held-out windows (licensing language and text files)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tinyscope.runs import registry
from tinyscope.runs.claims import ClaimError, RunRecord, all_claims, measure_claim
from tinyscope.runs.rundir import build
from tinyscope.studies.ncffn import claims as nc
from tinyscope.studies.ncffn.experiment import FreshTextTask

BY_ID = {c.id: c for c in nc.CLAIMS}


def test_claims_registered_with_the_papers_numbers():
    owned = registry.get("ncffn-lm").claims() + registry.get("ncffn-gpt2").claims()
    assert sorted(c.id for c in owned) == sorted(BY_ID) and set(BY_ID) == {c.id for c in all_claims("ncffn")}
    # the reimplementation's per-layer count (d 768, d_ff 3072), the digest's perplexities, the abstract's half-life
    assert nc.GELU_LAYER_PARAMS == 768 * 3072 * 2 + 3072 + 768 == 4_722_432
    assert BY_ID["ncffn/digest/lm/gelu-perplexity"].paper.value == 18.32
    assert BY_ID["ncffn/digest/lm/nc-perplexity"].paper.value == 18.36
    assert BY_ID["ncffn/abstract/quantifiers/paper/half_life_median"].paper.value == 1.5
    assert BY_ID["ncffn/abstract/quantifiers/cpu/n_latch"].target.value == 0.0
    assert BY_ID["ncffn/abstract/lm/n_parameters"].paper.value == 125e6
    assert BY_ID["ncffn/digest/parity/N=8/depth=1/nc-vs-same-size-gelu"].paper.value == 1.3
    assert BY_ID["ncffn/abstract/lm/nc-ties-gelu"].target.value == pytest.approx(1.00075, abs=1e-5)


@pytest.mark.parametrize("claim", nc.CLAIMS, ids=lambda c: c.id)
def test_runs_build_a_config(claim):
    for rs in claim.runs:
        cfg = registry.get(rs.experiment).config(rs.preset, rs.seeds[0], list(rs.overrides))
        if "model.ffn=nc" in rs.overrides:
            assert cfg.model.ffn == "nc"
        if rs.preset == "paper":
            assert claim.needs_gpu and cfg.model.n_layers == 12 and cfg.model.d_model == 768
    if claim.needs_gpu:
        assert claim.preset == "paper"


def test_two_epoch_runs_evaluate_at_each_epoch():
    e = nc.epoch_steps()
    cfg = registry.get("ncffn-lm").config("cpu")
    assert (e - 1) * cfg.train.batch_size * cfg.model.n_ctx < cfg.task.n_train_tokens <= e * 2048
    run = registry.get("ncffn-lm").config("cpu", 0, list(nc.two_epochs(nc.CPU_QUANT)))
    assert (run.train.steps, run.train.eval_every, run.quant.layers) == (2 * e, e, [0, 1])


@pytest.mark.parametrize("cid", [c.id for c in nc.CLAIMS if c.compute is not None and "parity" not in c.id])
def test_computed_parameter_claims(cid):
    claim = BY_ID[cid]
    m = measure_claim(claim, [])
    assert m.verdict == "met", (cid, m.value)  # the 124M count: ncffn-gpt2's paper preset (BPE, tied)


def _history_rec(seed, history):
    rec = RunRecord(seed, {"metrics": {}})
    rec._history = history
    return rec


def test_history_measures():
    ev = lambda step, acc: {"step": step, "split": "eval", "licensed_acc": acc}  # noqa: E731
    gelu = _history_rec(0, [ev(0, 0.1), ev(10, 0.8), ev(20, 0.9)])
    ncf = _history_rec(0, [ev(0, 0.1), ev(10, 0.6), ev(20, 0.7)])
    ncq = _history_rec(0, [ev(0, 0.1), ev(10, 0.8), ev(20, 0.8)])
    assert nc.eval_at(gelu, "licensed_acc", 5) == 0.8
    with pytest.raises(ClaimError, match="step >= 30"):
        nc.eval_at(gelu, "licensed_acc", 30)
    runs = [{0: gelu}, {0: ncf}, {0: ncq}]
    assert nc.recovery_at("licensed_acc", 10)(runs)[0] == pytest.approx(1.0)
    assert nc.recovery_at("licensed_acc", 20)(runs)[0] == pytest.approx(0.5)
    assert nc.gap_at("licensed_acc", 20)(runs[:2])[0] == pytest.approx(0.2)
    assert nc.recovered_fraction(0.8, 0.8, 0.9) == 0.0  # no deficit: nothing recovered


def test_divergence():
    tr = lambda step, loss: {"step": step, "split": "train", "loss": loss}  # noqa: E731
    calm = [tr(0, 5.0), tr(100, 2.0), tr(200, 1.9), tr(300, 2.1)]
    assert math.isinf(nc.divergence_step(calm))
    assert nc.divergence_step(calm + [tr(400, 3.5)]) == 400
    assert nc.divergence_step(calm[:2] + [tr(150, float("nan"))]) == 150
    runs = [{0: _history_rec(0, calm), 1: _history_rec(1, calm + [tr(400, float("inf"))])}]
    assert nc.diverged()(runs) == {0: 0.0, 1: 1.0}
    assert nc.steps_to_divergence()(runs)[1] == 400


def _shapes(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_fresh_licensing_windows_with_quantifier_metrics():
    exp = registry.get("ncffn-lm")
    cfg = exp.config("smoke", 0, ["model.ffn=nc", "quant.layers=0,1"])
    task, model = build(exp, cfg)
    fresh = exp.fresh_eval_config(cfg, 7, 8)
    fresh_task = exp.build_task(fresh)
    assert _shapes(exp.build_model(fresh, fresh_task)) == _shapes(model) and fresh.model == cfg.model
    assert np.array_equal(fresh_task.train["tokens"], task.train["tokens"])  # training data unchanged
    assert exp.eval_fingerprint(fresh, fresh_task) != exp.eval_fingerprint(cfg, task)
    assert exp.eval_fingerprint(cfg, exp.build_task(cfg)) == exp.eval_fingerprint(cfg, task)
    assert len(fresh_task.eval_set().tokens) >= 8 and fresh.eval.max_windows == 8
    model.eval()
    metrics = exp.final_evaluation(fresh, fresh_task, model)
    assert {"val_loss", "licensed_acc", "half_life_median", "n_latch", "licensor_classes_detected",
            "detector_comparative", "detector_participle", "detector_npi"} <= set(metrics)
    assert metrics["licensor_classes_detected"] == sum(metrics[f"detector_{k}"] for k in ("comparative", "participle", "npi"))


def test_fresh_text_windows_come_from_the_held_out_tail(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_bytes(bytes(np.random.default_rng(0).integers(32, 127, size=6000, dtype=np.uint8)))
    exp = registry.get("ncffn-lm")
    cfg = exp.config("smoke", 0, [f"data.path={text}", "data.val_fraction=0.2", "model.vocab_size=256"])
    task = exp.build_task(cfg)
    fresh = exp.fresh_eval_config(cfg, 3, 5)
    fresh_task = exp.build_task(fresh)
    assert isinstance(fresh_task, FreshTextTask) and not isinstance(task, FreshTextTask)
    assert np.array_equal(fresh_task.train_ids, task.train_ids)
    windows = fresh_task.eval_set().tokens
    val = fresh_task.val_ids.tolist()
    assert len(windows) == 5
    for w in windows.tolist():  # every window is a stretch of the held-out tail
        assert any(val[i:i + len(w)] == w for i in range(len(val) - len(w) + 1))
    assert exp.eval_fingerprint(fresh, fresh_task) != exp.eval_fingerprint(cfg, task)
    torch.manual_seed(0)
    model = exp.build_model(fresh, fresh_task).eval()
    assert "val_loss" in exp.final_evaluation(fresh, fresh_task, model)
