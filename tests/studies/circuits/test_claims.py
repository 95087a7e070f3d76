"""The circuit-transformer claims: registered with the paper's numbers, runnable at their presets,
reading keys the final evaluation writes; Table 2's seed filter; fresh evaluation sets."""
import collections
import re

import numpy as np
import pytest

from tinyscope.runs import registry
from tinyscope.runs.claims import ClaimError, RunRecord, all_claims, measure_claim
from tinyscope.runs.rundir import build
from tinyscope.studies.circuits import claims as cc
from tinyscope.studies.circuits.construction import construct

CLAIMS = {c.id: c for c in all_claims("circuits")}
# typed again from shared/papers/seed003-details.md, Sec. 3
PAPER_SEEDS = (8739, 7520, 1936, 7439, 6210, 5650, 5395, 3140, 1243, 5353)
PAPER_VALUES = {
    "params/boolean/n_parameters": 280, "params/arithmetic/n_parameters": 924,
    "params/listops/n_parameters": 4416,
    "convergence/boolean/converged_seeds": 0.9, "convergence/arithmetic/converged_seeds": 1.0,
    "convergence/listops/converged_seeds": 0.9,
    "table2/learned-boolean/acc_d3": 0.55, "table2/learned-listops/acc_d2": 0.98,
    "table2/learned-arithmetic/acc_d10": 0.05, "table2/learned-listops/acc_d10": 0.07,
    "data/boolean/tokens_mean": 710.9, "data/listops/tokens_mean_depth30": 18376,
    "data/listops/depth1_expressions": 4400,
}
GRAMMARS = ("boolean", "arithmetic", "listops")


def test_every_headline_is_registered():
    by_where = collections.Counter(c.where for c in CLAIMS.values())
    assert by_where["Table 2"] == 3 * 3 * 3 and by_where["Parameter counts"] == 3 and by_where["Convergence"] == 3
    for g in GRAMMARS:
        for suffix in ("evaluation/{}/acc_depth3-30", "evaluation/{}/acc_depth30", "evaluation/{}/halts_after_d",
                       "weights/{}/pe_recovered", "data/{}/tokens_mean", "data/{}/tokens_mean_depth30"):
            assert f"circuits/{suffix.format(g)}" in CLAIMS
        for row in ("learned", "rope", "fire"):
            for d in (2, 3, 10):
                assert f"circuits/table2/{row}-{g}/acc_d{d}" in CLAIMS


def test_paper_values_are_the_papers():
    for suffix, value in PAPER_VALUES.items():
        assert CLAIMS[f"circuits/{suffix}"].paper.value == pytest.approx(value), suffix
    assert CLAIMS["circuits/data/arithmetic/tokens_mean"].paper.sd == pytest.approx(2725.3)
    for g in GRAMMARS:
        assert CLAIMS[f"circuits/evaluation/{g}/acc_depth30"].runs[0].seeds == PAPER_SEEDS
        assert CLAIMS[f"circuits/table2/learned-{g}/acc_d3"].runs[0].seeds == PAPER_SEEDS[:5]


def test_targets_are_the_stated_readings():
    t = CLAIMS["circuits/evaluation/arithmetic/acc_depth3-30"]
    assert (t.target.op, t.target.value, t.aggregate) == (">=", 1.0, "median")
    t = CLAIMS["circuits/convergence/boolean/converged_seeds"]
    assert (t.target.op, t.target.value, t.target.tol, t.aggregate) == ("within", 0.9, 0.1, "fraction")
    t = CLAIMS["circuits/table2/learned-boolean/acc_d10"].target
    assert (t.op, t.value, t.tol) == ("within", 0.48, 0.1)
    for row, v in (("rope", 0.12), ("fire", 0.44)):  # Table 2's Boolean d = 10 column
        c = CLAIMS[f"circuits/table2/{row}-boolean/acc_d10"]
        assert (c.target.value, c.runs[0].experiment) == (v, f"circuit-boolean-baseline-{row}")
    t = CLAIMS["circuits/data/boolean/tokens_mean"].target  # 3 SEs of the difference of 2,800-problem means
    assert t.tol == pytest.approx(3 * np.sqrt(2) * 914.7 / np.sqrt(2800), abs=0.1)


def test_each_experiment_owns_its_claims_and_every_run_set_builds():
    names = [n for n in registry.names() if n.startswith("circuit-")]
    assert sorted(c.id for n in names for c in registry.get(n).claims()) == sorted(CLAIMS)
    for name in names:
        assert all(c.experiment == name for c in registry.get(name).claims())
    seen = set()
    for claim in CLAIMS.values():
        crvnn = claim.experiment == "circuit-listops-crvnn"  # paper preset, depths 1-10 (test_crvnn.py)
        assert claim.note and claim.needs_gpu == (crvnn and claim.compute is None)
        for rs in claim.runs:
            if rs.key not in seen and not crvnn:
                seen.add(rs.key)
                cfg = registry.get(rs.experiment).config(rs.preset, rs.seeds[0], list(rs.overrides))
                assert cfg.seed == rs.seeds[0] == 8739 and cfg.task.eval_depths == list(range(3, 31))
    assert len(seen) == 12  # three circuit models and nine baselines (learned, RoPE, FIRE per task)


@pytest.fixture(scope="module")
def smoke_metrics():
    """Final metrics of a fresh model of every circuit experiment on a fresh 3-per-depth set."""
    out = {}
    for name in [n for n in registry.names() if n.startswith("circuit-")]:
        exp = registry.get(name)
        fresh = exp.fresh_eval_config(exp.config("smoke"), 5, 3)
        task, model = build(exp, fresh)
        out[name] = exp.final_evaluation(fresh, task, model)
    return out


def _keys(claim) -> list[str]:
    if claim.measure.key:
        return [claim.measure.key]
    label = claim.measure.label
    if label.startswith("mean of"):
        return [f"depth{d}_tokens_mean" for d in cc.EVAL_DEPTHS]
    return [label.split(" ")[0], "train_depth1_acc", "train_depth2_acc"]  # reported_seeds(key)


def test_every_metric_a_claim_reads_is_written_by_the_final_evaluation(smoke_metrics):
    """Smoke runs evaluate depths 3 and 4: a per-depth key is checked at depth 3 for any depth of
    the claim's preset."""
    for claim in CLAIMS.values():
        if claim.compute is not None:
            continue
        rs = claim.runs[0]
        depths = registry.get(rs.experiment).config(rs.preset).task.eval_depths
        for key in _keys(claim):
            m = re.fullmatch(r"depth(\d+)_(.+)", key)
            if m:
                assert int(m.group(1)) in depths, (claim.id, key)
                key = f"depth3_{m.group(2)}"
            assert key in smoke_metrics[rs.experiment], (claim.id, key)


def test_table2_reports_only_seeds_that_learned_both_training_depths():
    claim = CLAIMS["circuits/table2/learned-boolean/acc_d3"]
    rec = lambda s, d1, d2, acc: RunRecord(s, {"metrics": {"train_depth1_acc": d1, "train_depth2_acc": d2,  # noqa: E731
                                                           "depth3_acc": acc}})
    runs = [{1: rec(1, 1.0, 0.96, 0.5), 2: rec(2, 1.0, 0.90, 0.9), 3: rec(3, 0.97, 1.0, 0.6)}]
    m = measure_claim(claim, runs)
    assert m.per_seed == {1: 0.5, 3: 0.6} and m.value == pytest.approx(0.55) and m.verdict == "met"
    with pytest.raises(ClaimError, match="none of seeds"):
        claim.measure([{2: rec(2, 1.0, 0.90, 0.9)}])
    assert measure_claim(claim, [{}]).verdict == "not run"


def test_the_construction_is_exact_on_the_new_metrics():
    """The hand-set model: right at every training and evaluation depth, halting after exactly d."""
    exp = registry.get("circuit-boolean")
    cfg = exp.config("smoke")
    metrics = exp.final_evaluation(cfg, exp.build_task(cfg), construct("boolean"))
    assert metrics["train_depth1_acc"] == metrics["train_depth2_acc"] == 1.0
    assert metrics["eval_acc_min"] == metrics["eval_halt_exact_min"] == 1.0
    assert cc.construction_accuracy("boolean", depths=(3, 5)) == 1.0
    untrained = build(exp, cfg)[1]
    assert exp.final_evaluation(cfg, exp.build_task(cfg), untrained)["eval_acc_min"] < 1.0


@pytest.mark.parametrize("name", ["circuit-listops", "circuit-arithmetic-baseline"])
def test_fresh_eval_config_draws_new_problems_at_the_same_depths(name):
    exp = registry.get(name)
    cfg = exp.config("smoke")
    fresh = exp.fresh_eval_config(cfg, cfg.task.data_seed, 4)  # even the run's own seed draws anew
    assert fresh.model == cfg.model and fresh.train == cfg.train and fresh.eval == cfg.eval
    assert getattr(fresh, "baseline", None) == getattr(cfg, "baseline", None)
    assert (fresh.task.eval_depths, fresh.task.eval_per_depth, fresh.task.p_deep) == \
        (cfg.task.eval_depths, 4, cfg.task.p_deep)
    own, new = exp.build_task(cfg), exp.build_task(fresh)
    assert exp.eval_fingerprint(cfg, own) != exp.eval_fingerprint(fresh, new)
    for d in cfg.task.eval_depths:
        assert len(new.eval_set(d)) == 4 and set(new.eval_set(d).depths) == {d}
    # the training data are the run's own
    assert np.array_equal(own._epoch_sets(cfg.seed, 0)[1].tokens, new._epoch_sets(cfg.seed, 0)[1].tokens)


def test_numbers_computed_from_code_match_the_paper():
    for suffix in ("params/boolean/n_parameters", "params/listops/n_parameters", "data/listops/depth1_expressions"):
        assert measure_claim(CLAIMS[f"circuits/{suffix}"], []).verdict == "met", suffix
