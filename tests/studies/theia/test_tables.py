"""THEIA's registered paper tables (per-rule, chain) built from real smoke runs: each cell is
checked against the runs' own results.json."""
import json

import pytest

from tinyscope.report.records import load_records
from tinyscope.report.tables import get_table
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.theia.task import RULES_39

FAST = ["train.steps=2", "eval.n_final_per_rule=4", "eval.n_check_per_rule=4", "task.n_test=32", "eval.n_patch_pairs=8"]
FAST_CHAIN = ["train.steps=2", "task.n_test=32", "chain.p2_steps=2", "chain.p3_steps=1", "chain.n_eval_chains=8",
              "chain.lengths=[5,10]"]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("theia-runs")
    for seed in (1, 2):
        run_experiment("theia-kleene", "smoke", seed=seed, out=root / f"kleene-s{seed}", progress=False,
                       report="none", overrides=FAST)
    for arch in ("theia_step", "flat_mlp"):
        run_experiment("theia-chain", "smoke", seed=1, out=root / f"chain-{arch}", progress=False, report="none",
                       overrides=FAST_CHAIN + [f"model.arch={arch}", "model.flat_hidden=16"])
    return root


def _metrics(root, name):
    return json.loads((root / name / "results.json").read_text())["metrics"]


def test_rule_table_has_one_row_per_rule_and_one_column_per_seed(runs_dir):
    table = get_table("theia-rules").build(load_records(runs_dir))
    assert table.headers == ["Rule", "THEIA, 1", "THEIA, 2"]
    assert [row[0] for row in table.rows[:39]] == [r.name for r in RULES_39]
    for col, seed in ((1, 1), (2, 2)):
        m = _metrics(runs_dir, f"kleene-s{seed}")
        cell = table.rows[0][col]
        assert cell.mean == pytest.approx(100 * m[f"rule39/{RULES_39[0].name}"]) and cell.n == 1
        assert table.rows[39][col].mean == m["rule39_passed"]


def test_chain_table_rows_are_models_and_columns_lengths(runs_dir):
    table = get_table("theia-chain").build(load_records(runs_dir))
    assert table.headers[:3] == ["Model", "n", "step"] and table.headers[3:5] == ["5 steps", "10 steps"]
    rows = {row[0]: row for row in table.rows}
    assert set(rows) == {"THEIA step", "flat MLP (hidden 16)"}
    m = _metrics(runs_dir, "chain-flat_mlp")
    assert rows["flat MLP (hidden 16)"][4].mean == pytest.approx(m["chain_acc/10"])
    assert table.scale[4] == 100 and "10 steps" in table.to_markdown()
