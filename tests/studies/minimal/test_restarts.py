"""Restarts: a phase that ended without the rule is replaced by a fresh draw from (seed, k); a
model that learned it is kept and its stage stops at once."""
import torch

from tinyscope.runs import registry
from tinyscope.runs.rundir import build, load_run, run_experiment
from tinyscope.studies.minimal.restarts import restart_seed, restart_stages
from tinyscope.train import checkpoint as ckpt

QUICK = ["task.n_sequences=50", "task.n_eval_sequences=10", "eval.n_generated=2", "eval.n_val_windows=32"]


def _setup(restarts=2):
    exp = registry.get("plus-last-even")
    cfg = exp.config("smoke", 5, QUICK + [f"restarts={restarts}"])
    task, model = build(exp, cfg)
    return exp, cfg, task, model


def test_prepare_keeps_a_solved_model_and_redraws_an_unsolved_one():
    exp, cfg, task, model = _setup()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for error, kept in ((0.0, True), (0.5, False)):
        model.load_state_dict(before)
        stage = restart_stages(cfg, lambda m, e=error: {"rule_error": e}, lambda: exp.build_model(cfg, task))[1]
        stage.prepare(model)
        torch.manual_seed(restart_seed(cfg.seed, 2))
        fresh = exp.build_model(cfg, task).state_dict()
        same = all(torch.equal(model.state_dict()[k], before[k]) for k in before)
        drawn = all(torch.equal(model.state_dict()[k], fresh[k]) for k in fresh)
        assert (same, drawn) == (kept, not kept)
    assert stage.name == "restart2" and stage.seed == restart_seed(cfg.seed, 2) != restart_seed(cfg.seed, 1)
    assert stage.train.stop_metric == "rule_error_expected" and stage.train.eval_at_start


def test_a_run_that_misses_the_rule_restarts_and_a_finished_stage_keeps_its_model(tmp_path):
    out = tmp_path / "run"
    res = run_experiment("plus-last-even", "smoke", seed=5, out=out, progress=False, report="none",
                         overrides=QUICK + ["restarts=1", "train.steps=20", "train.eval_every=10",
                                            "train.checkpoint_every=10"])
    main, restart = res["phases"]
    assert main["name"] == "main" and restart["name"] == "restart1"
    first = load_run(out, 0).model.state_dict()
    exp, cfg, task, _ = _setup(1)
    torch.manual_seed(restart_seed(5, 1))
    fresh = exp.build_model(cfg, task).state_dict()
    model = exp.build_model(cfg, task)
    ckpt.load_model(out / "stages" / "restart1" / "checkpoints" / "step_000000.safetensors", model)  # its start
    assert all(torch.equal(model.state_dict()[k], fresh[k]) for k in fresh)
    assert not all(torch.equal(first[k], fresh[k]) for k in fresh)
