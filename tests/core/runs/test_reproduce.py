"""`tinyscope reproduce` end to end on the smoke preset: plan, run (through the sweep
machinery), measure, write claims.json / claims.md, record a ledger, export a zoo entry and
re-evaluate it with `tinyscope eval zoo:NAME --seed S`; a rerun trains nothing."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from tinyscope.cli import main
from tinyscope.runs import claims as claims_mod
from tinyscope.runs import ledger, reproduce, zoo


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    chosen = claims_mod.select(["minimal/fig3/rule_error", "minimal/table1/n_parameters"])
    plan = reproduce.plan(chosen, out, preset="smoke", n_seeds=2)
    result = reproduce.execute(plan, jobs=2, progress=False)
    return plan, result, reproduce.collect(plan)


def test_plan_has_one_run_per_seed_and_the_computed_claim(done):
    plan, result, _ = done
    assert [r.seed for r in plan.runs] == [0, 1]
    assert all(r.spec.preset == "smoke" and r.spec.rel_path.startswith("runs/plus-last-even-smoke/") for r in plan.runs)
    assert result.done == 2 and not result.failed


def test_claims_are_measured_from_the_runs(done, tmp_path):
    plan, _, results = done
    by_id = {r.claim.id: r for r in results}
    rule = by_id["minimal/fig3/rule_error"].measurement
    assert rule.n == 2 and set(rule.per_seed) == {0, 1}
    for seed, v in rule.per_seed.items():
        on_disk = json.loads((plan.run_dir(plan.claims[0].runs[0], seed) / "results.json").read_text())
        assert v == on_disk["metrics"]["rule_error"]
    assert by_id["minimal/table1/n_parameters"].measurement.value == 250.0
    assert by_id["minimal/table1/n_parameters"].measurement.verdict == "met"
    json_path, md_path = reproduce.write_outputs(plan, results)
    rows = {r["id"]: r for r in json.loads(json_path.read_text())["claims"]}
    assert rows["minimal/fig3/rule_error"]["n"] == 2
    assert "minimal/table1/n_parameters" in md_path.read_text()


def test_rerun_trains_nothing(done):
    plan, _, _ = done
    again = reproduce.execute(reproduce.plan(plan.claims, plan.out, n_seeds=2), jobs=1, progress=False)
    assert again.skipped == 2 and again.done == 0


def test_collect_only_measures_the_finished_runs_and_starts_none(done, capsys):
    """--collect-only with a third seed that never ran: the claim is measured on the two
    finished ones, nothing is trained, and claims.json says n = 2."""
    plan, _, _ = done
    (plan.out / "claims.json").unlink(missing_ok=True)
    assert main(["reproduce", "minimal/fig3/rule_error", "--preset", "smoke", "--n-seeds", "3", "--collect-only",
                 "--no-record", "--no-progress", "--out", str(plan.out)]) == 0
    assert "1 of 3 run(s) are not finished" in capsys.readouterr().err
    rows = {r["id"]: r for r in json.loads((plan.out / "claims.json").read_text())["claims"]}
    assert rows["minimal/fig3/rule_error"]["n"] == 2
    assert not plan.run_dir(plan.claims[0].runs[0], 2).exists()
    assert main(["reproduce", "minimal", "--collect-only", "--dry-run", "--out", str(plan.out)]) == 2


def test_a_run_of_an_older_preset_is_not_counted_and_not_reused(done, tmp_path):
    """A finished run whose config.json is not the training its preset does today (the preset
    changed since) is neither measured nor skipped as complete: the plan names it, execute refuses."""
    import shutil

    from tinyscope.errors import TinyscopeError

    plan, _, _ = done
    out = tmp_path / "copy"
    shutil.copytree(plan.out, out)
    again = reproduce.plan(plan.claims, out, n_seeds=2)
    assert not again.stale() and all(again.is_done(r) for r in again.runs)
    cfg_path = out / again.runs[1].spec.rel_path / "config.json"
    record = json.loads(cfg_path.read_text())
    record["config"]["train"]["lr"] *= 2  # as if trained by an older version of the smoke preset
    cfg_path.write_text(json.dumps(record))
    assert [r.seed for r in again.stale()] == [1] and not again.is_done(again.runs[1])
    assert "older version of their preset" in reproduce.format_plan(again, jobs=1)
    rule = {r.claim.id: r for r in reproduce.collect(again)}["minimal/fig3/rule_error"].measurement
    assert set(rule.per_seed) == {0}
    with pytest.raises(TinyscopeError, match="older version of their preset"):
        reproduce.execute(again, jobs=1, progress=False)


def test_record_writes_a_ledger_only_at_the_claims_own_preset(done, tmp_path):
    plan, _, results = done
    written = reproduce.record(plan, results, "tinyscope reproduce minimal --preset smoke", root=tmp_path)
    data = ledger.read_ledger("minimal", tmp_path)
    assert "minimal/fig3/rule_error" not in data["claims"]        # ran at smoke, its preset is cpu
    assert data["claims"]["minimal/table1/n_parameters"]["verdict"] == "met"  # computed: no preset
    assert written == [ledger.ledger_path("minimal", tmp_path)]


def test_record_leaves_a_claim_out_until_all_its_seeds_are_finished(done, tmp_path, monkeypatch):
    """A claim of two seeds measured while one run is still missing is shown (n = 1) but not
    written to the ledger; with both finished it is."""
    plan, _, results = done
    rule = next(r for r in results if r.claim.id == "minimal/fig3/rule_error")
    monkeypatch.setattr(reproduce, "all_claims", lambda *a: [dataclasses.replace(
        rule.claim, runs=(dataclasses.replace(rule.claim.runs[0], seeds=(0, 1)),))])
    one_seed = dataclasses.replace(rule, run_dirs={0: rule.run_dirs[0]})
    assert reproduce.record(plan, [one_seed], "cmd", root=tmp_path) == []
    reproduce.record(plan, [rule], "cmd", root=tmp_path)
    rec = ledger.read_ledger("minimal", tmp_path)["claims"]["minimal/fig3/rule_error"]
    assert rec["n"] == 2 and rec["machine"] == ledger.machine()  # where the runs trained: this CPU


def test_the_ledger_names_the_hardware_the_runs_trained_on(done, tmp_path):
    """Runs trained elsewhere (a GPU machine) and collected here are recorded with their own
    hardware, from results.json; runs on two kinds of machine name both."""
    plan, _, results = done
    rule = next(r for r in results if r.claim.id == "minimal/fig3/rule_error")
    assert all(json.loads((d / "results.json").read_text())["hardware"] == ledger.machine()
               for d in rule.run_dirs.values())
    moved = {}
    for seed, d in rule.run_dirs.items():
        (tmp_path / str(seed)).mkdir()
        res = json.loads((d / "results.json").read_text())
        res["hardware"] = "Some CPU (16 cores), NVIDIA H200" if seed == 0 else res["hardware"]
        (tmp_path / str(seed) / "results.json").write_text(json.dumps(res))
        moved[seed] = tmp_path / str(seed)
    assert ledger.runs_hardware([moved[0]]) == "Some CPU (16 cores), NVIDIA H200"
    assert ledger.runs_hardware(moved.values()) == "; ".join(sorted({"Some CPU (16 cores), NVIDIA H200", ledger.machine()}))


def test_zoo_export_and_fresh_recheck(done, tmp_path, monkeypatch, capsys):
    plan, _, results = done
    monkeypatch.setenv("TINYSCOPE_ZOO", str(tmp_path / "zoo"))
    (tmp_path / "zoo").mkdir()
    rule = next(r for r in results if r.claim.id == "minimal/fig3/rule_error")
    seed = min(rule.measurement.per_seed)
    entry = reproduce.export_entry(plan.run_dir(rule.claim.runs[0], seed), "ple-smoke", [rule.claim.id], "tinyscope run ...")
    assert entry.info["dtype"] == "float32" and entry.size_bytes < 2**20
    assert [e.name for e in zoo.entries()] == ["ple-smoke"]
    assert main(["eval", "zoo:ple-smoke", "--seed", "12345", "--n", "20"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert fresh["eval_seed"] == 12345 and "rule_error" in fresh["metrics"]
    own = json.loads((entry.path / "results.json").read_text())
    assert fresh["eval_fingerprint"] != own["eval_fingerprint"]
    assert main(["eval", "zoo:ple-smoke"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["rule_error"] == own["metrics"]["rule_error"]


@pytest.mark.parametrize("mode", ["median", "all", "none"])
def test_export_zoo_writes_the_median_seed_every_seed_or_none(done, tmp_path, monkeypatch, mode):
    """A met claim's ``zoo``: "median" writes one entry named for the run set, "all" one per
    finished seed (``-s<seed>``, the ledger naming the median's), "none" writes nothing."""
    plan, _, results = done
    monkeypatch.setenv("TINYSCOPE_ZOO", str(tmp_path / "zoo"))
    (tmp_path / "zoo").mkdir()
    rule = next(r for r in results if r.claim.id == "minimal/fig3/rule_error")
    met = dataclasses.replace(rule, claim=dataclasses.replace(rule.claim, zoo=mode, target=claims_mod.at_most(math.inf)),
                              measurement=dataclasses.replace(rule.measurement, verdict="met"))
    monkeypatch.setattr(reproduce, "recordable", lambda results: results)  # smoke runs stand in for the claim's own
    named = reproduce.export_zoo(plan, [met])
    base, median = "plus-last-even-smoke", met.zoo_seed
    expected = {"median": [base], "all": [f"{base}-s0", f"{base}-s1"], "none": []}[mode]
    entries = zoo.entries()
    assert [e.name for e in entries] == expected
    assert sorted(e.info["seed"] for e in entries) == ([median] if mode == "median" else [0, 1] if mode == "all" else [])
    assert all(e.info["claims"] == ["minimal/fig3/rule_error"] for e in entries)
    assert named == ({} if mode == "none" else {"minimal/fig3/rule_error": base if mode == "median" else f"{base}-s{median}"})


def test_a_check_on_fewer_seeds_than_the_claim_lists_is_neither_recorded_nor_exported(done, tmp_path, monkeypatch):
    """Two finished seeds of a claim that lists ten (``--collect-only`` while runs are to come):
    a met check, which neither the ledger nor the zoo keeps; all ten make it recordable."""
    plan, _, results = done
    monkeypatch.setenv("TINYSCOPE_ZOO", str(tmp_path / "zoo"))
    (tmp_path / "zoo").mkdir()
    rule = next(r for r in results if r.claim.id == "minimal/fig3/rule_error")
    own = next(c for c in claims_mod.all_claims() if c.id == rule.claim.id)
    check = dataclasses.replace(rule, claim=dataclasses.replace(own, target=claims_mod.at_most(math.inf)),
                                measurement=dataclasses.replace(rule.measurement, verdict="met"))
    assert len(check.run_dirs) == 2 < len(own.runs[0].seeds)
    assert reproduce.recordable([check]) == [] and reproduce.export_zoo(plan, [check]) == {} and zoo.entries() == []
    some_dir = next(iter(check.run_dirs.values()))
    full = dataclasses.replace(check, run_dirs={s: some_dir for s in own.runs[0].seeds})
    assert reproduce.recordable([full]) == [full]
    on_smoke = dataclasses.replace(full, claim=full.claim.at("smoke"))
    assert reproduce.recordable([on_smoke]) == []


def test_the_zoo_seed_of_a_met_claim_meets_the_target_itself(done):
    """A claim met by the median (or a fraction) of its seeds exports a seed that meets it: the
    median of those that do, never a failed seed that happens to sit in the middle."""
    _, _, results = done
    rule = next(r for r in results if r.claim.id == "minimal/fig3/rule_error")
    per_seed = {0: 0.1, 1: 0.9}
    for cut, wanted in [(0.5, 0), (0.95, 0), (0.05, None)]:
        r = dataclasses.replace(rule, claim=dataclasses.replace(rule.claim, target=claims_mod.at_most(cut)),
                                measurement=dataclasses.replace(rule.measurement, verdict="met", per_seed=per_seed))
        assert r.zoo_seed == wanted
    high = dataclasses.replace(rule, claim=dataclasses.replace(rule.claim, target=claims_mod.at_least(0.5)),
                               measurement=dataclasses.replace(rule.measurement, verdict="met", per_seed=per_seed))
    assert high.zoo_seed == 1 and set(high.zoo_seeds) == {1}


def test_a_large_entry_is_stored_in_fp16_unless_a_weight_is_past_its_range():
    import torch

    small = {"w": torch.tensor([1.0, -37.3]), "steps": torch.tensor([70000])}
    assert zoo.half_dtype(small) == "float16"      # integer buffers do not count
    assert zoo.half_dtype({"w": torch.tensor([1.0, -7e4])}) == "bfloat16"
    assert zoo.half_dtype({}) == "float16"


def test_a_claim_names_a_known_zoo_choice():
    from tinyscope.errors import ConfigError

    claim = claims_mod.select(["minimal/fig3/rule_error"])[0]
    with pytest.raises(ConfigError, match="zoo 'every' must be one of median, all, none"):
        dataclasses.replace(claim, zoo="every")


def test_bad_inputs_are_one_line_errors(capsys, tmp_path):
    assert main(["reproduce", "no-such-study", "--dry-run"]) == 2
    assert "neither a study" in capsys.readouterr().err
    assert main(["reproduce", "minimal", "--n-seeds", "0", "--dry-run", "--out", str(tmp_path)]) == 2
    assert main(["eval", "zoo:nothing-here"]) == 2
    assert "no zoo entry" in capsys.readouterr().err
    assert main(["claims", "no-such-study"]) == 2


def test_dry_run_plans_every_study(capsys, tmp_path):
    assert main(["reproduce", *sorted({c.study for c in claims_mod.all_claims()}), "--dry-run",
                 "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "claim(s)" in err and "estimated time" in err
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def test_claims_command_lists_every_claim_in_each_format(capsys):
    every = claims_mod.all_claims()
    assert main(["claims", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [c.id for c in every]
    assert all(r["verdict"] in ("met", "not met", "not run", "needs GPU") for r in rows)
    assert main(["claims", "minimal"]) == 0
    out = capsys.readouterr().out
    assert "minimal/fig3/rule_error" in out and "spatial_induction/" not in out
    assert main(["claims", "minimal", "--format", "markdown"]) == 0
    assert "| `minimal/table1/n_parameters` |" in capsys.readouterr().out


def test_claims_that_read_the_chosen_runs_are_measured_with_them(tmp_path):
    """Reproducing Table 1's Shared-head ECA row plans the runs Table 13's cells of the same
    experiment read; those claims join the plan (and its ledger record), those of other runs do not."""
    chosen = claims_mod.select(["spatial_induction/table1/eca-shared-det"])
    plan = reproduce.plan(chosen, tmp_path, preset="cpu")
    added = {c.id for c in plan.companions}
    assert "spatial_induction/table13/eca-shared-det/tf_seq_acc" in added
    assert {c.id for c in chosen} <= {c.id for c in plan.claims} and added <= {c.id for c in plan.claims}
    keys = {r.run_set.key for r in plan.runs}
    assert all(rs.key in keys for c in plan.companions for rs in c.runs)
    assert "because they read the same runs" in reproduce.format_plan(plan, jobs=1)


def test_an_unknown_preset_is_one_line_not_a_plan_that_leaves_everything_out(capsys):
    assert main(["reproduce", "theia", "--preset", "bogus", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--preset bogus" in err[0] and "cpu" in err[0]


def test_an_unrecorded_setting_is_estimated_from_its_recorded_siblings():
    """The median over the same experiment and preset at other --set values, each scaled by its
    own calibration; another preset or experiment does not count, nor does the key itself."""
    timings = {
        "exp|cpu": {"wall_time_s": [100.0, 300.0], "calibration_s": 1.0},
        "exp|cpu|a=1": {"wall_time_s": [400.0], "calibration_s": 2.0},
        "exp|cpu|a=2": {"wall_time_s": [1000.0], "calibration_s": 1.0},
        "exp|paper": {"wall_time_s": [9e9], "calibration_s": 1.0},
        "exp2|cpu": {"wall_time_s": [9e9], "calibration_s": 1.0},
    }
    assert ledger.estimate(timings, "exp|cpu|b=1", 1.0) is None
    assert ledger.estimate_from_siblings(timings, "exp|cpu|b=1", 1.0) == 200.0  # median of 200, 200, 1000
    assert ledger.estimate_from_siblings(timings, "exp|cpu|a=2", 1.0) == 200.0  # median of 200, 200
    assert ledger.estimate_from_siblings(timings, "exp|gpu", 1.0) is None


def test_siblings_that_share_more_settings_make_the_estimate():
    """Only the recorded settings with the most --set items in common count: a standard model at
    a new n is estimated from the standard model at other n, not from a much faster variant."""
    timings = {
        "exp|cpu|arch=small|n=20": {"wall_time_s": [10.0], "calibration_s": 1.0},
        "exp|cpu|arch=small|n=30": {"wall_time_s": [12.0], "calibration_s": 1.0},
        "exp|cpu|opt=muon": {"wall_time_s": [1000.0], "calibration_s": 1.0},
        "exp|cpu|n=30|opt=muon": {"wall_time_s": [1400.0], "calibration_s": 1.0},
    }
    assert ledger.estimate_from_siblings(timings, "exp|cpu|n=10|opt=muon", 1.0) == 1200.0  # 1000 and 1400 share opt
    assert ledger.estimate_from_siblings(timings, "exp|cpu|arch=small|n=10", 1.0) == 11.0
    assert ledger.estimate_from_siblings(timings, "exp|cpu|n=40|opt=muon", 1.0) == 1200.0


def test_the_plan_marks_an_estimate_made_from_other_settings(capsys, tmp_path, monkeypatch):
    """A ledger that records `theia-kleene --preset cpu` but no P_unk = 0.05 run: the plan shows a
    "≈" estimate for it and says what the mark means."""
    timings = {"theia-kleene|cpu": {"wall_time_s": [3000.0], "calibration_s": 1.0}}
    monkeypatch.setattr(ledger, "read_ledger", lambda study: {"study": study, "claims": {}, "timings": timings})
    monkeypatch.setattr(ledger, "calibrate", lambda: 1.0)
    assert main(["reproduce", "theia/ablations/p_unk_0_05/rules12", "--preset", "cpu", "--out", str(tmp_path),
                 "--dry-run"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "≈50 min  ≈1.7 h" in text and "at 1 job(s): ≈1.7 h" in text
    assert "≈: no run of that setting recorded" in text


def test_the_plan_time_is_the_makespan_of_the_runs_handed_out_in_order():
    assert reproduce.makespan([30.0, 30.0, 30.0], 2) == 60.0
    assert reproduce.makespan([30.0, 30.0, 30.0], 3) == 30.0
    assert reproduce.makespan([10.0, 50.0, 20.0, 20.0], 2) == 50.0  # 10+20+20 on one worker, 50 on the other
    assert reproduce.makespan([], 2) == 0.0
    assert reproduce.makespan([5.0, 5.0], 0) == 10.0


def test_a_claims_time_to_target_is_kept_beside_its_value():
    """A fraction-of-seeds claim with a time_to_target measure: the extras hold each seed's time
    (a seed that never got there as "inf") and their median."""
    times = claims_mod.Measure("seconds", lambda runs: {42: 3000.0, 123: math.inf, 7: 1000.0})
    c = claims_mod.Claim("minimal/test/reached", "Test", "reaches it", claims_mod.PaperValue("–"),
                         claims_mod.at_least(1.0), runs=(claims_mod.RunSet("plus-last-even", "smoke", (), (7, 42, 123)),),
                         measure=claims_mod.reached("rule_error", "<=", 0.0), aggregate="fraction",
                         time_to_target=times)
    m = claims_mod.Measurement(2 / 3, math.nan, 3, {7: 1.0, 42: 1.0, 123: 0.0}, "not met")
    extras = reproduce._extras(c, {}, m)
    assert extras["seeds_met"] == 2 and extras["median_time_to_target_s"] == 3000.0
    assert extras["time_to_target_s"] == {"7": 1000.0, "42": 3000.0, "123": "inf"}


def test_collecting_the_same_runs_again_keeps_their_first_calibration():
    data = {"timings": {}}
    ledger.record_timing(data, "exp|cpu", [100.0, 200.0], 0.05)
    ledger.record_timing(data, "exp|cpu", [100.0, 200.0], 0.09)  # collected again on a busier machine
    assert data["timings"]["exp|cpu"]["calibration_s"] == 0.05
    ledger.record_timing(data, "exp|cpu", [100.0, 300.0], 0.09)  # a rerun: new times, new calibration
    assert data["timings"]["exp|cpu"]["calibration_s"] == 0.09
