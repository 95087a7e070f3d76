import csv
import io
import math

import numpy as np
import pytest

from tinyscope.report.records import load_records, read_run, split_length
from tinyscope.report.stats import FingerprintMismatch, mean_sd, pair_runs, paired_differences, summarize
from tinyscope.report.sweep_report import build_report


def _sweep(tmp_path, make_run, rng, fingerprints=None):
    """2 learning rates x 4 seeds with random metrics; returns {(lr, seed): metrics}."""
    stored = {}
    for lr in ("0.003", "0.01"):
        for seed in (1, 2, 3, 4):
            m = {"rule_error": float(rng.random()), "val_loss": float(rng.normal(2, 0.5)),
                 "acc@32": float(rng.random()), "acc@64": float(rng.random())}
            fp = (fingerprints or {}).get((lr, seed), "fp-A")
            make_run(tmp_path / f"runs/lr={lr}/s{seed}", seed, m, [f"train.lr={lr}"], fingerprint=fp)
            stored[(lr, seed)] = m
    return stored


def test_mean_sd_is_numpy_sample_sd():
    x = [0.1, 0.4, 0.35, 0.9]
    s = mean_sd(x)
    assert s.mean == pytest.approx(np.mean(x)) and s.sd == pytest.approx(np.std(x, ddof=1)) and s.n == 4
    one = mean_sd([0.5])
    assert one.mean == 0.5 and math.isnan(one.sd) and one.format() == "0.5000"
    assert mean_sd([1.0, float("nan"), 3.0]).n == 2


def test_report_mean_and_sd_equal_numpy_on_stored_metrics(tmp_path, make_run):
    stored = _sweep(tmp_path, make_run, np.random.default_rng(0))
    rep = build_report(tmp_path)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "report/summary.csv").read_text())))
    assert len(rows) == 2
    for row in rows:
        lr = row["train.lr"]
        for metric in ("rule_error", "val_loss", "acc@32", "acc@64"):
            vals = [stored[(lr, s)][metric] for s in (1, 2, 3, 4)]
            assert float(row[f"{metric} mean"]) == pytest.approx(np.mean(vals), rel=1e-12)
            assert float(row[f"{metric} sd"]) == pytest.approx(np.std(vals, ddof=1), rel=1e-12)
        assert row["n"] == "4"
    assert "± " in rep.markdown and "Paired differences along train.lr" in rep.markdown
    assert (tmp_path / "report/summary.tex").read_text().count(r"$\pm$") >= 8


def test_paired_differences_are_per_seed(tmp_path, make_run):
    stored = _sweep(tmp_path, make_run, np.random.default_rng(1))
    recs = load_records(tmp_path)
    a = [r for r in recs if r.config["train.lr"] == 0.01]
    b = [r for r in recs if r.config["train.lr"] == 0.003]
    (d,) = paired_differences(a, b, ["rule_error"])
    diffs = [stored[("0.01", s)]["rule_error"] - stored[("0.003", s)]["rule_error"] for s in (1, 2, 3, 4)]
    assert d.seeds == [1, 2, 3, 4]
    assert d.stat.mean == pytest.approx(np.mean(diffs)) and d.stat.sd == pytest.approx(np.std(diffs, ddof=1))


def test_pairing_refuses_mismatched_fingerprints(tmp_path, make_run):
    _sweep(tmp_path, make_run, np.random.default_rng(2), fingerprints={("0.01", 3): "fp-B"})
    recs = load_records(tmp_path)
    a = [r for r in recs if r.config["train.lr"] == 0.01]
    b = [r for r in recs if r.config["train.lr"] == 0.003]
    with pytest.raises(FingerprintMismatch, match="seed 3"):
        pair_runs(a, b)
    with pytest.raises(FingerprintMismatch):
        build_report(tmp_path, pair="train.lr")
    rep = build_report(tmp_path)  # the default report keeps going and says why it did not pair
    assert any("not paired" in n and "fp-B" in n for n in rep.notes)


def test_summaries_never_mix_evaluation_sets(tmp_path, make_run):
    _sweep(tmp_path, make_run, np.random.default_rng(3), fingerprints={("0.01", 4): "fp-B"})
    groups = summarize(load_records(tmp_path))
    assert sorted((g.runs[0].config["train.lr"], g.eval_fingerprint, len(g.runs)) for g in groups) == \
        [(0.003, "fp-A", 4), (0.01, "fp-A", 3), (0.01, "fp-B", 1)]


def test_records_setting_is_the_diff_from_the_preset(tmp_path, make_run):
    p = make_run(tmp_path / "r", 7, {"a": 1.0, "nested": {"x@T=16": 2.0}, "flag": True, "name": "x"},
                 ["train.lr=0.01", "train.threads=1"])
    rec = read_run(p)
    assert rec.setting == {"train.lr": 0.01}  # threads is an execution detail, not a setting
    assert rec.metrics == {"a": 1.0, "nested.x@T=16": 2.0} and rec.tokens == 1234 and rec.status == "done"
    assert split_length("nested.x@T=16") == ("nested.x", 16) and split_length("acc@1024") == ("acc", 1024)
    assert split_length("probe.layer1") is None and split_length("rule_error") is None
