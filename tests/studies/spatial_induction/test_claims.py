"""The spatial-induction claims: registered with the paper's numbers, runnable at their presets,
measurable from what the final evaluation writes; fresh evaluation sets; compiled run directories."""
import collections
import dataclasses
import json
import math

import numpy as np
import pytest

from tinyscope.runs import registry
from tinyscope.runs.claims import RunRecord, all_claims, measure_claim
from tinyscope.runs.rundir import build
from tinyscope.studies.spatial_induction import claims as sih_claims
from tinyscope.studies.spatial_induction.coverage import is_covered
from tinyscope.studies.spatial_induction.rules import numbers_of

CLAIMS = {c.id: c for c in all_claims("spatial_induction")}

# a few cells typed again from the paper text, to check the registered values against
PAPER_CELLS = {
    "table13/eca-shared-det/tf_seq_acc": 0.9990,        # Table 13, 1D V=2 Shared-head
    "table13/vn2d-dedicated-det/ar_cell_acc": 0.9999,   # Table 13, 2D VN Dedicated-heads
    "table14/v3-dedicated-stoch/tf_kl_kgram": 0.0004,   # Table 14, 1D V=3 Dedicated-heads
    "table14/v3-shared-stoch/tf_kl_true": 0.0881,       # Table 14, 1D V=3 Shared-head
    "table14/vn2d-dedicated-stoch/kgram_acc": 0.7351,   # Table 14, 2D VN Dedicated-heads, TF (kgram)
    "table14/eca-dedicated-stoch/ar_kl_kgram": 0.0044,  # Table 14, 1D V=2 Dedicated-heads
    "table1/eca-shared-stoch/ar_cell_acc": 0.5496,      # Table 1, 1D V=2 Shared-head
    "table1/vn2d-shared-stoch/ar_cell_acc_kgram": 0.5197,
    "table8/v3-I/Lambda": 420,                          # Table 8, Construction I, 1D V=3
    "table8/vn2d-II/d_mlp": 206,                        # Table 8, Construction II, 2D VN
    "appI.1/eca-split/rules_train": 203,                # App. I.1: 203 / 28 / 25
}


def test_every_cell_of_tables_1_13_and_14_is_registered():
    by_where = collections.Counter(c.where for c in CLAIMS.values())
    assert by_where["Table 1"] == 6 * 5 and by_where["Table 13"] == 6 * 3 and by_where["Table 14"] == 6 * 7
    for s in sih_claims.SETTINGS:
        for a in sih_claims.ARCHS:
            for col in sih_claims.TABLE13_COLUMNS:
                assert f"spatial_induction/table13/{s}-{a}-det/{col}" in CLAIMS
            for col in sih_claims.TABLE14_COLUMNS:
                assert f"spatial_induction/table14/{s}-{a}-stoch/{col}" in CLAIMS


def test_paper_values_are_the_papers():
    for suffix, value in PAPER_CELLS.items():
        claim = CLAIMS[f"spatial_induction/{suffix}"]
        assert claim.paper.value == pytest.approx(value), suffix


def test_table_1_agrees_with_tables_13_and_14():
    """Table 1 is a compact copy of Tables 13-14 in the paper; the typed-in values must agree."""
    pairs = (("det", "tf_cell_acc"), ("det", "ar_cell_acc"), ("stoch", "ar_cell_acc"),
             ("stoch", "ar_cell_acc_kgram"), ("stoch", "ar_kl_kgram"))
    for s in sih_claims.SETTINGS:
        for a in sih_claims.ARCHS:
            for regime, col in pairs:
                t1 = CLAIMS[f"spatial_induction/table1/{s}-{a}-{regime}/{col}"]
                full = CLAIMS[f"spatial_induction/table{13 if regime == 'det' else 14}/{s}-{a}-{regime}/{col}"]
                assert t1.paper == full.paper and t1.runs == full.runs and t1.target == full.target


def test_targets_are_the_stated_readings():
    assert CLAIMS["spatial_induction/table13/v3-shared-det/tf_cell_acc"].target.value == 0.999
    assert CLAIMS["spatial_induction/table13/v3-shared-det/tf_seq_acc"].aggregate == "min"
    kl = CLAIMS["spatial_induction/table14/eca-shared-stoch/ar_kl_kgram"].target
    assert (kl.op, kl.value) == ("<=", 0.005)
    acc = CLAIMS["spatial_induction/table14/eca-shared-stoch/tf_cell_acc"].target
    assert (acc.op, acc.value, acc.tol) == ("within", 0.7491, 0.005)


def test_each_experiment_owns_its_claims_and_every_run_set_builds():
    for name in registry.names():
        if name.startswith("sih-"):
            assert all(c.experiment == name for c in registry.get(name).claims())
    assert sum(len(registry.get(n).claims()) for n in registry.names() if n.startswith("sih-")) == len(CLAIMS)
    seen = set()
    for claim in CLAIMS.values():
        assert claim.note
        for rs in claim.runs:
            if rs.key not in seen:
                seen.add(rs.key)
                cfg = registry.get(rs.experiment).config(rs.preset, rs.seeds[0], list(rs.overrides))
                assert cfg.seed == rs.seeds[0]
    assert len(seen) == 12 + 12  # one run set per trained experiment; I and II for each compiled one


def _final_metrics(name: str, seed: int = 3, n: int = 4):
    exp = registry.get(name)
    cfg = exp.config("smoke", 0)
    fresh = exp.fresh_eval_config(cfg, seed, n)
    task, model = build(exp, cfg)
    task2 = exp.build_task(fresh)
    return exp, cfg, fresh, task, task2, exp.final_evaluation(fresh, task2, model)


@pytest.mark.parametrize("name", ["sih-eca-shared-det", "sih-vn2d-dedicated-stoch"])
def test_every_claim_measures_a_fresh_final_evaluation(name):
    exp, cfg, fresh, task, task2, metrics = _final_metrics(name)
    assert len(task2.eval_set("test")) == 4
    records = [{0: RunRecord(0, {"metrics": metrics})}]
    for claim in exp.claims():
        assert claim.measure.final_only
        (value,) = claim.measure(records).values()
        assert math.isfinite(value)


def test_fresh_eval_config_draws_new_held_out_sets_and_keeps_the_model():
    exp = registry.get("sih-eca-dedicated-det")
    cfg = exp.config("cpu", 0)
    fresh = exp.fresh_eval_config(cfg, 11, n=32)
    assert fresh.model == cfg.model and fresh.train == cfg.train and fresh.seed == cfg.seed
    assert (fresh.task.n_test, fresh.task.n_val, fresh.task.holdout) == (32, 32, cfg.task.holdout)
    own_seed = exp.fresh_eval_config(cfg, cfg.task.data_seed, n=32)  # even the run's own seed draws anew
    own = exp.build_task(dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, n_test=32)))
    new, same_seed = exp.build_task(fresh), exp.build_task(own_seed)
    prints = {exp.eval_fingerprint(None, t) for t in (own, new, same_seed)}
    assert len(prints) == 3
    test_pool = set(new.splits.rules("test").tolist())
    for t in (new, same_seed):
        ev = t.eval_set("test")
        assert set(numbers_of(ev.meta["tables"]).tolist()) <= test_pool  # held-out rules only
        assert is_covered(t.lattice, ev.meta["traj"], t.cfg.T0).all()
    assert exp.fresh_eval_config(cfg, 11).task.n_test == cfg.task.n_test


def test_the_runs_own_sets_are_drawn_as_before():
    """eval_seed None keeps the run's own sets: split i of EVAL_SPLITS from default_rng([data_seed, i + 1])."""
    exp = registry.get("sih-eca-shared-det")
    task = exp.build_task(exp.config("smoke", 0))
    ev = task.eval_set("test")
    tables, traj = task.trajectories(np.random.default_rng([task.cfg.data_seed, 2]), len(ev), "test", covered=True)
    np.testing.assert_array_equal(ev.meta["traj"], traj)


def test_computed_widths_meet_table_8():
    for claim in CLAIMS.values():
        if claim.where == "Table 8":
            m = measure_claim(claim, [])
            assert m.verdict == "met", (claim.id, m.value)


def test_eca_split_claims_compute_counts():
    classes = CLAIMS["spatial_induction/appI.1/eca-split/classes"]
    assert measure_claim(classes, []).verdict == "met"
    pools = [measure_claim(CLAIMS[f"spatial_induction/appI.1/eca-split/rules_{s}"], []).value
             for s in ("train", "val", "test")]
    assert sum(pools) == 256


def test_write_compiled_writes_a_run_the_compiled_claims_read(tmp_path):
    exp = registry.get("sih-compiled-eca-det")
    cfg = exp.config("paper", 0, ["task.grid=8", "task.T=5", "task.T0=3", "task.n_test=8"])
    results = exp.write_compiled(cfg, tmp_path / "c")
    assert json.loads((tmp_path / "c" / "results.json").read_text()) == results
    assert (tmp_path / "c" / "checkpoints" / "best.safetensors").exists()
    records = [{0: RunRecord(0, results, tmp_path / "c")}]
    for claim in exp.claims():
        if claim.runs:
            assert claim.runs[0].seeds == (0,)
            if not claim.runs[0].overrides:  # Construction I
                assert claim.target.met(claim.measure(records)[0]), claim.id
    with pytest.raises(Exception, match="already holds a run"):
        exp.write_compiled(cfg, tmp_path / "c")


def test_a_failing_compile_leaves_no_run_directory(tmp_path, monkeypatch):
    from tinyscope.studies.spatial_induction import compiled

    def boom(*a, **k):
        raise RuntimeError("grid check failed")

    monkeypatch.setattr(compiled, "grid_independence", boom)
    exp = registry.get("sih-compiled-eca-det")
    cfg = exp.config("paper", 0, ["task.grid=8", "task.T=5", "task.T0=3", "task.n_test=4"])
    with pytest.raises(RuntimeError):
        exp.write_compiled(cfg, tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_v3_grid_independence_covers_its_smallest_grid():
    from tinyscope.studies.spatial_induction.compiled import grid_independence

    exp = registry.get("sih-compiled-v3-det")
    rows = grid_independence("v3", exp.config("paper", 0))
    assert [r["grid"] for r in rows] == ["32", "64", "256"]
    assert {r["d_p"] for r in rows} == {5} and min(r["acc"] for r in rows) == 1.0
