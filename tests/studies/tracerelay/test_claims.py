"""The TraceRelay claims: registered with the paper's numbers, runnable at their presets, reading
keys the final evaluation writes; fresh final evaluation sets; the numbers computed from code."""
import collections
import re

import pytest

from tinyscope.runs import registry
from tinyscope.runs.claims import RunRecord, all_claims, measure_claim
from tinyscope.runs.rundir import build
from tinyscope.studies.tracerelay import claims as tr

CLAIMS = {c.id: c for c in all_claims("tracerelay")}
EXPERIMENTS = (tr.ER_ON, tr.ER_OFF, tr.DYCK, tr.MF)

# cells typed again from the paper text: (value, sd) in percent
PAPER_CELLS = {
    "table1/equal-repeats-on-dc16/acc_id": (99.69, 0.13),     # Table 1, Equal Repeats, On, 16, ID
    "table1/equal-repeats-off-dc32/acc_ood": (37.65, 0.23),   # Table 1, Equal Repeats, Off, 32, OOD
    "table1/dyck-dc32/acc_ood": (89.48, 0.82),                # Table 1, Dyck, 32, OOD
    "table1/most-freq-dc64/acc_ood": (55.60, 12.82),          # Table 1, Most-Freq, 64, OOD
    "sec4/dyck-dc64/acc_4096": (76.34, 1.81),                 # Sec. 4 and the abstract
    "sec4/most-freq-dc16/acc_512": (94.79, 0.59),             # Sec. 4
    "table3/dist513-1024-dc64/acc_4096": (27.70, 6.14),       # Table 3, distance 513-1024, d_c = 64
    "table3/depth10-dc16/acc_4096": (75.68, 13.07),           # Table 3, depth 10, d_c = 16
    "table4/termination-dc32/termination_1024": (96.22, 5.36),  # Table 4, termination, d_c = 32
}
PAPER_COUNTS = {"table5/dyck-dc16/n_parameters": 257928, "table5/equal-repeats-on-dc64/n_parameters": 295875,
                "table5/most-freq-dc32/n_parameters": 268806, "sec4/ablation/max_input_lag": 69}


def test_every_cell_of_tables_1_3_4_and_5_is_registered():
    by_where = collections.Counter(c.where for c in CLAIMS.values())
    assert by_where["Table 1"] == 12 * 2 and by_where["Table 4"] == 5 * 3
    assert by_where["Table 3"] == 19 * 3 + 1 and by_where["Table 5"] == 4 * 3
    for exp in EXPERIMENTS:
        for d_c in (64, 32, 16):
            for col in ("acc_id", "acc_ood"):
                assert f"tracerelay/table1/{tr.TASKS[exp][0]}-dc{d_c}/{col}" in CLAIMS
    for d_c in (64, 32, 16):  # the ablation, per width
        for name in ("inheritance-gain-dc{}/acc_id", "inheritance-dc{}/acc_512", "inheritance-gain-dc{}/acc_512",
                     "ablation-ahead-dc{}/acc_1024", "ablation-dc{}/steps", "inheritance-dc{}/steps"):
            assert f"tracerelay/sec4/{name.format(d_c)}" in CLAIMS


def test_paper_values_are_the_papers():
    for suffix, (value, sd) in PAPER_CELLS.items():
        paper = CLAIMS[f"tracerelay/{suffix}"].paper
        assert (paper.value, paper.sd) == (pytest.approx(value / 100), pytest.approx(sd / 100)), suffix
    for suffix, value in PAPER_COUNTS.items():
        assert CLAIMS[f"tracerelay/{suffix}"].paper.value == value, suffix
    assert CLAIMS["tracerelay/sec4/inheritance-gain-dc16/acc_id"].paper.value == pytest.approx(0.4897)
    assert CLAIMS["tracerelay/sec4/most-freq-dc32/steps"].paper.value == pytest.approx(4000)


def test_targets_are_the_stated_readings():
    t = CLAIMS["tracerelay/table1/equal-repeats-off-dc16/acc_id"].target  # 50.73 ± 0.52: twice the SD
    assert (t.op, t.value, t.tol) == ("within", pytest.approx(0.5073), pytest.approx(0.0104))
    t = CLAIMS["tracerelay/table1/dyck-dc64/acc_id"].target  # 98.52 ± 0.05: never closer than a point
    assert t.tol == pytest.approx(0.01)
    for contrast in ("dyck-width-contrast/acc_4096", "most-freq-width-contrast/acc_1024"):
        t = CLAIMS[f"tracerelay/sec4/{contrast}"].target
        assert (t.op, t.value) == (">=", 0.0)
    assert CLAIMS["tracerelay/sec4/ablation-dc32/steps"].aggregate == "min"
    assert CLAIMS["tracerelay/sec4/ablation-dc32/steps"].target.value == 20000
    assert CLAIMS["tracerelay/appA/most-freq/tf_greedy_disagreements"].target.value == 3


def test_each_experiment_owns_its_claims_and_every_run_set_builds():
    owned = [c for name in EXPERIMENTS for c in registry.get(name).claims()]
    assert sorted(c.id for c in owned) == sorted(CLAIMS)
    for name in EXPERIMENTS:
        assert all(c.experiment == name for c in registry.get(name).claims())
    seen = set()
    for claim in CLAIMS.values():
        assert claim.note and claim.statement
        if claim.compute is not None:
            assert not claim.runs and not claim.needs_gpu
            continue
        assert claim.needs_gpu and claim.preset == "paper"
        for rs in claim.runs:
            assert rs.seeds == (42, 43, 44)
            if rs.key in seen:
                continue
            seen.add(rs.key)
            cfg = registry.get(rs.experiment).config(rs.preset, rs.seeds[0], list(rs.overrides))
            d_c = int(re.fullmatch(r"model\.d_trace=\[64,(\d+),64\]", rs.overrides[0]).group(1))
            assert cfg.seed == 42 and cfg.model.d_trace == [64, d_c, 64] and cfg.model.d_model == 64
            assert cfg.model.inherit == (rs.experiment != tr.ER_OFF)
    assert len(seen) == 4 * 3  # one run set per experiment and width


@pytest.fixture(scope="module")
def smoke_metrics():
    """The final metrics of a fresh smoke model of every experiment, on a fresh 4-example set
    (Dyck at the paper's maximum depth 10, so that every depth slice is written)."""
    out = {}
    for name in EXPERIMENTS:
        exp = registry.get(name)
        cfg = exp.config("smoke", None, ["task.m=10"] if name == tr.DYCK else [])
        fresh = exp.fresh_eval_config(cfg, 7, 4)
        task, model = build(exp, fresh)
        out[name] = exp.final_evaluation(fresh, task, model)
    return out


def test_every_metric_a_claim_reads_is_written_by_the_final_evaluation(smoke_metrics):
    """A key ``name@T`` must be written at the smoke lengths and T must be a length the paper
    preset evaluates; Dyck bins that are empty at smoke lengths write their count only."""
    for claim in CLAIMS.values():
        if claim.compute is not None:
            continue
        for i, rs in enumerate(claim.runs):
            metrics = smoke_metrics[rs.experiment]
            keys = [claim.measure.key] if claim.measure.key else _combined_keys(claim, i)
            for key in keys:
                if key == "steps":
                    continue
                if "@" not in key:
                    assert key in metrics, (claim.id, key)
                    continue
                name, T = key.split("@")
                cfg = registry.get(rs.experiment).config("paper")
                assert int(T) in cfg.eval.id_lengths + cfg.eval.ood_lengths, (claim.id, key)
                smoke_T = registry.get(rs.experiment).config("smoke").eval.ood_lengths[0]
                assert f"{name}@{smoke_T}" in metrics or f"{name[:-4]}_n@{smoke_T}" in metrics, (claim.id, key)


def _combined_keys(claim, i):
    """The key a measure without a single key reads from its i-th run set."""
    if " − " in claim.measure.label:  # difference(key_a, key_b)
        return [claim.measure.label.split(" − ")[i]]
    return ["tf_greedy_disagree_max"]  # the maximum over widths


def test_paired_claims_subtract_in_the_stated_order():
    rec = lambda seed, acc: {seed: RunRecord(seed, {"metrics": {"acc@256": acc, "acc@1024": acc}})}  # noqa: E731
    gain = CLAIMS["tracerelay/sec4/inheritance-gain-dc16/acc_id"]
    assert [rs.experiment for rs in gain.runs] == [tr.ER_ON, tr.ER_OFF]
    assert gain.measure([rec(42, 0.99), rec(42, 0.51)]) == {42: pytest.approx(0.48)}
    ahead = CLAIMS["tracerelay/sec4/ablation-ahead-dc16/acc_1024"]
    assert [rs.experiment for rs in ahead.runs] == [tr.ER_OFF, tr.ER_ON]
    assert measure_claim(ahead, [rec(42, 0.37), rec(42, 0.33)]).verdict == "met"
    assert measure_claim(ahead, [rec(42, 0.30), rec(42, 0.33)]).verdict == "not met"
    dis = CLAIMS["tracerelay/appA/most-freq/tf_greedy_disagreements"]
    runs = [{s: RunRecord(s, {"metrics": {"tf_greedy_disagree_max": float(v + s - 42)}}) for s in (42, 43)}
            for v in (0, 2, 1)]
    assert measure_claim(dis, runs).value == 3 and measure_claim(dis, runs).verdict == "met"


def test_most_freq_counts_teacher_forced_greedy_disagreements(smoke_metrics):
    m = smoke_metrics[tr.MF]
    per_length = [v for k, v in m.items() if k.startswith("tf_greedy_disagree@")]
    assert len(per_length) == 3 and all(0 <= v <= 4 and v == int(v) for v in per_length)
    assert m["tf_greedy_disagree"] == sum(per_length) and m["tf_greedy_disagree_max"] == max(per_length)
    assert "tf_greedy_disagree" not in smoke_metrics[tr.DYCK]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_fresh_eval_config_draws_new_final_sets_at_the_same_lengths(name):
    exp = registry.get(name)
    cfg = exp.config("smoke")
    task = exp.build_task(cfg)
    fresh = exp.fresh_eval_config(cfg, cfg.eval.final_seed, 5)  # even the run's own seed draws anew
    assert fresh.model == cfg.model and fresh.train == cfg.train and fresh.task == cfg.task
    assert (fresh.eval.id_lengths, fresh.eval.ood_lengths, fresh.eval.val_lengths) == \
        (cfg.eval.id_lengths, cfg.eval.ood_lengths, cfg.eval.val_lengths)
    assert (fresh.eval.n_final, fresh.eval.n_ood, fresh.eval.val_seed) == (5, 5, cfg.eval.val_seed)
    assert cfg.eval.eval_seed is None  # the run's own config is untouched
    prints = {exp.eval_fingerprint(c, task) for c in (cfg, fresh, exp.fresh_eval_config(cfg, 1, 5))}
    assert len(prints) == 3
    sets = list(exp.final_sets(fresh, task))
    assert [T for T, _, _ in sets] == cfg.eval.id_lengths + cfg.eval.ood_lengths
    assert all(len(b) == 5 and b.tokens.shape[1] >= T for T, _, b in sets)
    own = dict((T, b) for T, _, b in exp.final_sets(cfg, task))
    assert all(b.fingerprint() != own[T].fingerprint() for T, _, b in sets)


def test_numbers_computed_from_code_match_the_paper():
    fast = [c for c in CLAIMS.values() if c.compute is not None and "dyck-data" not in c.id]
    assert len(fast) == 12 + 1 + 1 + 3
    for claim in fast:
        assert measure_claim(claim, []).verdict == "met", claim.id
    assert tr.max_input_lag(tr.ER_ON) > 150  # with inheritance, an input reaches to the end of a 200-long input


def test_gpu_plan_runs_the_paper_rows_in_table1_order_with_their_commands(tmp_path):
    from tinyscope.runs import reproduce

    plan = reproduce.plan([c for c in all_claims("tracerelay")], tmp_path, include_gpu=True)
    order = [(r.run_set.experiment, r.run_set.overrides, r.seed) for r in plan.runs]
    rows = [(exp, (f"model.d_trace=[64,{d},64]",)) for exp, d in tr.TABLE1]  # Table 1's row order
    assert order == [(exp, o, s) for exp, o in rows for s in tr.SEEDS] and {r.run_set.preset for r in plan.runs} == {"paper"}
    text = reproduce.format_plan(plan, 1, commands=True)
    assert "42,43,44" in text
    cmds = [line.strip() for line in text.splitlines() if line.strip().startswith("tinyscope run ")]
    assert len(cmds) == 36
    first = plan.runs[0]
    assert cmds[0] == (f"tinyscope run tracerelay-equal-repeats --preset paper --seed 42 "
                       f"--set 'model.d_trace=[64,64,64]' --out '{tmp_path / first.spec.rel_path}'")  # quoted: [] globs
