"""train.compile: the training forward through torch.compile, and where compiling fails one
warning and the eager model, with the same result."""
import logging

import torch

from tinyscope.train.trainer import TrainConfig, Trainer

from .tiny import CountingTask, same, tiny_model, weights


class Broken(torch.nn.Module):
    def forward(self, *args, **kwargs):
        raise RuntimeError("backend compiler failed\nsecond line of a long trace")


def test_a_failed_compile_warns_once_and_trains_eagerly(monkeypatch, caplog):
    cfg = dict(steps=6, batch_size=8, eval_every=100, checkpoint_every=0, precision="fp32", threads=1)
    eager_model = tiny_model()
    Trainer(eager_model, CountingTask(), TrainConfig(**cfg), seed=1, progress=False).fit()
    monkeypatch.setattr(torch, "compile", lambda module, **kw: Broken())
    model = tiny_model()
    with caplog.at_level(logging.WARNING, logger="tinyscope.train.trainer"):
        result = Trainer(model, CountingTask(), TrainConfig(compile=True, **cfg), seed=1, progress=False).fit()
    warnings = [r.getMessage() for r in caplog.records if "torch.compile failed" in r.getMessage()]
    assert len(warnings) == 1 and "second line" not in warnings[0]
    assert result.machine["compile"] is False
    assert same(weights(model), weights(eager_model))
