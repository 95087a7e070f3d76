import json

import numpy as np

from tinyscope.cli import main
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.spatial_induction.analysis import CONDITIONS, STAGES, AnalysisConfig, analyze
from tinyscope.studies.spatial_induction.construction_sets import query_sets


def test_full_analysis_of_a_smoke_run_produces_every_number_and_figure(tmp_path):
    run_experiment("sih-eca-dedicated-det", "smoke", seed=0, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    cfg = AnalysisConfig(n_traj=24, chunk=8, points_per_traj=12, probe_per_config=40, tsne_per_pair=8, tsne_max_iter=250)
    results, figures = analyze(run.model, run.task, cfg, progress=False)
    assert set(results["ablation"]["tf_cell_acc"]) == set(CONDITIONS)
    for layer in ("L1", "L2"):
        assert 0.0 <= results["alignment"][layer]["layer"] <= 1.0
    assert len(results["alignment"]["L1"]["per_head"]) == run.model.blocks[0].attn.n_heads
    assert set(results["probes"]["config"]) == set(STAGES)
    counts = results["counts"]
    assert len(counts["error_rate"]) == len(counts["n_queries"]) and all(0 <= e <= 1 for e in counts["error_rate"])
    assert {"alignment", "ablation", "probes", "tsne", "attention_L2", "counts"} <= set(figures)
    for fig in figures.values():
        assert fig.axes


def test_analyze_cli_writes_json_and_figures(tmp_path, capsys):
    run_experiment("sih-eca-dedicated-det", "smoke", seed=1, out=tmp_path / "r", progress=False)
    code = main(["analyze", str(tmp_path / "r"), "--only", "alignment", "attention", "--n", "8", "--no-progress"])
    assert code == 0
    data = json.loads((tmp_path / "r" / "analysis" / "analysis.json").read_text())
    assert "alignment" in data and "ablation" not in data
    assert (tmp_path / "r" / "analysis" / "alignment.png").stat().st_size > 1000
    assert main(["analyze", str(tmp_path / "r"), "--n", "0"]) == 2
    assert main(["analyze", str(tmp_path / "r"), "--only", "tnse"]) == 2
    assert "is not an analysis of sih-eca-dedicated-det" in capsys.readouterr().err


def test_analysis_figures_enter_the_run_report(tmp_path):
    run_experiment("sih-eca-dedicated-det", "smoke", seed=2, out=tmp_path / "r", progress=False)
    assert main(["analyze", str(tmp_path / "r"), "--only", "alignment", "--n", "8", "--no-progress"]) == 0
    page = (tmp_path / "r" / "report.html").read_text()
    assert "Analysis (tinyscope analyze)" in page and 'id="alignment"' in page


def test_alignment_detail_of_the_compiled_circuit_is_exact_matching(tmp_path):
    """On Construction I, layer 2 puts all its mass on the exact matches (agreement k of k) and
    layer 1's strongest offsets are routing offsets; the uniform shares are a distribution."""
    assert main(["construct", "eca", "--grid", "8", "--T", "5", "--T0", "3", "--out", str(tmp_path / "c")]) == 0
    run = load_run(tmp_path / "c")
    results, _ = analyze(run.model, run.task, AnalysisConfig(n_traj=16, chunk=8, only=["alignment"]), progress=False)
    detail = results["alignment_detail"]["L2_agreement"]
    k = run.task.lattice.k
    assert len(detail["mass"]) == len(detail["uniform"]) == k + 1
    assert detail["mass"][k] > 0.99 and sum(detail["mass"]) <= 1 + 1e-9
    assert abs(sum(detail["uniform"]) - 1) < 1e-9 and detail["uniform"][k] < 0.5
    _, traj = run.task.trajectories(np.random.default_rng(0), 8, "test", covered=True)
    sets = query_sets(run.task.layout, traj, run.task.cfg.T0)
    q, key = np.nonzero(sets.routing)
    routing = set((sets.pos[q] - key).tolist())  # offsets (query - key) of routing cells, wrap included
    for head in results["alignment_detail"]["L1_offsets"]:
        assert {offset for offset, mass in head if mass > 0.01} <= routing, head
