"""The npi per-phenomenon table built from real smoke runs: one row per model, each cell the
mean over seeds of the runs' own results.json, and runs of the classic language left out."""
import json
import statistics

import pytest

from tinyscope.report.records import load_records
from tinyscope.report.tables import get_table
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.ncffn.licensing_npi import PHENOMENA

FAST = ["train.steps=4", "train.eval_every=4"]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ncffn-runs")
    for ffn in ("gelu", "nc"):
        for seed in (1, 2):
            run_experiment("ncffn-lm", "smoke", seed=seed, out=root / f"{ffn}-s{seed}", progress=False, report="none",
                           overrides=FAST + ["task.language=npi", f"model.ffn={ffn}"])
    run_experiment("ncffn-lm", "smoke", seed=1, out=root / "classic", progress=False, report="none", overrides=FAST)
    return root


def _metric(root, name, key):
    return json.loads((root / name / "results.json").read_text())["metrics"][key]


def test_npi_table_has_a_row_per_model_with_the_seed_mean_of_each_phenomenon(runs_dir):
    table = get_table("ncffn-npi-phenomena").build(load_records(runs_dir))
    assert [row[0] for row in table.rows] == ["GELU", "NC-FFN"]  # the classic-language run is not a row
    col = table.headers.index(f"pairs: {PHENOMENA[2]}")
    for row, ffn in zip(table.rows, ("gelu", "nc")):
        assert row[table.headers.index("n")] == 2
        want = statistics.mean(_metric(runs_dir, f"{ffn}-s{s}", f"pair_acc_{PHENOMENA[2]}") for s in (1, 2))
        assert row[col].mean == pytest.approx(want)
    assert table.headers[-1] == "slot top-1: mean"
