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
