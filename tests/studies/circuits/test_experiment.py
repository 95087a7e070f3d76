"""Circuit experiments: curriculum, objective, smoke runs of the model and the looped baseline."""
import json

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from tinyscope.report.records import load_records
from tinyscope.report.tables import get_table
from tinyscope.runs.registry import get
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.circuits.experiment import circuit_bce, depth_table
from tinyscope.studies.circuits.model import CircuitConfig, CircuitTransformer
from tinyscope.studies.circuits.reduction import reduce_once
from tinyscope.studies.circuits.task import LogicTask, LogicTaskConfig
from tinyscope.tasks.base import step_rng


def test_curriculum_is_depth1_then_mixed_and_a_pure_function_of_the_step():
    task = LogicTask(LogicTaskConfig(grammar="boolean"))
    n1, n12 = task.phase_sizes()
    assert (n1, n12) == (10, 10 + 2 * 145)  # 290 depth-2 expressions upsampled to 145 per class
    bs = 100
    spe = task.steps_per_epoch(bs)
    assert spe == 1 + 3
    first = task.sample(step_rng(5, 0), bs)
    assert set(first.meta["depth"].tolist()) == {1} and len(first) == 10
    mixed = np.concatenate([task.sample(step_rng(5, s), bs).meta["depth"] for s in range(1, spe)])
    assert set(mixed.tolist()) == {1, 2} and len(mixed) == n12
    again = task.sample(step_rng(5, 2), bs)
    assert np.array_equal(again.tokens, task.sample(step_rng(5, 2), bs).tokens)
    b = task.sample(step_rng(5, spe + 1), bs)  # next epoch, another order
    assert not np.array_equal(b.tokens, task.sample(step_rng(5, 1), bs).tokens)
    for row, target, L in zip(b.tokens, b.targets, b.loss_mask.sum(1)):
        assert np.array_equal(reduce_once(task.grammar, row[:L]), target[:L])


def test_listops_draws_fresh_depth2_samples_each_epoch():
    task = LogicTask(LogicTaskConfig(grammar="listops", balance="none", depth2_samples=50))
    assert task.phase_sizes() == (4400, 4450)
    assert task.depth2(0, 0) != task.depth2(0, 1) and task.depth2(0, 3) == task.depth2(0, 3)


def test_listops_lra_samples_its_depth1_set_each_epoch_and_trains_on_it():
    """listops-lra's depth-1 set (4.4e10) is drawn per epoch; its step check uses a fixed draw."""
    task = LogicTask(LogicTaskConfig(grammar="listops-lra", balance="none", depth1_samples=40, depth2_samples=60))
    assert task.phase_sizes() == (40, 100)
    one, other = task.depth1_of(0, 0), task.depth1_of(0, 1)
    assert one != other and one == task.depth1_of(0, 0)
    assert {len(e[1]) for e in one + other} <= set(range(2, 11)) and max(len(e[1]) for e in one + other) > 3
    with pytest.raises(ValueError, match="depth1_samples"):
        _ = task.depth1
    b = task.sample(step_rng(3, 0), 16)
    for row, target, L in zip(b.tokens, b.targets, b.loss_mask.sum(1)):
        assert np.array_equal(reduce_once(task.grammar, row[:L]), target[:L])
    exp = get("circuit-listops-lra")
    cfg = exp.config("smoke")
    assert exp._depth1_batch(LogicTask(cfg.task))["tokens"].shape[0] == cfg.task.depth1_samples


def test_bce_is_near_zero_for_the_construction_and_large_for_a_fresh_model():
    from tinyscope.studies.circuits.construction import construct

    task = LogicTask(LogicTaskConfig(grammar="boolean"))
    batch = task.sample(step_rng(0, 1), 64).to_torch()
    built = construct("boolean")
    fresh = CircuitTransformer(CircuitConfig(grammar="boolean"))
    assert circuit_bce(built, batch).item() < 0.05 < circuit_bce(fresh, batch).item()


def test_step_exact_checks_every_depth1_expression_besides_the_sampled_training_ones():
    from tinyscope.studies.circuits.construction import construct

    exp = get("circuit-arithmetic")
    cfg = exp.config("smoke")
    task = LogicTask(cfg.task)
    assert exp._depth1_batch(task)["tokens"].shape[0] == 200  # distinct depth-1 expressions, not the balanced set
    assert exp.config("cpu").train.stop_metric == "step_exact" == exp.config("cpu").train.select_metric
    built = exp.evaluator(cfg, task)(construct("arithmetic"))
    assert built["step_exact"] == built["depth1_step_exact"] == built["train_step_exact"] == 1.0
    torch.manual_seed(0)
    fresh = exp.evaluator(cfg, task)(CircuitTransformer(CircuitConfig(grammar="arithmetic")))
    assert fresh["step_exact"] == min(fresh["depth1_step_exact"], fresh["train_step_exact"]) < 1.0


def test_smoke_runs_write_results(tmp_path):
    torch.set_num_threads(1)
    res = run_experiment("circuit-boolean", "smoke", out=tmp_path / "c", progress=False)
    m = res["metrics"]
    assert res["n_parameters"] == 280 and {"depth3_acc", "depth4_tokens_mean", "pe_equal"} <= set(m)
    assert "depth" in depth_table(m) and len(depth_table(m).splitlines()) == 3
    res = run_experiment("circuit-boolean-baseline", "smoke", out=tmp_path / "b", progress=False)
    assert "depth3_fits_context" in res["metrics"]
    saved = json.loads((tmp_path / "b" / "results.json").read_text())
    assert saved["metrics"]["depth3_acc"] == res["metrics"]["depth3_acc"]
    # what the runs offer: the accuracy-by-depth view and the circuit-depth table (one row per run and depth)
    run = load_run(tmp_path / "c")
    assert [v.name for v in run.experiment.views(run)] == ["accuracy_by_depth"]
    assert isinstance(run.experiment.views(run)[0].draw(), Figure)
    table = get_table("circuit-depth")
    assert run.experiment.tables() == [table]
    rows = table.build(load_records(tmp_path)).rows
    assert [(r[0], r[3]) for r in rows] == [("c", 3), ("c", 4), ("b", 3), ("b", 4)]  # by experiment, then seed
    assert rows[0][4] == f"{m['depth3_acc']:.2f}" and rows[2][5] == "–"  # the baseline does not halt by itself


def test_epochs_set_the_step_count():
    exp = get("circuit-boolean")
    cfg = exp.config("cpu", overrides=["epochs=7"])
    assert cfg.train.steps == 7 * 2 and cfg.train.warmup_steps == round(0.1 * 14)
