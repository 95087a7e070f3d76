"""``Experiment.fresh_eval_config``: every trainable experiment draws a fresh final evaluation set
from a seed (`tinyscope eval RUN --seed S`), keeping the model, and evaluates on it.

Checked on the smoke preset with a freshly built model: the fresh set's fingerprint differs from
the run's own and from another seed's, the same seed gives the same set, the model built from the
fresh config has the same tensors, and the final evaluation runs on it.
"""
from __future__ import annotations

import pytest
import torch

from tinyscope.runs import registry
from tinyscope.runs.rundir import build

TRAINABLE = [name for name in registry.names() if registry.get(name).trainable]


def _shapes(model: torch.nn.Module) -> dict[str, tuple]:
    return {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", TRAINABLE)
def test_fresh_evaluation_set(name):
    exp = registry.get(name)
    cfg = exp.config("smoke")
    task, model = build(exp, cfg)
    fresh = exp.fresh_eval_config(cfg, 12345, 8)
    again = exp.fresh_eval_config(cfg, 12345, 8)
    other = exp.fresh_eval_config(cfg, 54321, 8)
    fresh_task = exp.build_task(fresh)
    assert _shapes(exp.build_model(fresh, fresh_task)) == _shapes(model), f"{name}: the fresh config changes the model"
    own_fp = exp.eval_fingerprint(cfg, task)
    fresh_fp = exp.eval_fingerprint(fresh, fresh_task)
    if own_fp is not None:
        assert fresh_fp != own_fp, f"{name}: the fresh set is the run's own"
        assert exp.eval_fingerprint(again, exp.build_task(again)) == fresh_fp, f"{name}: same seed, another set"
        assert exp.eval_fingerprint(other, exp.build_task(other)) != fresh_fp, f"{name}: the seed is ignored"
    model.eval()
    metrics = exp.final_evaluation(fresh, fresh_task, model)
    assert metrics and all(isinstance(v, (int, float)) for v in metrics.values())
