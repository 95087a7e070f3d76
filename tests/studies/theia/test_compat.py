"""Run directories of the theia-kleene cpu preset started before this version (config.json of
2026-12-01, the reproduction's seed 42) still resume and count: the new config fields default to
the behaviour they had."""
import json
import shutil
from pathlib import Path

from tinyscope.runs.rundir import read_config, trained_as

SAVED = Path(__file__).parent / "data" / "kleene_cpu_config_2026-12-01.json"


def test_todays_kleene_cpu_config_is_still_the_cpu_presets_training(tmp_path):
    shutil.copy(SAVED, tmp_path / "config.json")
    assert trained_as(tmp_path, "theia-kleene", "cpu", 42)
    _, _, cfg = read_config(tmp_path)
    assert cfg.eval.harness == "tinyscope" and cfg.model.logic_engine == "three_branch" and cfg.model.bridges


def test_a_changed_training_is_not_counted(tmp_path):
    saved = json.loads(SAVED.read_text())
    saved["config"]["model"]["bridges"] = False
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert not trained_as(tmp_path, "theia-kleene", "cpu", 42)
