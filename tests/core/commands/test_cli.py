import json
import subprocess
import sys

import pytest

from tinyscope.cli import main
from tinyscope.errors import ConfigError
from tinyscope.runs import registry


def run_cli(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        code = main(list(argv))
        raise SystemExit(code)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_list_shows_every_experiment_with_presets(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("plus-last-even "))
    assert "smoke, cpu, paper" in line


def test_every_experiment_module_imports():
    from tinyscope.runs import registry

    registry.names()
    assert registry.IMPORT_ERRORS == {}


@pytest.mark.parametrize("argv, needle", [
    (["run", "plus-lst-even"], "unknown experiment 'plus-lst-even' (did you mean 'plus-last-even'?)"),
    (["run", "plus-last-even", "--preset", "huge"], "no preset 'huge'; choose one of smoke, cpu, paper"),
    (["run", "plus-last-even", "--set", "model.d_modle=4"], "model has no field 'd_modle'"),
    (["run", "plus-last-even", "--set", "train.lr=fast"], "train.lr='fast' is not a number"),
    (["run", "plus-last-even", "--set", "train.lr=-1"], "train.lr=-1.0 must be a positive number"),
    (["run", "plus-last-even", "--set", "model.n_heads=3"], "model.d_model=2 is not divisible by 3 heads"),
    (["run", "plus-last-even", "--set", "train.lr"], "must look like key=value"),
    (["run", "plus-last-even", "--set", "model.norm=post"], "choose one of 'pre', 'none'"),
    (["run", "plus-last-even", "--seed", "x"], "argument --seed: invalid int value"),
    (["eval", "/nonexistent/run"], "is not a run directory"),
    (["frobnicate"], "invalid choice"),
    (["analyze", "/nonexistent/run", "--only", "tnse"], "is not a run directory"),
    (["analyze", "/nonexistent/run", "--checkpoint", "final"], "must be best, last or a step number"),
])
def test_bad_input_prints_one_line_and_exits_2(capsys, argv, needle, tmp_path):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("tinyscope: error: ") and needle in err, err


def test_run_eval_resume_and_refusal_to_overwrite(capsys, tmp_path):
    out_dir = str(tmp_path / "ple")
    code, out, err = run_cli(capsys, "run", "plus-last-even", "--preset", "smoke", "--seed", "18", "--out", out_dir,
                             "--set", "model.d_model=4", "--set", "train.lr=3e-3",
                             "--no-progress")
    assert code == 0
    assert f"tinyscope: report {out_dir}/report.html" in err  # where the page is, and what to do next
    assert f"tinyscope: next:\n  tinyscope viz {out_dir}\n" in err
    summary = json.loads(out[out.index("{"):])
    config = json.loads((tmp_path / "ple" / "config.json").read_text())
    assert config["config"]["model"]["d_model"] == 4 and config["config"]["train"]["lr"] == 3e-3

    code, out, _ = run_cli(capsys, "eval", out_dir)
    assert code == 0 and json.loads(out)["metrics"]["rule_error"] == summary["metrics"]["rule_error"]

    before = (tmp_path / "ple" / "results.json").read_bytes()
    code, _, err = run_cli(capsys, "run", "plus-last-even", "--preset", "smoke", "--seed", "18", "--out", out_dir)
    assert code == 2 and "already holds a run; pass --resume" in err
    assert (tmp_path / "ple" / "results.json").read_bytes() == before  # nothing saved is lost

    code, _, err = run_cli(capsys, "run", "plus-last-even", "--preset", "smoke", "--seed", "19", "--out", out_dir,
                           "--resume")
    assert code == 2 and "with another config" in err


def test_console_script_error_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "tinyscope.cli", "run", "nope"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown experiment 'nope'" in proc.stderr


def test_help_does_not_import_torch():
    """`tinyscope --help` and argument parsing stay instant: commands import their heavy modules
    only when they run."""
    import subprocess
    import sys

    code = "import sys; from tinyscope.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"



def test_an_experiment_of_a_study_that_failed_to_import_says_why(monkeypatch):
    """A study broken by an installation or a bug is not reported as a misspelt name."""
    registry.get("theia-kleene")  # everything loaded
    monkeypatch.delitem(registry._REGISTRY, "theia-kleene")
    monkeypatch.setitem(registry.IMPORT_ERRORS, "tinyscope.studies.theia.experiment", "ImportError: no module named x")
    with pytest.raises(ConfigError, match=r"'theia-kleene' is not available: study 'theia' failed to import "
                                          r"\(ImportError: no module named x\)"):
        registry.get("theia-kleene")
    with pytest.raises(ConfigError, match="unknown experiment 'theia-kleen'"):
        registry.get("theia-kleen")
