"""Run directories written before the code was laid out as one package per study still load,
evaluate to the numbers they recorded, and the old import path keeps working (with a warning).

The fixtures under tests/fixtures/premove-* are smoke runs written by the pre-move code (commit
f7a00d8): config.json, metrics.jsonl, results.json and safetensors checkpoints, as they were."""
import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from tinyscope.runs.rundir import evaluate_run, load_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize("name", ["premove-plus-last-even", "premove-circuit-boolean"])
def test_a_run_directory_written_before_the_move_loads_and_evaluates_to_its_results(name, tmp_path):
    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / name, run_dir)  # a copy: evaluation must not write into the fixture
    recorded = json.loads((run_dir / "results.json").read_text())
    run = load_run(run_dir)
    assert run.experiment.name == recorded["experiment"] and run.step == recorded["selected_step"]
    assert sum(p.numel() for p in run.model.parameters()) == recorded["n_parameters"]
    fresh = evaluate_run(run_dir)
    assert fresh["eval_fingerprint"] == recorded["eval_fingerprint"]
    for key, value in recorded["metrics"].items():
        assert fresh["metrics"][key] == pytest.approx(value, rel=1e-6, abs=1e-7), key


def test_the_old_import_path_of_load_run_works_and_warns():
    sys.modules.pop("tinyscope.experiments.runner", None)
    with pytest.warns(DeprecationWarning, match="tinyscope.runs"):
        runner = importlib.import_module("tinyscope.experiments.runner")
    assert runner.load_run is load_run
    run = runner.load_run(FIXTURES / "premove-plus-last-even")
    assert isinstance(run.model, torch.nn.Module)


def test_a_run_saved_before_train_precision_resumes_with_auto_precision_and_threads():
    """An old config.json (``amp`` and an integer ``threads``, no ``precision``) is the same training
    as today's config with ``precision=auto`` and ``threads=auto``; a real change is still refused."""
    from tinyscope.config import to_dict
    from tinyscope.runs.rundir import read_config, same_training

    _, _, saved = read_config(FIXTURES / "premove-plus-last-even")
    assert saved.train.precision == "fp32"  # amp meant bf16 on CUDA only
    today = to_dict(saved)
    today["train"].update(precision="auto", threads="auto", compile=False, prefetch=True)
    assert same_training(to_dict(saved), today) and same_training(today, to_dict(saved))
    changed = json.loads(json.dumps(today))
    changed["train"]["lr"] *= 2
    assert not same_training(to_dict(saved), changed)
    bf16 = json.loads(json.dumps(today))
    bf16["train"]["precision"] = "bf16"
    assert not same_training(to_dict(saved), bf16)  # fp32 saved, bf16 asked: another training
