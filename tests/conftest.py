import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest


@pytest.fixture(autouse=True)
def _close_figures():
    """Tests that call an experiment's ``figures(run)`` own the Figures it returns: close them."""
    yield
    plt.close("all")


class Interrupt(Exception):
    """Stands for a run killed mid-training."""


@pytest.fixture
def kill_run_at():
    """``kill(name, preset, seed, overrides, out, config_from, step)``: start the run of
    ``config_from/config.json`` afresh in ``out`` and kill it at the evaluation of ``step``,
    leaving the resume checkpoint of its last ``checkpoint_every``; returns the dead Trainer."""
    from tinyscope.runs.registry import get
    from tinyscope.runs.rundir import build
    from tinyscope.train.trainer import Trainer

    def kill(name, preset, seed, overrides, out, config_from, step):
        exp = get(name)
        cfg = exp.config(preset, seed, overrides)
        out.mkdir()
        (out / "config.json").write_text((config_from / "config.json").read_text())
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

    return kill
