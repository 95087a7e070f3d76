import json
import sys

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


SMOKE = ["train.steps=20", "train.eval_every=10", "train.log_every=5", "train.checkpoint_every=10",
         "eval.n_generated=4", "train.logger=mlflow"]


@pytest.fixture(scope="module")
def mlflow_run(tmp_path_factory):
    """A smoke run logged to its default store, RUN/mlflow.db (a real SQLite MLflow store)."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:  # not a skip: the logger is part of the package's promise
        raise AssertionError("the MLflow test needs mlflow: pip install 'tinyscope[mlflow]'") from exc
    out = tmp_path_factory.mktemp("mlflow") / "run"
    run_experiment("plus-last-even", "smoke", 3, SMOKE, out, progress=False, report="none")
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    return out, client


def test_mlflow_holds_the_config_and_every_record_of_metrics_jsonl(mlflow_run):
    out, client = mlflow_run
    experiment = client.get_experiment_by_name("plus-last-even")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    config = json.loads((out / "config.json").read_text())["config"]
    assert run.data.params["model.d_model"] == str(config["model"]["d_model"])
    assert float(run.data.params["train.lr"]) == config["train"]["lr"]
    assert run.data.params["train.logger"] == "mlflow" and run.data.params["preset"] == "smoke"
    records = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    for split, key in (("eval", "rule_error"), ("train", "loss")):
        got = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, f"{split}/{key}"))
        want = sorted((r["step"], r[key]) for r in records if r["split"] == split)
        assert [(s, round(v, 6)) for s, v in got] == [(s, round(v, 6)) for s, v in want] and len(want) >= 3


def test_a_diverged_run_ends_failed_in_the_store_it_is_given(mlflow_run, tmp_path):
    """train.mlflow_uri names the store (here the first run's); divergence ends the MLflow run
    FAILED, although the failed start's own directory is removed."""
    from tinyscope.train.trainer import DivergedError

    first, client = mlflow_run
    uri = f"sqlite:///{first / 'mlflow.db'}"
    with pytest.raises(DivergedError):
        run_experiment("plus-last-even", "smoke", 3, SMOKE + ["train.lr=1e9", f"train.mlflow_uri={uri}"],
                       tmp_path / "diverged", progress=False, report="none")
    experiment = client.get_experiment_by_name("plus-last-even")
    statuses = {r.info.run_name: r.info.status for r in client.search_runs([experiment.experiment_id])}
    assert statuses == {"run": "FINISHED", "diverged": "FAILED"}


def test_mlflow_missing_is_one_line(tmp_path, monkeypatch):
    from tinyscope.train.loggers import curve_logger

    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    monkeypatch.setitem(sys.modules, "mlflow.entities", None)
    with pytest.raises(ConfigError, match=r"train.logger=mlflow needs the mlflow package: pip install"):
        curve_logger("mlflow", tmp_path)
