"""THEIA's chain phases 2 and 3 run as Trainer stages (RUN/stages/transition, RUN/stages/end_to_end):
a run killed inside a stage and resumed ends bit-equal to an uninterrupted one, and
``evaluate_run`` reproduces results.json's chain metrics from the saved weights, training nothing.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from tinyscope.runs.rundir import evaluate_run, load_run, run_experiment
from tinyscope.studies.theia.experiment import TheiaChainExperiment
from tinyscope.studies.theia.phases import ChainData, transition_table_accuracy
from tinyscope.studies.theia.task import CHAIN
from tinyscope.train.trainer import Trainer


class Interrupt(Exception):
    """Stands for a run killed inside a stage."""


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("chain") / "full"
    return out, run_experiment("theia-chain", "smoke", out=out, progress=False, report="none")


def _weights(path) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in load_run(path).model.state_dict().items()}


def _train_lines(path) -> list[dict]:
    return [{k: v for k, v in json.loads(ln).items() if k != "time"}
            for ln in path.read_text().splitlines() if '"train"' in ln]


def test_the_stages_write_their_own_run_directories(full_run):
    out, results = full_run
    assert [p["name"] for p in results["phases"]] == ["main", "transition", "end_to_end"]
    for name, steps in (("transition", 5), ("end_to_end", 3)):
        stage = out / "stages" / name
        assert (stage / "checkpoints" / "resume.safetensors").exists() and (stage / "train.json").exists()
        assert _train_lines(stage / "metrics.jsonl")[-1]["step"] == steps
    run = load_run(out)
    assert run.stage == "end_to_end" and run.step == 3
    assert set(results["metrics"]) == {"step_acc", "transition_acc", "chain_acc/5", "chain_acc/10"}


@pytest.mark.parametrize("stage, kill_at_eval, resume_step", [("transition", 1, 4), ("end_to_end", 2, 2)])
def test_a_run_killed_inside_a_stage_resumes_bit_equal(full_run, tmp_path, monkeypatch, stage, kill_at_eval,
                                                        resume_step):
    """Smoke stages checkpoint every 2 steps; ``transition`` evaluates at step 5 only (kill there:
    resume from step 4), ``end_to_end`` at steps 0 and 3 (kill at 3: resume from step 2)."""
    full, results = full_run
    stages = TheiaChainExperiment.stages

    def dying_stages(self, cfg, task):
        out = stages(self, cfg, task)
        for i, s in enumerate(out):
            if s.name == stage:
                def dying(model, inner=s.evaluate, calls=[]):  # noqa: B006 (one list per stage list)
                    calls.append(1)
                    if len(calls) == kill_at_eval:
                        raise Interrupt
                    return inner(model)

                out[i] = dataclasses.replace(s, evaluate=dying)
        return out

    killed = tmp_path / "killed"
    monkeypatch.setattr(TheiaChainExperiment, "stages", dying_stages)
    with pytest.raises(Interrupt):
        run_experiment("theia-chain", "smoke", out=killed, progress=False, report="none")
    monkeypatch.undo()
    ckpts = killed / "stages" / stage / "checkpoints"
    assert (ckpts / f"step_{resume_step:06d}.safetensors").exists() and not (killed / "results.json").exists()
    resumed = run_experiment("theia-chain", "smoke", out=killed, resume=True, progress=False, report="none")
    assert resumed["metrics"] == results["metrics"]
    assert [p | {"wall_time": 0} for p in resumed["phases"]] == [p | {"wall_time": 0} for p in results["phases"]]
    for name in ("transition", "end_to_end"):
        assert _train_lines(killed / "stages" / name / "metrics.jsonl") == \
            _train_lines(full / "stages" / name / "metrics.jsonl")
    a, b = _weights(full), _weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_evaluate_run_reproduces_the_chain_metrics_without_training(full_run, monkeypatch):
    out, results = full_run

    def no_training(self):
        raise AssertionError("evaluate_run must not train")

    monkeypatch.setattr(Trainer, "fit", no_training)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.safetensors")}
    again = evaluate_run(out)
    assert again["metrics"] == results["metrics"] and again["stage"] == "end_to_end"
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.safetensors")} == before


def test_chain_data_resumes_its_temperature_schedule():
    data = ChainData(CHAIN, steps=5, gumbel=True, steps_per_epoch=2)
    taus = [float(data.sample(np.random.default_rng(i), 4).meta["tau"][0]) for i in range(5)]
    assert taus == pytest.approx([0.49, 0.49, 0.48, 0.48, 0.47])
    later = ChainData(CHAIN, steps=5, gumbel=True, steps_per_epoch=2)
    later.load_state_dict(data.state_dict())
    batch = later.sample(np.random.default_rng(0), 4)
    assert float(batch.meta["tau"][0]) == pytest.approx(0.47) and batch.meta["noise"].shape == (4, 5, 2, 3)
    assert (batch.targets[..., -1] == batch.meta["labels"]).all()


def test_transition_table_accuracy_reads_the_mod3_table():
    from tests.studies.theia.test_model import OracleStep, exact_transition
    from tinyscope.studies.theia.chain import ChainModel

    assert transition_table_accuracy(ChainModel(OracleStep(), exact_transition())) == 1.0
