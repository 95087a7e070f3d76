"""TraceRelay experiments: registration, determinism, the final-position objective, greedy
Most-Freq decoding against a full re-forward (the paper tables: tests/studies/tracerelay/test_tables.py)."""
import numpy as np
import torch
from matplotlib.figure import Figure

from tinyscope.report.tables import get_table
from tinyscope.runs import registry
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.tracerelay.model import TraceRelay, TraceRelayConfig
from tinyscope.studies.tracerelay.scoring import final_position_loss, greedy_most_freq
from tinyscope.studies.tracerelay.task import MostFreq, MostFreqConfig

NAMES = ["tracerelay-equal-repeats", "tracerelay-equal-repeats-no-inheritance", "tracerelay-dyck",
         "tracerelay-most-freq"]


def test_experiments_are_registered_with_three_presets():
    for name in NAMES:
        exp = registry.get(name)
        assert set(exp.presets) == {"smoke", "cpu", "paper"}
    on = registry.get(NAMES[0]).config("paper")
    off = registry.get(NAMES[1]).config("paper")
    assert on.model.inherit and not off.model.inherit
    assert (on.train.lr, on.train.batch_size, on.train.eval_every, on.train.steps) == (3e-4, 64, 250, 20000)
    assert (on.train.stop_threshold, on.train.stop_consecutive, on.train.tie_break_metric) == (0.99, 2, "id_ce")


def test_smoke_run_is_deterministic_from_the_seed(tmp_path):
    name = "tracerelay-equal-repeats"
    a = run_experiment(name, "smoke", out=tmp_path / "a", progress=False, overrides=["train.steps=3"])
    b = run_experiment(name, "smoke", out=tmp_path / "b", progress=False, overrides=["train.steps=3"])
    assert a["metrics"] == b["metrics"] and a["eval_fingerprint"] == b["eval_fingerprint"]
    assert "acc@32" in a["metrics"] and a["metrics"]["class0_n"] + a["metrics"]["class1_n"] > 0


def test_runs_offer_their_views_and_the_tables_of_their_task(tmp_path):
    run_experiment("tracerelay-equal-repeats", "smoke", out=tmp_path / "e", progress=False, report="none",
                   overrides=["train.steps=3"])
    run = load_run(tmp_path / "e")
    views = run.experiment.views(run)
    assert [v.name for v in views] == ["validation_history", "accuracy_by_length"]
    assert all(isinstance(v.draw(), Figure) for v in views)
    tables = {name: [t.name for t in registry.get(name).tables()] for name in NAMES}
    assert tables["tracerelay-equal-repeats"] == ["tracerelay-table1", "tracerelay-table5"]
    assert tables["tracerelay-dyck"] == ["tracerelay-table1", "tracerelay-table3", "tracerelay-table5"]
    assert tables["tracerelay-most-freq"] == ["tracerelay-table1", "tracerelay-table4", "tracerelay-table5"]
    assert registry.get("tracerelay-dyck").tables()[1] is get_table("tracerelay-table3")


def test_most_freq_smoke_run_reports_diagnostics_and_baselines(tmp_path):
    res = run_experiment("tracerelay-most-freq", "smoke", out=tmp_path / "m", progress=False,
                         overrides=["train.steps=3"])
    m = res["metrics"]
    for key in ("acc", "top1", "top2", "set_exact", "termination", "tf_exact", "base_suffix32_exact",
                "base_first_exact", "base_fixed_exact"):
        assert 0.0 <= m[f"{key}@24"] <= 1.0


def test_dyck_smoke_run_reports_slices(tmp_path):
    res = run_experiment("tracerelay-dyck", "smoke", out=tmp_path / "d", progress=False, overrides=["train.steps=3"])
    m = res["metrics"]
    assert sum(v for k, v in m.items() if k.startswith("dist") and k.endswith("_n@32")) == m["n_closes@32"]


def test_final_position_loss_reads_the_last_valid_position():
    torch.manual_seed(0)
    model = TraceRelay(TraceRelayConfig(vocab_size=2, n_out=3, d_model=8, d_trace=[4], n_heads=1, d_ffn=8,
                                        left_window=2, right_window=1, stride=2))
    tokens = torch.randint(0, 2, (2, 9))
    batch = {"tokens": tokens, "length": torch.tensor([9, 5]), "label": torch.tensor([1, 2])}
    loss = final_position_loss(model, batch)
    l0 = torch.nn.functional.cross_entropy(model(tokens[:1])[0, -1:], torch.tensor([1]))
    l1 = torch.nn.functional.cross_entropy(model(tokens[1:, :5])[0, -1:], torch.tensor([2]))
    assert torch.allclose(loss, (l0 + l1) / 2, atol=1e-6)


def test_greedy_generation_with_bounded_state_matches_full_reforward():
    torch.manual_seed(1)
    task = MostFreq(MostFreqConfig(V=3, gap=1, min_len=8, max_len=12))
    model = TraceRelay(TraceRelayConfig(vocab_size=6, n_out=4, d_model=16, d_trace=[8, 8], n_heads=2, d_ffn=16,
                                        left_window=3, right_window=1, stride=2)).double().eval()
    src, _ = task.sources(np.random.default_rng(0), 5, 10)
    fast = greedy_most_freq(model, task, src)
    seq = torch.from_numpy(np.concatenate([src, np.full((5, 1), task.SEP)], 1))
    slow = []
    for _ in range(task.cfg.V + 1):
        out = model(seq)[:, -1].argmax(-1)
        slow.append(out)
        seq = torch.cat([seq, torch.where(out == task.EOS_OUT, task.EOS, out)[:, None]], 1)
    assert np.array_equal(fast, torch.stack(slow, 1).numpy())
