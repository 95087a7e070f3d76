"""runs/restarts.py: a restart keeps a solved model and otherwise draws every weight from its
own seed, which also seeds the stage's batches."""
import torch

from tinyscope.runs.restarts import restart_seed, restart_stages
from tinyscope.train.trainer import TrainConfig


def _fresh():
    return torch.nn.Linear(3, 2)


def test_a_solved_model_is_kept_and_an_unsolved_one_redrawn_from_the_restart_seed():
    stages = restart_stages(11, 2, TrainConfig(steps=5), lambda m: bool(m.bias[0] > 100), _fresh)
    assert [s.name for s in stages] == ["restart1", "restart2"]
    assert [s.seed for s in stages] == [restart_seed(11, 1), restart_seed(11, 2)] and stages[0].seed != stages[1].seed
    model = _fresh()
    with torch.no_grad():
        model.bias.fill_(1000.0)
    kept = {k: v.clone() for k, v in model.state_dict().items()}
    stages[0].prepare(model)
    assert all(torch.equal(kept[k], v) for k, v in model.state_dict().items())
    with torch.no_grad():
        model.bias.fill_(0.0)
    model.train()
    stages[1].prepare(model)
    torch.manual_seed(restart_seed(11, 2))
    expected = _fresh().state_dict()
    assert all(torch.equal(expected[k], v) for k, v in model.state_dict().items()) and model.training


def test_a_salt_separates_streams_and_zero_restarts_is_none():
    assert restart_seed(3, 1, (7,)) != restart_seed(3, 1) and restart_stages(3, 0, TrainConfig(), None, None) == []


def _result(stopped: str):
    from tinyscope.train.trainer import TrainResult

    return TrainResult(steps=5, wall_time=0.0, stopped=stopped, best_step=5, best_metrics={}, last_metrics={})


def test_gated_restarts_keep_a_start_that_passed_the_gate_and_gate_all_but_the_last():
    import pytest

    from tinyscope.errors import ConfigError
    from tinyscope.runs.restarts import KEPT, gated_restart_stages

    train = TrainConfig(steps=5, gate_step=2, gate_metric="score", gate_threshold=0.5)
    evaluate = lambda m: {"score": float(m.bias[0])}  # noqa: E731
    stages = gated_restart_stages(11, 3, train, evaluate, _fresh, salt=(5,))
    assert [s.train.gate_step for s in stages] == [2, 2, 0]
    assert all(s.train.stop_metric == KEPT and s.train.eval_at_start for s in stages)
    model = _fresh()
    with torch.no_grad():  # passed the gate, then ended below its threshold: kept all the same
        model.bias.fill_(0.1)
    stages[0].previous(_result("max_steps"))
    stages[0].prepare(model)
    assert float(model.bias[0].detach()) == pytest.approx(0.1) and stages[0].evaluate(model)[KEPT] == 1.0
    with torch.no_grad():  # stopped by its gate: redrawn, however well it reads now
        model.bias.fill_(0.9)
    stages[1].previous(_result("gate: best score 0.4 by step 2 misses >= 0.5"))
    stages[1].prepare(model)
    torch.manual_seed(restart_seed(11, 2, (5,)))
    assert torch.equal(model.weight, _fresh().weight) and stages[1].evaluate(model)[KEPT] == 0.0
    with pytest.raises(ConfigError, match="gate"):
        gated_restart_stages(11, 1, TrainConfig(steps=5), evaluate, _fresh)


def test_a_gated_run_keeps_the_main_start_that_passed_its_gate_and_redraws_one_the_gate_stopped(tmp_path):
    """End to end through ``run_experiment``: the sih smoke preset with a gate that the main start
    passes (threshold 0) trains no restart; one it cannot pass (threshold 2 on an accuracy)
    is stopped at the gate and replaced."""
    import json

    from tinyscope.runs.rundir import load_run, run_experiment

    def restarts_trained(threshold: float) -> list[int]:
        out = tmp_path / f"t{threshold}"
        run_experiment("sih-eca-dedicated-det", "smoke", seed=0, out=out, progress=False, report="none",
                       overrides=["restarts=2", "train.gate_metric=val_tf_cell_acc", "train.gate_step=10",
                                  f"train.gate_threshold={threshold}", "train.threads=1"])
        steps = []
        for k in (1, 2):
            rows = [json.loads(line) for line in (out / "stages" / f"restart{k}" / "metrics.jsonl").open()]
            steps.append(max(r["step"] for r in rows))
        results = json.loads((out / "results.json").read_text())
        assert results["measured_step"] == load_run(out).step  # the step an analysis of the run records
        return steps

    assert restarts_trained(0.0) == [0, 0]
    assert restarts_trained(2.0) == [10, 20]
