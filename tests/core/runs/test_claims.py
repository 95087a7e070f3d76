"""The claims API: measures, pooling over seeds, targets, verdicts, selection, and every
registered claim being well formed (its experiment, preset and --set values exist)."""
from __future__ import annotations

import json
import math

import pytest

from tinyscope.errors import ConfigError
from tinyscope.runs import registry
from tinyscope.runs.claims import (
    CLAIM_ERRORS,
    Claim,
    ClaimError,
    PaperValue,
    RunRecord,
    RunSet,
    all_claims,
    at_least,
    at_most,
    difference,
    measure_claim,
    median_seed,
    metric,
    pool,
    ratio,
    reached,
    select,
    time_to,
    within,
    within_run,
)


def _records(values: dict[int, float], key="acc") -> dict[int, RunRecord]:
    return {s: RunRecord(s, {"metrics": {key: v}, "n_parameters": 10}) for s, v in values.items()}


def _claim(**kw) -> Claim:
    base = dict(id="minimal/test/acc", where="Table 9", statement="s", paper=PaperValue("99%", 0.99),
                target=at_least(0.95), runs=(RunSet("plus-last-even"),), measure=metric("acc"))
    base.update(kw)
    return Claim(**base)


def test_mean_and_sample_sd_over_seeds():
    m = measure_claim(_claim(), [_records({0: 0.90, 1: 1.0, 2: 0.98})])
    assert m.n == 3 and m.value == pytest.approx(0.96)
    assert m.sd == pytest.approx(math.sqrt(((0.06 ** 2) + (0.04 ** 2) + (0.02 ** 2)) / 2))
    assert m.verdict == "met"
    assert measure_claim(_claim(target=at_least(0.97)), [_records({0: 0.90, 1: 1.0, 2: 0.98})]).verdict == "not met"


def test_median_fraction_min_max():
    vals = [0.1, 0.5, 0.2, 0.9]
    assert pool(vals, "median")[0] == pytest.approx(0.35)
    assert pool(vals, "min")[0] == 0.1 and pool(vals, "max")[0] == 0.9
    frac = measure_claim(_claim(measure=reached("acc", ">=", 0.5), aggregate="fraction", target=at_least(0.5)),
                         [_records({0: 0.1, 1: 0.5, 2: 0.2, 3: 0.9})])
    assert frac.value == 0.5 and frac.per_seed == {0: 0.0, 1: 1.0, 2: 0.0, 3: 1.0} and frac.verdict == "met"


def test_targets():
    assert at_most(0.01).met(0.01) and not at_most(0.01).met(0.011)
    assert at_most(0.01).met(0.015, slack=0.01)
    assert within(250, 0.5).met(250.4) and not within(250, 0.5).met(251)
    assert not at_least(0).met(math.nan)
    with pytest.raises(ConfigError):
        within(1.0, 0.0)


def test_paired_measures_pair_by_seed():
    a, b = _records({0: 0.9, 1: 0.8, 2: 0.7}), _records({1: 0.4, 2: 0.35, 3: 0.1})
    assert ratio("acc", "acc")([a, b]) == {1: pytest.approx(2.0), 2: pytest.approx(2.0)}
    assert difference("acc", "acc")([a, b]) == {1: pytest.approx(0.4), 2: pytest.approx(0.35)}


def test_within_run_reads_several_keys_of_one_run():
    runs = [{s: RunRecord(s, {"metrics": {"l0": 0.9 - s / 10, "l1": 0.2}}) for s in (0, 1)}]
    gap = within_run("l0 − l1", lambda a, b: a - b, "l0", "l1")
    assert gap(runs) == {0: pytest.approx(0.7), 1: pytest.approx(0.6)} and gap.final_only
    assert difference("l0", "l1")(runs) == {}  # combine pairs RunSets: one RunSet gives no value


def test_top_level_and_dotted_keys_and_missing_metric():
    rec = RunRecord(0, {"metrics": {"acc": 1.0}, "n_parameters": 250, "phases": [{"steps": 7}]})
    assert rec.value("n_parameters") == 250 and rec.value("phases.0.steps") == 7
    with pytest.raises(ClaimError, match="no metric 'nope'"):
        rec.value("nope")


def test_time_to_reads_the_training_log(tmp_path):
    lines = [{"step": 0, "split": "eval", "err": 0.9}, {"step": 100, "split": "train", "time": 10.0},
             {"step": 200, "split": "train", "time": 20.0}, {"step": 150, "split": "eval", "err": 0.005},
             {"step": 200, "split": "eval", "err": 0.0}]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    runs = [{0: RunRecord(0, {}, tmp_path)}]
    assert time_to("err", "<=", 0.01)(runs) == {0: pytest.approx(15.0)}
    assert time_to("err", "<=", 0.01, clock="step")(runs) == {0: 150.0}
    assert time_to("err", "<=", -1.0)(runs) == {0: math.inf}


def test_unmeasured_claims_say_why():
    assert measure_claim(_claim(), [{}]).verdict == "not run"
    assert measure_claim(_claim(needs_gpu=True), [{}]).verdict == "needs GPU"
    computed = _claim(runs=(), measure=None, compute=lambda: 250.0, target=within(250, 0.5), experiment="plus-last-even")
    assert measure_claim(computed, []).verdict == "met"


def test_median_seed_and_seed_lists():
    assert median_seed({3: 0.5, 1: 0.1, 2: 0.9}) == 3
    assert median_seed({0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}) == 1
    rs = RunSet("plus-last-even", seeds=(42, 123, 7))
    assert rs.seed_list(2) == [42, 123] and rs.seed_list(5) == [42, 123, 7, 124, 125]


def test_malformed_claims_are_refused():
    with pytest.raises(ConfigError, match="id"):
        _claim(id="no slashes")
    with pytest.raises(ConfigError, match="aggregate"):
        _claim(aggregate="mode")
    with pytest.raises(ConfigError, match="measure"):
        _claim(measure=None)
    with pytest.raises(ConfigError, match="distinct"):
        RunSet("x", seeds=(1, 1))


def test_select_by_study_id_and_prefix():
    assert {c.study for c in select(["minimal"])} == {"minimal"}
    assert [c.id for c in select(["minimal/fig3/rule_error"])] == ["minimal/fig3/rule_error"]
    assert {c.id for c in select(["minimal/fig3"])} >= {"minimal/fig3/rule_error"}
    assert {c.experiment for c in select(["plus-last-even"])} == {"plus-last-even"}
    with pytest.raises(ConfigError, match="neither a study"):
        select(["nonsense/claim"])


CLAIMS = all_claims()


def test_every_study_declares_claims_and_none_fails_to_load():
    assert not CLAIM_ERRORS, CLAIM_ERRORS
    assert {c.study for c in CLAIMS} == set(registry.study_names())


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_claim_is_well_formed(claim):
    exp = registry.get(claim.experiment)
    assert claim.study == exp.study, f"{claim.id} is owned by {exp.name} of study {exp.study}"
    assert claim in exp.claims()
    assert claim.paper.text
    for rs in claim.runs:
        run_exp = registry.get(rs.experiment)
        assert run_exp.study == claim.study
        run_exp.config(rs.preset, rs.seeds[0], list(rs.overrides))  # raises on a bad preset or --set value
        if claim.needs_gpu:
            assert rs.preset == "paper", f"{claim.id} needs a GPU but runs preset {rs.preset}"


def test_training_metrics_are_not_rechecked_on_a_fresh_set():
    """A metric of the training (a curriculum's stages reached, a run entry) is not final_only, so
    no zoo entry is exported for it; a final evaluation metric is."""
    assert metric("test_acc").final_only
    assert not metric("stages_reached", of_training=True).final_only
    assert not metric("wall_time").final_only
    from tinyscope.studies.log_icot import claims as log_icot_claims  # noqa: F401  (registers them)

    stages = [c for c in all_claims("log_icot") if c.measure is not None and c.measure.key == "stages_reached"]
    assert stages and not any(c.measure.final_only for c in stages)


def test_a_missing_metric_is_one_short_line():
    """The error names the missing metric and a few of those present, not all of a run's hundreds."""
    from tinyscope.runs.claims import ClaimError, RunRecord

    record = RunRecord(0, {"metrics": {f"depth{d}_acc": 1.0 for d in range(3, 31)}})
    with pytest.raises(ClaimError) as info:
        record.value("train_depth1_acc")
    message = str(info.value)
    assert "'train_depth1_acc'" in message and "and 20 more" in message and len(message) < 250
