"""An in-process stand-in for a run killed mid-training, shared by the resume and fault tests."""
from __future__ import annotations

from pathlib import Path

import pytest


class Interrupt(Exception):
    """Stands for a run killed mid-training."""


def kill_run(name: str, preset: str, seed: int, overrides: list[str], out: Path, step: int,
             config_json: str | None = None):
    """Start the run afresh in ``out`` (its config.json: ``config_json``, else the resolved
    config's record) and kill it at its evaluation of ``step``, leaving the resume checkpoint of
    its last ``checkpoint_every``; returns the dead Trainer."""
    from tinyscope.config import to_dict
    from tinyscope.runs.registry import get
    from tinyscope.runs.rundir import build
    from tinyscope.train import checkpoint as ckpt
    from tinyscope.train.trainer import Trainer

    exp = get(name)
    cfg = exp.config(preset, seed, overrides)
    out.mkdir(parents=True)
    if config_json is None:
        ckpt.atomic_write_json(out / "config.json", {"experiment": name, "preset": preset, "config": to_dict(cfg)})
    else:
        (out / "config.json").write_text(config_json)
    task, model = build(exp, cfg)
    inner = exp.evaluator(cfg, task)

    def dying(m):
        if trainer.step == step:
            raise Interrupt
        return inner(m)

    trainer = Trainer(model, task, cfg.train, seed=cfg.seed, run_dir=out, objective=exp.objective(cfg, task),
                      evaluate=dying, progress=False)
    with pytest.raises(Interrupt):
        trainer.fit()
    return trainer
