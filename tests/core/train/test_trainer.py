import json

import pytest
import torch

from tinyscope.errors import CheckpointError
from tinyscope.runs.rundir import evaluate_run, load_run, run_experiment
from tinyscope.train import checkpoint as ckpt
from tinyscope.train.stopping import Selection, StopRules


def evals(run_dir, clock: bool = False):
    """The evaluation records, without the trainer's clock (``time``) unless ``clock``."""
    recs = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r if clock else {k: v for k, v in r.items() if k != "time"} for r in recs if r["split"] == "eval"]


def train_losses(run_dir):
    return [json.loads(ln)["loss"] for ln in (run_dir / "metrics.jsonl").read_text().splitlines()
            if json.loads(ln)["split"] == "train"]


def test_smoke_preset_trains_and_its_loss_falls(tmp_path):
    res = run_experiment("plus-last-even", "smoke", seed=3, out=tmp_path / "r", progress=False)
    losses = train_losses(tmp_path / "r")
    assert losses[-1] < losses[0] - 0.2
    assert res["steps"] == 300
    steps = sorted(int(p.stem.split("_")[1]) for p in (tmp_path / "r" / "checkpoints").glob("step_*.safetensors"))
    assert steps == [0, 100, 200, 300]
    assert (tmp_path / "r" / "results.json").exists()


def test_same_seed_gives_bit_identical_metrics(tmp_path):
    a = run_experiment("plus-last-even", "smoke", seed=7, out=tmp_path / "a", progress=False)
    b = run_experiment("plus-last-even", "smoke", seed=7, out=tmp_path / "b", progress=False)
    assert a["metrics"] == b["metrics"]
    assert train_losses(tmp_path / "a") == train_losses(tmp_path / "b")


def test_a_killed_and_resumed_run_ends_exactly_like_an_uninterrupted_one(tmp_path, kill_run_at):
    full = run_experiment("plus-last-even", "smoke", seed=5, out=tmp_path / "full", progress=False)
    out = tmp_path / "killed"  # started afresh and killed after the step-200 checkpoint
    kill_run_at("plus-last-even", "smoke", 5, [], out, tmp_path / "full", step=300)
    assert ckpt.load_tensors(out / "checkpoints" / "resume.safetensors")[1]["trainer"]["step"] == 200
    resumed = run_experiment("plus-last-even", "smoke", seed=5, out=out, resume=True, progress=False)
    assert resumed["metrics"] == full["metrics"]
    assert resumed["selected_step"] == full["selected_step"]
    assert train_losses(out) == train_losses(tmp_path / "full")
    assert evals(out) == evals(tmp_path / "full")
    # every check carries the training time so far; the resumed process goes on from the restored
    # clock (a clock restarted at the resume would make the checks after step 200 read less)
    times = [r["time"] for r in evals(out, clock=True)]
    assert len(times) == len(evals(out)) and times[0] >= 0 and all(b >= a for a, b in zip(times, times[1:]))


def test_loading_and_reevaluating_a_run(tmp_path):
    res = run_experiment("plus-last-even", "smoke", seed=1, out=tmp_path / "r", progress=False)
    again = evaluate_run(tmp_path / "r")
    assert again["metrics"]["rule_error"] == res["metrics"]["rule_error"]
    run = load_run(tmp_path / "r", which=100)
    assert run.step == 100 and run.checkpoint_steps() == [0, 100, 200, 300]


def test_corrupt_checkpoint_is_a_clear_error_and_writes_are_atomic(tmp_path, monkeypatch):
    model = torch.nn.Linear(2, 2)
    path = tmp_path / "m.safetensors"
    ckpt.save_model(path, model, step=3)
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temp file left behind
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.os, "fsync", disk_full)
    with torch.no_grad():
        model.weight.add_(1.0)
    with pytest.raises(OSError, match="disk full"):  # a failed write leaves the old file intact
        ckpt.save_model(path, model, step=4)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]
    path.write_bytes(b"garbage" * 10)
    with pytest.raises(CheckpointError, match="not a readable safetensors"):
        ckpt.load_model(path, model)


def test_selection_prefers_the_tie_break_on_equal_metric():
    sel = Selection("acc", "max", tie_break="loss", tie_mode="min")
    assert sel.update(100, {"acc": 0.9, "loss": 0.5})
    assert not sel.update(200, {"acc": 0.8, "loss": 0.1})
    assert sel.update(300, {"acc": 0.9, "loss": 0.4})
    assert not sel.update(400, {"acc": 0.9, "loss": 0.4})  # a complete tie keeps the earlier step
    assert sel.best_step == 300


def test_threshold_needs_consecutive_hits_and_patience_counts_evaluations():
    stop = StopRules("acc", 0.99, "max", 2, None, "min", 0, 0.0)
    assert stop.update({"acc": 0.995}) is None
    assert stop.update({"acc": 0.98}) is None
    assert stop.update({"acc": 0.99}) is None
    assert stop.update({"acc": 1.0}) is not None
    pat = StopRules(None, 0, "min", 1, "loss", "min", 2, 0.01)
    assert pat.update({"loss": 1.0}) is None
    assert pat.update({"loss": 0.995}) is None  # improvement smaller than min_delta
    assert pat.update({"loss": 0.992}) is not None


def test_the_gate_judges_the_best_value_so_far_once_its_step_is_reached():
    def rules(threshold):
        return StopRules(None, 0, "min", 1, None, "min", 0, 0.0, gate_metric="acc", gate_mode="max",
                         gate_step=200, gate_threshold=threshold)

    gate = rules(0.9)
    gate.update({"acc": 0.5})
    assert gate.gate(100) is None  # before the gate step nothing is judged
    gate.update({"acc": 0.95})
    assert gate.gate(200) is None  # met: the run goes on, and a later dip does not stop it
    gate.update({"acc": 0.2})
    assert gate.gate(300) is None
    late = rules(0.99)
    for acc in (0.5, 0.95, 0.2):
        late.update({"acc": acc})
    assert late.gate(300).startswith("gate: best acc 0.95 by step 300 misses >= 0.99")
    resumed = rules(0.99)
    resumed.load(late.state())
    assert resumed.gate_best == 0.95 and resumed.stopped
    off = StopRules(None, 0, "min", 1, None, "min", 0, 0.0)
    off.update({"acc": 0.0})
    assert off.gate(10_000) is None


def test_a_run_that_misses_its_gate_stops_there(tmp_path):
    gate = ["train.gate_metric=val_loss", "train.gate_mode=min", "train.gate_step=150"]
    res = run_experiment("plus-last-even", "smoke", seed=2, out=tmp_path / "r", progress=False,
                         overrides=gate + ["train.gate_threshold=-1"])
    assert res["steps"] == 200 and res["stopped"].startswith("gate: best val_loss")
    assert (tmp_path / "r" / "checkpoints" / "best.safetensors").exists()
    passed = run_experiment("plus-last-even", "smoke", seed=2, out=tmp_path / "p", progress=False,
                            overrides=gate + ["train.gate_threshold=100"])
    assert passed["steps"] == 300 and passed["stopped"] == "max_steps"
    with pytest.raises(Exception, match="needs train.gate_metric"):
        run_experiment("plus-last-even", "smoke", seed=2, out=tmp_path / "x", progress=False,
                       overrides=["train.gate_step=150"])


def test_threshold_stop_ends_training_early(tmp_path):
    res = run_experiment("plus-last-even", "smoke", seed=2, out=tmp_path / "r", progress=False,
                         overrides=["train.stop_metric=val_loss", "train.stop_threshold=100",
                                    "train.eval_at_start=false"])
    assert res["steps"] == 100 and res["stopped"].startswith("val_loss")


def test_cpu_preset_reaches_two_percent_rule_error(tmp_path):
    res = run_experiment("plus-last-even", "cpu", seed=18, out=tmp_path / "r", progress=False)
    assert res["metrics"]["rule_error"] <= 0.02
