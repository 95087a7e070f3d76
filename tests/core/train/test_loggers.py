import json

import pytest

from tinyscope.errors import ConfigError
from tinyscope.runs.registry import get
from tinyscope.runs.rundir import run_experiment


def test_tensorboard_scalars_mirror_metrics_jsonl(tmp_path):
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as exc:  # not a skip: the logger is part of the package's promise
        raise AssertionError("the TensorBoard test needs tensorboard: pip install 'tinyscope[tensorboard]'") from exc

    run_experiment("plus-last-even", "smoke", 3, ["train.steps=20", "train.eval_every=10", "train.log_every=5",
                                                 "train.checkpoint_every=10", "eval.n_generated=4",
                                                 "train.logger=tensorboard"], tmp_path, progress=False)
    records = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    ea = EventAccumulator(str(tmp_path / "tensorboard"))
    ea.Reload()
    got = {(e.step, round(e.value, 5)) for e in ea.Scalars("eval/rule_error")}
    want = {(r["step"], round(r["rule_error"], 5)) for r in records if r["split"] == "eval"}
    assert got == want and len(want) == 3
    assert [e.step for e in ea.Scalars("train/loss")] == [5, 10, 15, 20]


def test_logger_is_off_by_default_and_validated(tmp_path):
    assert get("plus-last-even").config("smoke").train.logger == "none"
    with pytest.raises(ConfigError, match="train.logger"):
        get("plus-last-even").config("smoke", overrides=["train.logger=wandb"])
