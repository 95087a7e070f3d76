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


@pytest.fixture
def kill_run_at():
    """``kill(name, preset, seed, overrides, out, config_from, step)``: start the run of
    ``config_from/config.json`` afresh in ``out`` and kill it at the evaluation of ``step``,
    leaving the resume checkpoint of its last ``checkpoint_every``; returns the dead Trainer."""
    from tests.run_kill import kill_run

    def kill(name, preset, seed, overrides, out, config_from, step):
        return kill_run(name, preset, seed, overrides, out, step, (config_from / "config.json").read_text())

    return kill
