"""`train.init_from`: a run that starts from the weights of another run, a zoo entry or a checkpoint."""
import json

import pytest
import torch

from tinyscope.errors import CheckpointError, ConfigError
from tinyscope.runs import registry
from tinyscope.runs.rundir import build, load_initial_weights, load_run, run_experiment
from tinyscope.train.checkpoint import tensor_checksum

QUICK = ["train.steps=20", "train.eval_every=10", "train.checkpoint_every=10", "task.n_sequences=100",
         "task.n_eval_sequences=20", "eval.n_generated=4", "eval.n_val_windows=64"]


def _eval_records(path):
    return [r for r in map(json.loads, (path / "metrics.jsonl").read_text().splitlines()) if r["split"] == "eval"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    out = tmp_path_factory.mktemp("init") / "source"
    run_experiment("plus-last-even", "smoke", seed=3, out=out, progress=False, report="none", overrides=QUICK)
    return out


def test_the_run_starts_from_the_source_runs_selected_model(source, tmp_path):
    """The new run's step-0 evaluation is the source's evaluation at the step it selected, and its
    step-0 checkpoint holds the source's selected weights, not a fresh draw of its own seed."""
    out = tmp_path / "continued"
    run_experiment("plus-last-even", "smoke", seed=4, out=out, progress=False, report="none", resume=True,
                   overrides=QUICK + [f"train.init_from={source}", "train.eval_at_start=true"])
    selected = load_run(source).model.state_dict()
    start = load_run(out, 0).model.state_dict()
    assert all(torch.equal(start[k], selected[k]) for k in selected)
    provenance = json.loads((out / "init_from.json").read_text())
    assert provenance == {"init_from": str(source), "fresh": [], "loaded_checksum": tensor_checksum(selected)}
    source_results = json.loads((source / "results.json").read_text())
    at_selection = [r for r in _eval_records(source) if r["step"] == source_results["selected_step"]][0]
    at_start = _eval_records(out)[0]
    assert at_start["step"] == 0
    assert {k: at_start[k] for k in at_selection if k not in ("time", "step")} == \
        {k: at_selection[k] for k in at_selection if k not in ("time", "step")}


def test_a_checkpoint_file_is_a_source_too(source):
    exp = registry.get("plus-last-even")
    cfg = exp.config("smoke", 9, QUICK)
    _, model = build(exp, cfg)
    load_initial_weights(str(source / "checkpoints" / "best.safetensors"), model)
    selected = load_run(source).model.state_dict()
    assert all(torch.equal(model.state_dict()[k], selected[k]) for k in selected)


def test_bad_sources_are_one_line_errors_and_leave_no_run_behind(source, tmp_path):
    exp = registry.get("plus-last-even")
    cfg = exp.config("smoke", 9, QUICK + ["model.d_model=4"])
    _, wider = build(exp, cfg)
    with pytest.raises(CheckpointError, match="does not fit this model"):
        load_initial_weights(str(source), wider)
    with pytest.raises(ConfigError, match="no such checkpoint file"):
        load_initial_weights(str(tmp_path / "missing.safetensors"), wider)
    out = tmp_path / "refused"
    with pytest.raises(CheckpointError, match="does not fit this model"):
        run_experiment("plus-last-even", "smoke", seed=4, out=out, progress=False, report="none",
                       overrides=QUICK + [f"train.init_from={source}", "model.d_mlp=16"])
    assert not out.exists()


def test_a_restart_starts_from_the_source_again_with_its_own_draw_of_the_excluded_tensors(source, tmp_path):
    """The restart stage of a run with train.init_from begins from the source's weights, except
    the excluded tensors, which are drawn from the restart's own seed (not the main start's)."""
    from tinyscope.runs.restarts import restart_seed

    out = tmp_path / "restarted"
    sets = [f"train.init_from={source}", 'train.init_exclude=["W_U.weight"]', "restarts=1"]
    res = run_experiment("plus-last-even", "smoke", seed=5, out=out, progress=False, report="none",
                         overrides=QUICK + sets)
    assert [p["name"] for p in res["phases"]] == ["main", "restart1"]
    exp = registry.get("plus-last-even")
    cfg = exp.config("smoke", 5, QUICK + sets)
    task, _ = build(exp, cfg)
    model = exp.build_model(cfg, task)
    ckpt_path = out / "stages" / "restart1" / "checkpoints" / "step_000000.safetensors"
    from tinyscope.train.checkpoint import load_model

    load_model(ckpt_path, model)
    start = model.state_dict()
    selected = load_run(source).model.state_dict()
    assert all(torch.equal(start[k], selected[k]) for k in selected if k != "W_U.weight")
    torch.manual_seed(restart_seed(5, 1))
    drawn = exp.build_model(cfg, task).state_dict()
    main_start = load_run(out, 0).model.state_dict()
    assert torch.equal(start["W_U.weight"], drawn["W_U.weight"])
    assert not torch.equal(start["W_U.weight"], main_start["W_U.weight"])
    assert not torch.equal(start["W_U.weight"], selected["W_U.weight"])


def test_excluded_tensors_keep_the_fresh_draw(source):
    """`train.init_exclude` patterns leave their tensors as the seed drew them (here the MLP,
    whose width differs from the source's) and load the rest; a pattern that names nothing is an
    error, not a silent no-op."""
    exp = registry.get("plus-last-even")
    cfg = exp.config("smoke", 9, QUICK + ["model.d_mlp=16"])
    torch.manual_seed(0)
    _, model = build(exp, cfg)
    drawn = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match="W_in.bias has shape"):
        load_initial_weights(str(source), model)
    fresh = load_initial_weights(str(source), model, exclude=["blocks.0.mlp.*"])
    assert fresh == ["blocks.0.mlp.W_in.bias", "blocks.0.mlp.W_in.weight", "blocks.0.mlp.W_out.bias",
                     "blocks.0.mlp.W_out.weight"]
    selected = load_run(source).model.state_dict()
    after = model.state_dict()
    assert all(torch.equal(after[k], drawn[k]) for k in fresh)
    assert all(torch.equal(after[k], selected[k]) for k in after if k not in fresh)
    with pytest.raises(ConfigError, match="'W_nothing' names no tensor"):
        load_initial_weights(str(source), model, exclude=["W_nothing"])
