"""TraceRelay's registered paper tables (1, 3, 4, 5) built from real smoke runs.

The smoke runs are evaluated at the tables' lengths (256, 1024 and, for Dyck, 4096) so that
every cell is filled from results.json; each check compares a cell with the runs' own numbers.
"""
import json

import numpy as np
import pytest

from tinyscope.cli import main
from tinyscope.report.records import load_records
from tinyscope.report.stats import Stat
from tinyscope.report.sweep_report import build_report
from tinyscope.report.tables import get_table
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.tracerelay.figures import histories_figure, most_freq_length_figure

RUNS = [  # (experiment, seed, final evaluation lengths beyond the smoke ID lengths)
    ("tracerelay-equal-repeats", 1, [256, 1024]),
    ("tracerelay-equal-repeats", 2, [256, 1024]),
    ("tracerelay-equal-repeats-no-inheritance", 1, [256, 1024]),
    ("tracerelay-dyck", 1, [256, 1024, 4096]),
    ("tracerelay-most-freq", 1, [256, 1024]),
]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tracerelay-runs")
    for name, seed, ood in RUNS:
        lengths = ",".join(map(str, ood))
        run_experiment(name, "smoke", seed=seed, out=root / f"{name}-s{seed}", progress=False, report="none",
                       overrides=["train.steps=2", f"eval.ood_lengths=[{lengths}]", "eval.n_final=8"])
    return root


def _metrics(root, name, seed):
    return json.loads((root / f"{name}-s{seed}" / "results.json").read_text())["metrics"]


def test_table1_rows_are_task_inheritance_width_with_seed_statistics(runs_dir):
    table = get_table("tracerelay-table1").build(load_records(runs_dir))
    assert table.headers == ["Task", "Phase inheritance", "d_c", "Preset", "n", "ID: 256", "OOD: 1024"]
    assert [row[:5] for row in table.rows] == [["Equal Repeats", "On", "8", "smoke", 2],
                                               ["Equal Repeats", "Off", "8", "smoke", 1],
                                               ["Dyck", "On", "8", "smoke", 1], ["Most-Freq", "On", "8", "smoke", 1]]
    on = [_metrics(runs_dir, "tracerelay-equal-repeats", s)["acc@256"] for s in (1, 2)]
    cell = table.rows[0][5]
    assert isinstance(cell, Stat) and cell.n == 2
    assert cell.mean == pytest.approx(np.mean(on)) and cell.sd == pytest.approx(np.std(on, ddof=1))
    expected = f"{100 * np.mean(on):.2f} ± {100 * np.std(on, ddof=1):.2f}"
    assert f"| Equal Repeats | On | 8 | smoke | 2 | {expected} |" in table.to_markdown()


def test_table3_slices_dyck_by_distance_and_depth_with_counts(runs_dir):
    table = get_table("tracerelay-table3").build(load_records(runs_dir))
    assert table.headers == ["Slice", "Closes", "d_c=8"]
    m = _metrics(runs_dir, "tracerelay-dyck", 1)
    rows = {row[0]: row for row in table.rows}
    assert rows["1–8"][1] == f"{int(m['dist1-8_n@4096']):,}"
    assert rows["1–8"][2].mean == pytest.approx(100 * m["dist1-8_acc@4096"])
    assert rows["Depth 3"][2].mean == pytest.approx(100 * m["depth3_acc@4096"])
    assert np.isnan(rows["Depth 4"][2].mean)  # the smoke task has depth <= 3: the bin is empty, not zero
    assert rows[">2048"][1] == "0" and "| >2048 | 0 | – |" in table.to_markdown()


def test_table4_lists_most_freq_diagnostics_and_baselines(runs_dir):
    table = get_table("tracerelay-table4").build(load_records(runs_dir))
    m = _metrics(runs_dir, "tracerelay-most-freq", 1)
    rows = {row[0]: row[1] for row in table.rows}
    assert list(rows) == ["Full exact", "Top-1", "Top-2 prefix", "Set exact", "Termination",
                          "Suffix frequency (32)", "First appearance", "Fixed order"]
    assert rows["Full exact"].mean == pytest.approx(100 * m["acc@1024"])
    assert rows["Fixed order"].mean == pytest.approx(100 * m["base_fixed_exact@1024"])


def test_table5_has_one_row_per_run_with_exposure(runs_dir, capsys):
    table = get_table("tracerelay-table5").build(load_records(runs_dir))
    assert [row[:4] for row in table.rows] == [["ER / On", 8, "smoke", 1], ["ER / On", 8, "smoke", 2],
                                               ["ER / Off", 8, "smoke", 1], ["Dyck / On", 8, "smoke", 1],
                                               ["MF / On", 8, "smoke", 1]]
    results = json.loads((runs_dir / "tracerelay-dyck-s1" / "results.json").read_text())
    assert table.rows[3][5] == "2†" and table.rows[3][8] == f"{results['n_parameters']:,}" and table.rows[3][9] == "–"
    m = _metrics(runs_dir, "tracerelay-most-freq", 1)
    assert m["tf_greedy_n"] == 8 * 4  # 8 final examples at each of 8, 12, 256, 1024
    assert table.rows[4][9] == f"{int(m['tf_greedy_disagree'])} / 32"
    assert main(["report", str(runs_dir), "--table", "tracerelay-table5"]) == 0
    assert "| Dyck / On | 8 | smoke | 1 |" in capsys.readouterr().out


def test_report_draws_figures_2_to_5_from_the_runs(runs_dir):
    rep = build_report(runs_dir)
    names = {p.name for p in rep.files}
    assert {"tracerelay-fig2.png", "tracerelay-fig3.png", "tracerelay-fig4.png", "tracerelay-fig5.png"} <= names
    assert "![Fig. 5" in rep.markdown
    records = load_records(runs_dir)
    stars = [line for ax in histories_figure(records).axes for line in ax.lines if line.get_marker() == "*"]
    selected = sorted(json.loads((runs_dir / f"{n}-s{s}" / "results.json").read_text())["selected_step"] for n, s, _ in RUNS)
    assert sorted(int(line.get_xdata()[0]) for line in stars) == selected  # one star per run, at its selection
    a, _ = most_freq_length_figure(records).axes
    curve = a.containers[0].lines[0]  # the errorbar of d_c=8: exact accuracy per length
    m = _metrics(runs_dir, "tracerelay-most-freq", 1)
    assert list(curve.get_xdata()) == [8, 12, 256, 1024]
    assert np.allclose(curve.get_ydata(), [100 * m[f"acc@{T}"] for T in (8, 12, 256, 1024)])
    assert any(line.get_label() == "fixed order" for line in a.lines)
