"""Phase 1's restart rules (seed003-details Sec. 1.6): when a try ends, and a chain run whose
tries run as stages (a coarse plateau restarts, a model below the re-initialisation bar is
drawn afresh)."""
import json

import pytest

from tinyscope.errors import ConfigError
from tinyscope.runs import registry
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.theia.restarts import Phase1Data, PlateauRule

RULE = PlateauRule(epoch_steps=10, stop_acc=0.999, coarse_epoch=40, coarse_acc=0.90, fine_epochs=30)


def _run(rule, accs, every=10):
    """Feed one accuracy per evaluation (evaluation i at step i * every); the index that ends the try."""
    data = Phase1Data(None, rule, every)
    for i, acc in enumerate(accs):
        if data.observe(acc):
            return i
    return None


def test_coarse_plateau_ends_a_try_below_90_percent_at_epoch_40():
    assert _run(RULE, [0.5 + 0.01 * i for i in range(39)] + [0.89, 0.89]) == 40
    assert _run(RULE, [0.5] * 39 + [0.91] + [0.92 + 0.002 * i for i in range(10)]) is None


def test_fine_plateau_needs_30_epochs_without_a_gain_above_90_percent():
    accs = [0.95] + [0.9505] * 35           # gains of 0.05 points do not count (min_gain 0.1 point)
    assert _run(RULE, accs) == 30
    assert _run(RULE, [0.95] + [0.952 + 0.0012 * i for i in range(35)]) is None


def test_reaching_the_stop_accuracy_ends_the_try_and_the_state_resumes():
    assert _run(RULE, [0.5, 0.999]) == 1
    data = Phase1Data(None, RULE, 10)
    for acc in (0.95, 0.95, 0.95):
        data.observe(acc)
    again = Phase1Data(None, RULE, 10)
    again.load_state_dict(json.loads(json.dumps(data.state_dict())))
    assert again.state_dict() == data.state_dict() and again.evals == 3


def test_restarts_must_come_with_their_stop_metric():
    with pytest.raises(ConfigError, match="p1_try_done"):
        registry.get("theia-chain").config("smoke", 42, ["chain.p1_restarts=2"])
    cfg = registry.get("theia-chain").config("paper")
    assert cfg.chain.p1_restarts == 3 and cfg.train.stop_metric == "p1_try_done"
    assert registry.get("theia-chain").config("cpu").chain.p1_restarts == 0


def test_a_run_restarts_phase_1_as_stages(tmp_path):
    sets = ["chain.p1_restarts=2", "train.stop_metric=p1_try_done", "train.stop_threshold=1", "chain.p1_epoch_steps=1",
            "chain.p1_coarse_epoch=2", "chain.p1_reinit_below=0.99", "chain.p2_steps=0", "chain.p3_steps=0"]
    run_experiment("theia-chain", "smoke", out=tmp_path / "r", progress=False, report="none", overrides=sets)
    evals = {}
    for name in ("", "stages/phase1_restart1/", "stages/phase1_restart2/"):
        lines = (tmp_path / "r" / f"{name}metrics.jsonl").read_text().splitlines()
        evals[name] = [json.loads(ln) for ln in lines if '"eval"' in ln]
    for name, recs in evals.items():
        assert recs[-1]["p1_try_done"] == 1.0 and recs[-1]["step"] == 5, name   # coarse plateau at epoch 2 (step 5)
    # below 99%, each try starts from a fresh draw, not from the previous try's model
    assert evals["stages/phase1_restart1/"][0]["step_acc"] != evals[""][-1]["step_acc"]
