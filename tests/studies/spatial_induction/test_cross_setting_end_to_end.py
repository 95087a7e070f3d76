"""Figures 3 and 4 end to end: smoke runs trained, analysed by `tinyscope analyze` with tiny set
sizes (--set), and drawn by `tinyscope report DIR`."""
import json

from tinyscope.cli import main
from tinyscope.runs.rundir import run_experiment

TINY = ["--only", "alignment", "ablation", "probes", "--n", "8", "--no-progress",
        "--set", "chunk=4", "--set", "points_per_traj=6", "--set", "probe_per_config=10"]


def test_train_analyze_report_draws_figures_3_and_4(tmp_path, capsys):
    for name, seed in (("sih-eca-shared-stoch", 0), ("sih-eca-shared-stoch", 1), ("sih-eca-dedicated-det", 0)):
        run_experiment(name, "smoke", seed=seed, out=tmp_path / f"{name}-{seed}", progress=False)
        assert main(["analyze", str(tmp_path / f"{name}-{seed}")] + TINY) == 0
    sizes = json.loads((tmp_path / "sih-eca-dedicated-det-0" / "analysis" / "analysis.json").read_text())["sizes"]
    assert (sizes["n_traj"], sizes["chunk"], sizes["probe_per_config"], sizes["tsne_per_pair"]) == (8, 4, 10, 60)
    capsys.readouterr()

    assert main(["report", str(tmp_path)]) == 0
    md = capsys.readouterr().out
    for fig in ("sih-fig3", "sih-fig4"):
        assert (tmp_path / "report" / "figures" / f"{fig}.png").stat().st_size > 10_000
        assert f"figures/{fig}.png" in md
    assert main(["report", str(tmp_path), "--table", "sih-fig4"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 1D V=2 k=3")]
    two_seeds = [r for r in rows if "| stochastic | Shared-head | smoke | 2 | 2 | 8 |" in r]
    assert len(rows) == 8 and len(two_seeds) == 2 and all("±" in r for r in two_seeds)
    assert any("| deterministic | Dedicated-heads | smoke | 1 | 1 | 8 |" in r for r in rows)


def test_analyze_set_names_the_keys_it_takes(tmp_path, capsys):
    run_experiment("sih-eca-dedicated-det", "smoke", seed=0, out=tmp_path / "r", progress=False)
    assert main(["analyze", str(tmp_path / "r"), "--set", "n_traj=5"]) == 2
    assert "KEY one of: chunk, control_seeds" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path / "r"), "--set", "tsne_max_iter=10", "--only", "tsne", "--n", "4"]) == 2
    assert "tsne_max_iter=10 must be >= 250" in capsys.readouterr().err
    assert not (tmp_path / "r" / "analysis").exists()
