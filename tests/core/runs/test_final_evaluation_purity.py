"""``Experiment.final_evaluation`` is pure: it measures the selected model and changes nothing.

For every registered trainable experiment, a smoke run is trained, loaded with ``load_run`` (the
model results.json measured) and measured once more; every parameter and buffer must come out
bit-equal (compared as raw bytes, so NaNs and signed zeros count too).
"""
from __future__ import annotations

import pytest
import torch

from tinyscope.runs import registry
from tinyscope.runs.rundir import load_run, run_experiment

TRAINABLE = [name for name in registry.names() if registry.get(name).trainable]


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes of ``t`` (a copy on the CPU)."""
    return t.detach().cpu().reshape(-1).contiguous().view(torch.uint8).clone()


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    named = [(f"param {k}", v) for k, v in model.named_parameters()] + \
        [(f"buffer {k}", v) for k, v in model.named_buffers()]
    return {k: _bits(v) for k, v in named} | {f"dtype {k}": torch.tensor(list(str(v.dtype).encode())) for k, v in named}


def test_every_trainable_experiment_is_checked():
    assert "theia-chain" in TRAINABLE and len(TRAINABLE) >= 20


@pytest.mark.parametrize("name", TRAINABLE)
def test_final_evaluation_leaves_every_parameter_and_buffer_bit_equal(name, tmp_path):
    run_experiment(name, "smoke", out=tmp_path / "run", progress=False, report="none")
    run = load_run(tmp_path / "run")
    before = _snapshot(run.model)
    run.experiment.final_evaluation(run.cfg, run.task, run.model)
    after = _snapshot(run.model)
    assert after.keys() == before.keys(), f"{name}: final_evaluation added or removed tensors"
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert not changed, f"{name}: final_evaluation changed {len(changed)} tensors, e.g. {changed[:3]}"
