"""THEIA's claims: registered with the paper's numbers (seed003-details Sec. 1), on the paper's
seeds, with runs that build and metric keys that the smoke runs' results really hold; the
numbers computed from code; and the fresh evaluation sets of `tinyscope eval RUN --seed S`."""
import dataclasses
import math

import pytest

from tinyscope.runs import registry
from tinyscope.runs.claims import ClaimError, RunRecord, all_claims, measure_claim
from tinyscope.runs.rundir import build, run_experiment
from tinyscope.studies.theia.claims import CLAIMS, SEEDS

BY_ID = {c.id: c for c in CLAIMS}

# seed003-details Sec. 1, typed in again here to check the registry against the text
PAPER = {
    "theia/readme/test_acc": 0.9996,                        # "Overall accuracy 99.96 ± 0.01%"
    "theia/readme/rules39_grand_mean": 0.9988,              # "grand mean ≈ 99.88%"
    "theia/abstract/time_to_12of12": 7.93 * 60,             # "7.93 ± 1.40 min"
    "theia/sec4.4/theia/chain_acc_500": 0.9997,             # "99.97 ± 0.02% at 500 steps (v2 abstract)"
    "theia/sec4.4/tf8ltuned/chain_acc_500": 0.9924,         # "Reaches 99.24% at 500 steps"
    "theia/probes/has_unknown/arith": 0.800,                # "80.0 / 91.1 / 90.8 / 99.7%"
    "theia/probes/has_unknown/order": 0.911,
    "theia/probes/has_unknown/set": 0.908,
    "theia/probes/has_unknown/logic": 0.997,
    "theia/patching/or_seed42/flipped": 986,                # "986/986 flips for seed 42"
    "theia/patching/or_5seeds/flipped": 4898 / 5,           # "4,898/4,898 flips over 5 seeds"
    "theia/patching/and_5seeds/flipped": 4719 / 5,          # "An AND variant gives 4,719/4,719"
    "theia/params/theia": 2_751_232,                        # "IsisV9: 2,751,232 parameters"
    "theia/params/tf8ltuned": 3_582_147,                    # "TF8LTuned, pre-LN, 3,582,147 params"
    "theia/params/bigtransformer": 3_641_859,               # "BigTransformer, post-LN, 3,641,859 params"
    "theia/abstract/speedup_matched": 6.5,                  # "6.5x faster than the Transformer"
    "theia/abstract/speedup_tuned": 3.6,                    # "about 3.6x faster under Transformer-standard tuning"
    "theia/abstract/speedup_matched/cpu": 6.5,
    "theia/abstract/speedup_tuned/cpu": 3.6,
    "theia/params/single-mlp_logic_engine_ablation": 2.49e6,  # "Single-MLP logic engine (2.49M)"
    "theia/params/no_bridges_ablation": 2.72e6,             # "No bridges (2.72M)"
}
EXPERIMENTS = ("theia-kleene", "theia-kleene-transformer", "theia-kleene-transformer-tuned", "theia-chain")


def test_the_papers_numbers_are_registered():
    assert len(BY_ID) == len(CLAIMS)
    for cid, value in PAPER.items():
        assert BY_ID[cid].paper.value == pytest.approx(value), cid
        assert BY_ID[cid].target.met(value), f"{cid}: the paper's own value must meet the target"
    assert BY_ID["theia/readme/test_acc"].paper.sd == pytest.approx(0.0001)
    assert BY_ID["theia/abstract/time_to_12of12"].paper.sd == pytest.approx(1.40 * 60)
    assert BY_ID["theia/abstract/rules12_all_seeds"].target.describe("%") == "≥ 100%"
    # the probes' tolerance does not admit a probe far above or below the paper's value
    assert not BY_ID["theia/probes/has_unknown/order"].target.met(0.95)
    assert not BY_ID["theia/sec4.4/theia/chain_acc_500"].target.met(0.9976 - 0.01)


def test_experiments_hand_out_their_claims():
    theia = {c.id for c in all_claims("theia")}
    assert theia == set(BY_ID)
    for name in EXPERIMENTS:
        owned = registry.get(name).claims()
        assert owned and all(c.experiment == name for c in owned)
    assert sum(len(registry.get(n).claims()) for n in EXPERIMENTS) == len(CLAIMS)


def test_runs_use_the_papers_seeds_and_build_at_their_preset():
    for claim in CLAIMS:
        for rs in claim.runs:
            assert rs.seeds in (SEEDS, (42,), SEEDS[:2], SEEDS[:3]), claim.id
            assert claim.needs_gpu == (rs.preset == "paper"), claim.id
            cfg = registry.get(rs.experiment).config(rs.preset, rs.seeds[0], list(rs.overrides))
            assert cfg.seed == rs.seeds[0]
            if rs.experiment == "theia-chain":   # the paper's chain task, not the strong-Kleene variant
                assert cfg.task.logic == "public_code", claim.id
    assert SEEDS == (42, 123, 256, 777, 999)
    # the 4-domain claims share one run per seed (the ablations apart), and the P_unk sweep's 0.15 is it
    assert len({rs.key for c in CLAIMS for rs in c.runs if rs.experiment == "theia-kleene"
                and rs.preset == "cpu" and not rs.overrides}) == 1
    assert BY_ID["theia/ablations/p_unk_0_15/rules12"].runs[0].key == BY_ID["theia/readme/test_acc"].runs[0].key


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("theia_claims")
    kleene = run_experiment("theia-kleene", "smoke", out=out / "k", progress=False, report="none",
                            overrides=["eval.probes=true", "eval.n_probe=150"])
    chain = run_experiment("theia-chain", "smoke", out=out / "c", progress=False, report="none",
                           overrides=["chain.lengths=[5,50,500]", "chain.n_eval_chains=16"])
    done = {"theia-kleene": (kleene, out / "k"), "theia-chain": (chain, out / "c")}
    for name in ("theia-kleene-transformer", "theia-kleene-transformer-tuned"):
        done[name] = (run_experiment(name, "smoke", out=out / name, progress=False, report="none"), out / name)
    return done


def test_every_measure_reads_keys_the_results_hold(smoke_results):
    for claim in CLAIMS:
        if claim.compute is not None:
            continue
        runs = []
        for rs in claim.runs:
            results, path = smoke_results[rs.experiment]
            runs.append({s: RunRecord(s, results, path) for s in rs.seeds})
        m = measure_claim(claim, runs)            # raises ClaimError for a key the results lack
        if claim.id.startswith("theia/abstract/speedup"):   # no smoke run reaches 12/12: no ratio
            assert m.n == 0, claim.id
            continue
        assert m.n == len(claim.runs[0].seeds) and m.verdict in ("met", "not met"), claim.id
        assert all(v >= 0 for v in m.per_seed.values()), claim.id


def test_patch_flip_fraction_counts_flips_over_kept_pairs():
    from tinyscope.studies.theia.claims import patch_flip_fraction

    recs = {1: RunRecord(1, {"metrics": {"patch_OR_kept": 10.0, "patch_OR_flipped": 9.0}}),
            2: RunRecord(2, {"metrics": {"patch_OR_kept": 0.0, "patch_OR_flipped": 0.0}})}
    assert patch_flip_fraction("OR")([recs]) == {1: 0.9, 2: 0.0}
    with pytest.raises(ClaimError):
        patch_flip_fraction("AND")([recs])


def test_computed_claims():
    for cid in ("theia/params/theia", "theia/params/theia_step", "theia/params/transitionnet",
                "theia/params/tf8ltuned", "theia/params/flat_mlp_hidden_512", "theia/params/flat_mlp_hidden_1243",
                "theia/task/input_space", "theia/probes/has_unknown/majority"):
        assert measure_claim(BY_ID[cid], []).verdict == "met", cid
    assert BY_ID["theia/task/input_space"].compute() == 20 * 20 * 21 * 4 * 6 * 5 * 2 ** 21 * 2 ** 4
    assert BY_ID["theia/probes/has_unknown/majority"].compute() == pytest.approx(0.85 ** 4)
    for cid in ("theia/params/bigtransformer", "theia/params/no_bridges_ablation",
                "theia/params/single-mlp_logic_engine_ablation"):
        assert measure_claim(BY_ID[cid], []).verdict == "met", cid
    assert BY_ID["theia/params/bigtransformer"].compute() == 3_641_859


def test_speedup_is_the_transformers_time_over_theias(tmp_path):
    from tinyscope.studies.theia.claims import seconds_ratio_to_12of12

    def log(name, t):
        d = tmp_path / name
        d.mkdir()
        passed = '"rules12_passed": 12' if t is not None else '"rules12_passed": 3'
        (d / "metrics.jsonl").write_text(f'{{"split": "eval", "step": 5, {passed}, "elapsed_s": {t or 1}}}\n')
        return RunRecord(1, {}, d)

    ratio = seconds_ratio_to_12of12()
    assert ratio([{1: log("tf", 650.0)}, {1: log("theia", 100.0)}]) == {1: 6.5}
    assert ratio([{1: log("tf_never", None)}, {1: log("theia2", 100.0)}]) == {1: math.inf}


def test_rules39_and_probes_are_measured_on_the_model_when_results_predate_them(smoke_results, tmp_path):
    import json
    import shutil

    from tinyscope.studies.theia.claims import from_results_or_model

    _, path = smoke_results["theia-kleene"]
    old = tmp_path / "old"
    shutil.copytree(path, old)
    results = json.loads((old / "results.json").read_text())
    want = results["metrics"]["rule39_authors_mean"]
    results["metrics"] = {k: v for k, v in results["metrics"].items() if "authors" not in k}
    (old / "results.json").write_text(json.dumps(results))
    rec = RunRecord(42, results, old)
    assert from_results_or_model("rule39_authors_mean", "rules39_authors")([{42: rec}]) == {42: pytest.approx(want)}
    with pytest.raises(ClaimError, match="no run directory"):
        from_results_or_model("rule39_authors_mean", "rules39_authors")([{42: RunRecord(42, results)}])


def test_uncertainty_only_oracle():
    from tinyscope.studies.theia.claims import uncertainty_only_oracle

    v = uncertainty_only_oracle(n=200_000)
    assert 0.72 < v < 0.75          # P(U) + max(P(F), P(T)) of the 4-domain labels


def test_time_to_first_12of12_reads_the_log(tmp_path):
    from tinyscope.studies.theia.claims import seconds_to_first_12of12

    (tmp_path / "metrics.jsonl").write_text(
        '{"split": "eval", "step": 0, "rules12_passed": 3, "elapsed_s": 0.1}\n'
        '{"split": "eval", "step": 5, "rules12_passed": 12, "elapsed_s": 42.5}\n')
    never = tmp_path / "never"
    never.mkdir()
    (never / "metrics.jsonl").write_text('{"split": "eval", "step": 0, "rules12_passed": 11, "elapsed_s": 1}\n')
    per_seed = seconds_to_first_12of12()([{1: RunRecord(1, {}, tmp_path), 2: RunRecord(2, {}, never)}])
    assert per_seed == {1: 42.5, 2: math.inf}


# ---------------------------------------------------------------- fresh evaluation sets
@pytest.mark.parametrize("name,overrides,fingerprint", [
    ("theia-kleene", [], "4f4f7dcabe11fded"),
    ("theia-chain", [], "eb1625df72c2d047"),
])
def test_fresh_eval_config(name, overrides, fingerprint):
    exp = registry.get(name)
    cfg = exp.config("smoke", 42, overrides)
    task, model = build(exp, cfg)
    assert exp.eval_fingerprint(cfg, task) == fingerprint     # eval_seed=None: the run's own test set, unchanged
    fresh = exp.fresh_eval_config(cfg, 7, n=12)
    fresh_task = exp.build_task(fresh)
    assert exp.eval_fingerprint(fresh, fresh_task) != fingerprint
    assert fresh.model == cfg.model and fresh.task.spec == cfg.task.spec
    assert dataclasses.replace(fresh.task, eval_seed=None, n_test=cfg.task.n_test) == cfg.task
    assert len(fresh_task.test_set().tokens) == 12
    assert exp.fresh_eval_config(cfg, 7).task.n_test == cfg.task.n_test
    own = exp.final_evaluation(cfg, task, model)
    again = exp.final_evaluation(fresh, fresh_task, model)
    assert set(again) == set(own) and all(0 <= v <= 1 for k, v in again.items() if "acc" in k)
    if name == "theia-chain":
        assert fresh.chain.lengths == cfg.chain.lengths and fresh.chain.n_eval_chains == 12
    else:
        assert fresh.eval.n_final_per_rule == 12 and fresh.eval.n_patch_pairs == 12
        assert again["patch_OR_kept"] <= 12


def test_final_eval_seeds_are_the_runs_own_unless_fresh():
    from tinyscope.studies.theia.experiment import final_eval_seed

    cfg = registry.get("theia-kleene").config("smoke")
    assert final_eval_seed(cfg, 12345, salt=2) == 12345
    fresh = registry.get("theia-kleene").fresh_eval_config(cfg, 7)
    seeds = {final_eval_seed(fresh, 12345, salt=s) for s in (1, 2, 3, 4)}
    assert len(seeds) == 4 and 12345 not in seeds
