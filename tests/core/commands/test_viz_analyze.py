"""`tinyscope viz` and `tinyscope analyze` do what the run's study declares, for every study, and
say so in one line for one that declares nothing."""
import pytest

from tinyscope.cli import main
from tinyscope.runs import registry
from tinyscope.runs.rundir import run_experiment


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("viz")
    out = {}
    for name in ("plus-last-even", "sih-eca-dedicated-det", "parity-direct"):
        out[name] = root / name
        run_experiment(name, "smoke", out=out[name], progress=False, report="none")
    return out


def test_analyze_of_a_study_that_declares_no_analyses_is_one_line(runs, capsys):
    assert registry.get("plus-last-even").analyses() == ()
    assert main(["analyze", str(runs["plus-last-even"])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tinyscope: error: plus-last-even declares no analyses; `tinyscope viz {runs['plus-last-even']}` "
                   "draws its figures"]


def test_analyze_list_names_the_study_analyses(runs, capsys):
    assert main(["analyze", str(runs["sih-eca-dedicated-det"]), "--list"]) == 0
    assert capsys.readouterr().out.split() == ["attention", "alignment", "ablation", "probes", "tsne", "counts"]


@pytest.mark.parametrize("name, expected", [("sih-eca-dedicated-det", "rollout"), ("plus-last-even", "05_embeddings")])
def test_viz_draws_the_views_the_study_declares(runs, capsys, name, expected):
    assert main(["viz", str(runs[name]), "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert expected in listed
    assert main(["viz", str(runs[name]), "--only", expected, "--dpi", "30"]) == 0
    assert (runs[name] / "figures" / f"{expected}.png").stat().st_size > 1000


def test_viz_of_a_run_with_no_views_is_one_line(runs, capsys, monkeypatch):
    exp = registry.get("parity-direct")
    monkeypatch.setattr(type(exp), "views", lambda self, run, options=None: [])
    assert main(["viz", str(runs["parity-direct"])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "declares no views" in err[0]
