"""Synthetic run directories (config.json + results.json written by hand) for report tests."""
import json

import pytest

from tinyscope.config import to_dict
from tinyscope.runs import registry


def write_run(path, seed, metrics, overrides=(), fingerprint="fp-A", experiment="plus-last-even", preset="smoke"):
    exp = registry.get(experiment)
    cfg = exp.config(preset, seed, list(overrides))
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"experiment": exp.name, "preset": preset, "config": to_dict(cfg)}))
    (path / "results.json").write_text(json.dumps({
        "experiment": exp.name, "preset": preset, "seed": seed, "steps": 300, "wall_time": 1.0,
        "stopped": "max_steps", "selected_step": 300, "metrics": metrics, "eval_fingerprint": fingerprint}))
    (path / "metrics.jsonl").write_text(json.dumps({"step": 300, "split": "train", "loss": 1.0, "tokens": 1234}) + "\n")
    return path


@pytest.fixture
def make_run():
    return write_run
