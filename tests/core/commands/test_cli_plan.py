"""The CLI tells what it will do and what to do next: help on every flag, --version, a light
`list`, `show`, `run --dry-run` (writes nothing), the commands printed after a run."""
import argparse
import json
import os
import shlex
import subprocess
import sys

import pytest

import tinyscope
from tinyscope.cli import build_parser, main
from tinyscope.config import to_dict


def _actions(parser, path=("tinyscope",)):
    """(command path, action, the help of the command it belongs to) for every action, recursively."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                yield path + (name,), None, helps.get(name)
                yield from _actions(child, path + (name,))
        elif not isinstance(action, argparse._HelpAction):
            yield path, action, "-"


def test_every_command_and_every_flag_has_help():
    missing = [f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest if a else '(the command)'}"
               for path, a, command_help in _actions(build_parser(full=True))
               if (a is None and not command_help) or (a is not None and (not a.help or a.help == argparse.SUPPRESS))]
    assert missing == []


def test_one_flag_name_for_one_idea():
    """A flag means the same thing in every command that has it: no synonyms (--n-traj, --step,
    --output) and no name for two ideas (--seeds: the seeds of a sweep, never a count)."""
    flags = {}
    for path, action, _ in _actions(build_parser(full=True)):
        for opt in getattr(action, "option_strings", ()):
            flags.setdefault(opt, []).append(" ".join(path))
    assert not {"--n-traj", "--step", "--output", "--outdir"} & set(flags)
    assert flags["--seeds"] == ["tinyscope sweep"] and flags["--n-seeds"] == ["tinyscope reproduce"]
    assert len(flags["--checkpoint"]) >= 3  # eval, analyze, viz


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"tinyscope {tinyscope.__version__}"


def test_list_imports_neither_torch_nor_an_experiment_module():
    code = ("import sys; from tinyscope.cli import main; main(['list']); "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.endswith(('.experiment', '.compiled'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    *listed, imported = proc.stdout.strip().splitlines()
    assert imported == "[]" and len(listed) > 20 and proc.stderr == ""


def test_the_static_catalogs_equal_the_registry():
    """Each study's catalog.py is what the registry says; regenerate with scripts/write_catalogs.py."""
    from tinyscope.runs import registry

    live = sorted((e.name, tuple(e.presets), e.description) for e in registry.experiments())
    assert registry.catalog() == live, "a catalog is stale: run `python scripts/write_catalogs.py`"
    for study in registry.study_names():
        path = os.path.join(os.path.dirname(registry.__file__), "..", "studies", study, "catalog.py")
        with open(path) as f:
            assert f.read() == registry.catalog_source(study), f"{study}: run `python scripts/write_catalogs.py`"


def _lines(text: str) -> list[str]:
    return [shlex.split(ln)[1] for ln in text.splitlines() if ln.startswith("--set ")]


def test_show_prints_a_preset_as_set_lines_that_rebuild_it(capsys):
    from tinyscope.runs.registry import get

    assert main(["show", "plus-last-even", "--preset", "paper", "--set", "train.lr=0.02"]) == 0
    lines = _lines(capsys.readouterr().out)
    exp = get("plus-last-even")
    want = exp.config("paper", overrides=["train.lr=0.02"])
    assert to_dict(exp.config("smoke", overrides=lines)) == to_dict(want)  # every field, from another preset
    assert main(["show", "plus-last-even", "--preset", "paper", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record == {"experiment": "plus-last-even", "preset": "paper", "config": to_dict(exp.config("paper"))}


def test_a_dry_run_tells_the_plan_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "deep" / "run"
    assert main(["run", "plus-last-even", "--preset", "smoke", "--seed", "3", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # no run directory, no default runs/, nothing at all
    assert "parameters:     250" in text and "precision " in text and "threads " in text
    assert "wall time:" in text and "measured here: 3 training steps" in text  # the smoke preset has no ledger timing
    from tinyscope.runs.registry import get

    exp = get("plus-last-even")
    assert to_dict(exp.config("cpu", overrides=_lines(text))) == to_dict(exp.config("smoke", seed=3))
    record = json.loads(text[text.index("{"):])
    assert record["preset"] == "smoke" and record["config"]["seed"] == 3


def test_a_dry_run_estimates_from_the_ledger_where_it_holds_timings(capsys, tmp_path):
    """plus-last-even --preset cpu has recorded wall times in studies/minimal/ledger.json."""
    assert main(["run", "plus-last-even", "--preset", "cpu", "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    assert "(from the minimal ledger: the median of" in capsys.readouterr().out
    assert not (tmp_path / "r").exists()


def test_a_dry_run_refuses_what_the_run_would_refuse(capsys, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert main(["run", "plus-last-even", "--preset", "smoke", "--out", str(tmp_path), "--dry-run"]) == 2
    assert "already holds a run; pass --resume" in capsys.readouterr().err


def test_the_next_commands_follow_what_the_experiment_offers():
    from tinyscope.runs.registry import get

    ple = get("plus-last-even").next_commands("runs/x")
    assert ple[0] == "tinyscope viz runs/x" and len(ple) <= 3 and "tinyscope eval runs/x --seed 1" in ple
    sih = get("sih-eca-dedicated-det").next_commands("runs/y")
    assert "tinyscope analyze runs/y" in sih


def test_runs_reads_an_index_without_changing_its_folder(capsys, tmp_path):
    from tinyscope.sweep.index import INDEX_NAME, RunIndex

    with RunIndex(tmp_path) as index:
        index.scan()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert list(before) == [INDEX_NAME]
    assert main(["runs", str(tmp_path)]) == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
