"""Checkpoint selection of plus-last-even: the expected generation error beside the argmax rule
error, the criterion named in results.json, and both shown in the report's selection section."""
import pytest
import torch

from tinyscope.runs import registry
from tinyscope.runs.rundir import build, load_run, run_experiment

QUICK = ["train.steps=200", "train.eval_every=50", "task.n_sequences=100", "task.n_eval_sequences=20",
         "eval.n_generated=4", "eval.n_val_windows=64"]


def test_a_uniform_model_breaks_the_rule_in_11_of_12_samples():
    exp = registry.get("plus-last-even")
    cfg = exp.config("smoke", 0, QUICK)
    task, model = build(exp, cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    m = exp.evaluator(cfg, task)(model.eval())
    assert m["rule_error_expected"] == pytest.approx(11 / 12, abs=1e-6)
    ev = task.eval_set()  # the argmax of uniform logits is token 0: right exactly where the target is 0
    assert m["rule_error"] == pytest.approx((ev.meta["target"] != 0).mean(), abs=1e-6)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sel") / "run"
    run_experiment("plus-last-even", "smoke", overrides=QUICK, out=out, progress=False, report="none")
    return out


def test_the_selected_step_minimises_the_named_criterion(run_dir):
    run = load_run(run_dir)
    res = run.results
    assert res["selection"] == {"metric": "rule_error_expected", "mode": "min", "tie_break": "rule_error"}
    evals = [r for r in run.metrics() if r.get("split") == "eval"]
    best = min(evals, key=lambda r: (r["rule_error_expected"], r["rule_error"]))
    assert res["selected_step"] == best["step"]
    assert {"rule_error", "rule_error_expected", "rule_error_sampled"} <= set(res["metrics"])


def test_the_report_shows_both_errors(run_dir):
    run = load_run(run_dir)
    section = run.experiment.report_sections(run)[0]
    (view,) = section.views
    assert "rule error (argmax)" in view.caption and "expected generation error" in view.caption
    fig = view.draw()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("argmax" in t for t in labels) and any("generation error" in t for t in labels)
    assert any(f"selected step {run.results['selected_step']}" in t for t in labels)
