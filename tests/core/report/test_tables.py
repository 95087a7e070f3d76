import csv
import io
import json

import numpy as np
import pytest
from matplotlib.patches import Polygon, Rectangle

from tinyscope.cli import main
from tinyscope.errors import ConfigError, TinyscopeError
from tinyscope.report import tables
from tinyscope.report.figures import length_families, plot_length_curves
from tinyscope.report.records import load_records
from tinyscope.report.stats import Stat, summarize
from tinyscope.report.tables import FunctionTable, Key, Metric, Table, TableLayout, register_table


def _runs(tmp_path, make_run):
    vals = {}
    for wd in ("0.0", "0.1"):
        for seed in (1, 2, 3):
            m = {"acc@32": 0.9 + 0.01 * seed, "acc@64": 0.5 + 0.1 * seed + float(wd), "slice_n@64": 1234.0}
            make_run(tmp_path / f"wd={wd}/s{seed}", seed, m, [f"train.weight_decay={wd}"])
            vals[(wd, seed)] = m
    return load_records(tmp_path), vals


LAYOUT = TableLayout(
    name="test-layout", caption="Accuracy (percent)", experiments=("plus-*",),
    rows=(Key("Task", "experiment", labels={"plus-last-even": "PLE"}), Key("wd", "train.weight_decay")),
    metrics=(Metric("ID: 32", "acc@32", scale=100, digits=2), Metric("OOD: 64", "acc@64", scale=100, digits=1)))


def test_layout_rows_are_settings_and_cells_are_mean_sd(tmp_path, make_run):
    runs, vals = _runs(tmp_path, make_run)
    t = LAYOUT.build(runs)
    assert t.headers == ["Task", "wd", "n", "ID: 32", "OOD: 64"]
    md = t.to_markdown()
    want = np.array([vals[("0.1", s)]["acc@64"] for s in (1, 2, 3)]) * 100
    assert f"| PLE | 0.1 | 3 | 92.00 ± 1.00 | {want.mean():.1f} ± {want.std(ddof=1):.1f} |" in md
    rows = list(csv.reader(io.StringIO(t.to_csv())))
    assert rows[0] == ["Task", "wd", "n", "ID: 32 mean", "ID: 32 sd", "OOD: 64 mean", "OOD: 64 sd"]
    assert float(rows[2][5]) == pytest.approx(want.mean())
    tex = t.to_latex()
    assert r"\toprule" in tex and r"92.00 $\pm$ 1.00" in tex and r"\caption{Accuracy (\%)}" not in tex


def test_transposed_layout_has_metric_rows_and_counts(tmp_path, make_run):
    runs, _ = _runs(tmp_path, make_run)
    layout = TableLayout(name="t3", caption="slices", experiments=("plus-last-even",),
                         rows=(Key("wd", "train.weight_decay"),), transpose=True, count_header="Items",
                         metrics=(Metric("len 64", "acc@64", digits=3, count="slice_n@64"),))
    t = layout.build(runs)
    assert t.headers == ["Metric", "Items", "0.0", "0.1"]
    assert t.rows[0][:2] == ["len 64", "1,234"] and isinstance(t.rows[0][2], Stat)
    assert "0.700 ± 0.100" in t.to_markdown()


def test_layout_refuses_cells_that_mix_settings(tmp_path, make_run):
    runs, _ = _runs(tmp_path, make_run)
    lumped = TableLayout(name="bad", caption="", experiments=("*",), rows=(Key("Task", "experiment"),),
                         metrics=(Metric("a", "acc@32"),))
    with pytest.raises(TinyscopeError, match="one seed"):
        lumped.build(runs)


def test_registry_and_function_tables(tmp_path, make_run):
    runs, _ = _runs(tmp_path, make_run)
    register_table(LAYOUT)
    register_table(FunctionTable("test-per-run", "one row per run", ("plus-last-even",),
                                 lambda rs: Table(["seed"], [[r.seed] for r in sorted(rs, key=lambda r: r.seed)])))
    assert {"test-layout", "test-per-run"} <= set(tables.table_names())
    assert tables.get_table("test-per-run").build(runs).rows[0] == [1]
    with pytest.raises(ConfigError, match="did you mean 'test-layout'"):
        tables.get_table("test-layot")


def test_length_figure_has_error_bars_and_shaded_ood(tmp_path, make_run):
    runs, _ = _runs(tmp_path, make_run)
    groups = summarize(runs)
    assert length_families(groups) == {"acc": [32, 64]}
    fig = plot_length_curves(groups, "acc", ["wd=0", "wd=0.1"], ood_above=48)
    ax = fig.axes[0]
    assert len(ax.containers) == 2  # one error-bar container per setting
    spans = [p for p in ax.patches if isinstance(p, (Polygon, Rectangle))]
    assert spans and any("OOD" in t.get_text() for t in ax.get_legend().get_texts())


def test_cli_report_and_runs(tmp_path, make_run, capsys):
    _runs(tmp_path, make_run)
    assert main(["report", str(tmp_path), "--metrics", "acc@64"]) == 0
    out = capsys.readouterr().out
    assert "acc@64" in out and "acc@32" not in out and (tmp_path / "report/figures").is_dir()
    assert main(["runs", str(tmp_path), "--where", '"acc@64" > 0.75 AND seed >= 2', "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["seed"], r["setting"]["train.weight_decay"]) for r in rows) == [(2, 0.1), (3, 0.0), (3, 0.1)]
    assert main(["runs", str(tmp_path), "--where", "no_such_column = 1"]) == 2
    assert "not a valid SQL condition" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--table", "nope"]) == 2


def test_layout_row_order_labels_and_defaults(tmp_path, make_run):
    runs, _ = _runs(tmp_path, make_run)
    layout = TableLayout(name="ordered", caption="", experiments=("plus-last-even",),
                         rows=(Key("Decay", "train.weight_decay", labels={0.0: "Off"}, default="On", order=("Off", "On")),),
                         metrics=(Metric("a", "acc@32"),))
    assert [row[0] for row in layout.build(runs).rows] == ["Off", "On"]
    desc = TableLayout(name="desc", caption="", experiments=("plus-last-even",),
                       rows=(Key("wd", "train.weight_decay", descending=True),), metrics=(Metric("a", "acc@32"),))
    assert [row[0] for row in desc.build(runs).rows] == ["0.1", "0.0"]


def test_report_draws_length_curves_with_the_experiments_ood_boundary(tmp_path, make_run):
    from tinyscope.report.sweep_report import _ood_above, build_report

    for seed in (42, 43):
        make_run(tmp_path / f"s{seed}", seed, {"acc@8": 0.99, "acc@16": 0.98, "acc@32": 0.5 + seed / 1000},
                 experiment="tracerelay-dyck")
    runs = load_records(tmp_path)
    assert _ood_above(runs) == 16.0  # the smoke preset's largest eval.id_lengths
    rep = build_report(tmp_path)
    pngs = [f.name for f in rep.files if f.suffix == ".png"]
    assert [n for n in pngs if not n.startswith("tracerelay-fig")] == ["tracerelay-dyck-acc.png"]
    assert {"tracerelay-fig3.png", "tracerelay-fig5.png"} <= set(pngs)  # the study's registered folder figures


def test_a_misspelt_table_is_refused_before_the_folder_is_read(tmp_path, capsys):
    """An empty folder would say "no finished runs"; the table's name is checked first."""
    assert main(["report", str(tmp_path), "--table", "sih-tabel13"]) == 2
    err = capsys.readouterr().err
    assert "unknown table 'sih-tabel13'" in err and "did you mean 'sih-table13'" in err and "no finished runs" not in err
