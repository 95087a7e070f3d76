"""Figures 3 and 4 over a folder of analysed runs (cross_setting.py): seeds pooled per setting x
rules x architecture, empty groups kept, one preset per figure, and the numbers as tables."""
import json

import numpy as np
import pytest

from tests.core.report.conftest import write_run
from tinyscope.errors import TinyscopeError
from tinyscope.interp.figure_lint import lint
from tinyscope.report.records import load_records
from tinyscope.report.tables import get_table
from tinyscope.studies.spatial_induction.analysis import CONDITIONS, STAGES
from tinyscope.studies.spatial_induction.cross_setting import (
    GROUPS,
    Group,
    collect,
    figure3,
    figure4,
    group_of,
)


def fake_analysis(level: float) -> dict:
    """An analysis.json whose every number is ``level`` (the L1 alignment ``level / 2``)."""
    return {"n_traj": 8, "seed": 42,
            "alignment": {"L1": {"layer": level / 2, "per_head": [level / 2]}, "L2": {"layer": level, "per_head": [level]}},
            "ablation": {"tf_cell_acc": {c: level for c in CONDITIONS}},
            "probes": {"stages": list(STAGES), "config": {s: level for s in STAGES}, "kgram": {s: level for s in STAGES}}}


def analysed_run(path, experiment, seed, level=None, preset="smoke", step=300):
    write_run(path, seed, {"test_tf_cell_acc": 0.5}, experiment=experiment, preset=preset)  # selected step 300
    if level is not None:
        (path / "analysis").mkdir()
        (path / "analysis" / "analysis.json").write_text(json.dumps(dict(fake_analysis(level), checkpoint_step=step)))


@pytest.fixture
def folder(tmp_path):
    """Two analysed seeds of eca shared det (0.6, 0.8), one of eca dedicated stoch (0.4), an
    unanalysed eca dedicated det run, one with a damaged analysis.json, one whose analysis is of
    another checkpoint, and a compiled circuit."""
    analysed_run(tmp_path / "a0", "sih-eca-shared-det", 0, 0.6)
    analysed_run(tmp_path / "a1", "sih-eca-shared-det", 1, 0.8)
    analysed_run(tmp_path / "s0", "sih-eca-dedicated-stoch", 0, 0.4)
    analysed_run(tmp_path / "plain", "sih-eca-dedicated-det", 0)
    analysed_run(tmp_path / "broken", "sih-eca-dedicated-det", 1, 0.9)
    (tmp_path / "broken" / "analysis" / "analysis.json").write_text('{"alignment": ')
    analysed_run(tmp_path / "stale", "sih-eca-dedicated-det", 2, 0.9, step=100)
    analysed_run(tmp_path / "compiled", "sih-compiled-eca-det", 0, 0.1, preset="paper")
    return tmp_path


def test_group_of_names_the_twelve_trained_experiments_only():
    assert group_of("sih-vn2d-dedicated-stoch") == Group("vn2d", "stoch", "dedicated")
    assert group_of("sih-compiled-eca-det") is None and group_of("plus-last-even") is None
    assert len(set(GROUPS)) == 12


def test_seeds_are_pooled_per_group_and_empty_groups_kept(folder):
    data = collect(load_records(folder))
    assert list(data) == list(GROUPS)
    shared = data[Group("eca", "det", "shared")]
    s = shared.stat("ablation", "tf_cell_acc", "L1 routing")
    assert (s.n, s.mean) == (2, pytest.approx(0.7)) and s.sd == pytest.approx(np.std([0.6, 0.8], ddof=1))
    assert shared.stat("alignment", "L1", "layer").mean == pytest.approx(0.35)
    dedicated = data[Group("eca", "det", "dedicated")]
    assert (len(dedicated.runs), len(dedicated.analyses)) == (3, 0)  # damaged, stale: not analysed
    assert dedicated.missing("probes") == "probes not analysed"
    assert data[Group("v3", "det", "shared")].missing("probes") == "no run"
    assert all(r.experiment.startswith("sih-eca") for g in data.values() for r in g.runs)  # compiled left out


def test_tables_give_every_group_with_counts(folder, capsys):
    from tinyscope.cli import main

    runs = load_records(folder)
    t3 = get_table("sih-fig3").build(runs)
    assert len(t3.rows) == 12
    row = next(r for r in t3.rows if r[:3] == ["1D V=2 k=3", "deterministic", "Shared-head"])
    assert row[3:7] == ["smoke", 2, 2, "8"]
    assert t3.headers.index("acc: L2 random") == len(row) - 1 and row[-1].n == 2
    empty = next(r for r in t3.rows if r[:3] == ["2D VN V=2 k=5", "stochastic", "Dedicated-heads"])
    assert empty[4:6] == [0, 0] and all(c.n == 0 for c in empty[7:])
    t4 = get_table("sih-fig4").build(runs)
    assert len(t4.rows) == 24 and t4.headers[-len(STAGES):] == list(STAGES)
    assert main(["report", str(folder), "--table", "sih-fig3"]) == 0
    assert "0.700 ± 0.141" in capsys.readouterr().out


def test_figures_draw_present_and_missing_groups_at_print_size(folder):
    runs = load_records(folder)
    fig3 = figure3(runs)
    texts = [t.get_text() for ax in fig3.axes for t in ax.texts]
    assert texts.count("not analysed") == 2 and texts.count("no run") == 2 * 9  # alignment and ablation panels
    assert "n=2" in [t.get_text().split("\n")[1] for t in fig3.axes[0].get_xticklabels()]
    assert lint(fig3) == []
    fig4 = figure4(runs)
    assert len(fig4.axes) == 6 and lint(fig4) == []
    titles = [ax.get_title() for ax in fig4.axes]
    assert titles[0].endswith("Sha. 2/0, Ded. 0/1") and "no analysed run" in [t.get_text() for t in fig4.axes[1].texts]
    lines = {c.lines[0].get_linestyle(): c.lines[0].get_ydata() for c in fig4.axes[0].containers}
    assert lines["-"] == pytest.approx([0.7] * len(STAGES)) and lines["--"] == pytest.approx([0.4] * len(STAGES))


def test_figures_refuse_mixed_presets_and_folders_without_analyses(folder, tmp_path_factory):
    analysed_run(folder / "cpu", "sih-eca-shared-det", 2, 0.9, preset="cpu")
    with pytest.raises(TinyscopeError, match="presets cpu, smoke"):
        figure3(load_records(folder))
    assert [r[3] for r in get_table("sih-fig3").build(load_records(folder)).rows].count("cpu") == 12
    bare = tmp_path_factory.mktemp("bare")
    analysed_run(bare / "r", "sih-eca-shared-det", 0)
    with pytest.raises(TinyscopeError, match="tinyscope analyze RUN"):
        figure4(load_records(bare))


def _with_restarts(path, measured_step=None):
    """Rewrite a run's results.json as a gated run whose main start was replaced: the main
    phase selected step 300, the final model comes from restart 1 (its step 800)."""
    results = json.loads((path / "results.json").read_text())
    results["phases"] = [{"name": "main", "steps": 300, "selected_step": 300}, {"name": "restart1", "selected_step": 800}]
    if measured_step is not None:
        results["measured_step"] = measured_step
    (path / "results.json").write_text(json.dumps(results))


def test_a_run_with_restart_stages_is_judged_by_the_step_it_measured(tmp_path):
    analysed_run(tmp_path / "kept", "sih-v3-dedicated-det", 0, 0.9, step=800)
    _with_restarts(tmp_path / "kept", measured_step=800)
    analysed_run(tmp_path / "stale", "sih-v3-dedicated-det", 1, 0.9, step=300)
    _with_restarts(tmp_path / "stale", measured_step=800)
    analysed_run(tmp_path / "older", "sih-v3-dedicated-det", 2, 0.9, step=800)
    _with_restarts(tmp_path / "older")  # results.json from before measured_step: not judged
    group = collect(load_records(tmp_path))[Group("v3", "det", "dedicated")]
    assert (len(group.runs), len(group.analyses)) == (3, 2)
    assert sorted(r.measured_step for r in group.runs if r.measured_step is not None) == [800, 800]
