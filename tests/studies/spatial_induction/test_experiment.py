"""The sih experiments: presets build, the paper models have the counts of Tables 11-12's shapes,
and a smoke run trains, evaluates and renders its figure."""
import numpy as np
import pytest

from tinyscope.report.records import read_run
from tinyscope.report.tables import get_table
from tinyscope.runs import registry
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.spatial_induction.experiment import CPU_TRANSFERS


def expected_count(d, ffn, heads_mlp, n_ctx, vocab=4):
    """Embeddings + per layer (LN, Q/K/V/O with biases, optional LN + 2-layer MLP) + bias-free head."""
    total = vocab * d + n_ctx * d + d * vocab
    for has_mlp in heads_mlp:
        total += 2 * d + 4 * (d * d + d)
        if has_mlp:
            total += 2 * d + d * ffn + ffn + ffn * d + d
    return total


@pytest.mark.parametrize("arch,mlps", [("shared", (1, 1)), ("dedicated", (0, 1))])
def test_paper_eca_models_match_table_11(arch, mlps):
    exp = registry.get(f"sih-eca-{arch}-det")
    cfg = exp.config("paper")
    assert cfg.model.d_model == 128 and cfg.model.d_mlp == [512 * m for m in mlps]
    assert cfg.model.n_heads == ([1, 1] if arch == "shared" else [4, 1])
    assert cfg.task.grid == [16] and (cfg.task.T, cfg.task.T0) == (10, 4)
    assert cfg.train.lr == 1e-3 and cfg.train.weight_decay == 0.2 and cfg.train.betas == [0.9, 0.999]
    from tinyscope.models.transformer import Transformer

    model = Transformer(cfg.model)
    assert sum(p.numel() for p in model.parameters()) == expected_count(128, 512, mlps, 168)


def test_all_twelve_experiments_registered_with_table_10_settings():
    import re

    names = [n for n in registry.names() if re.fullmatch(r"sih-(eca|v3|vn2d)-(shared|dedicated)-(det|stoch)", n)]
    assert len(names) == 12
    vn = registry.get("sih-vn2d-dedicated-stoch").config("paper")
    assert vn.task.grid == [6, 6] and (vn.task.T, vn.task.T0) == (20, 10) and vn.model.n_heads == [8, 1]
    assert vn.model.d_model == 512


def test_smoke_run_trains_evaluates_and_draws(tmp_path):
    res = run_experiment("sih-eca-dedicated-det", "smoke", out=tmp_path / "run", progress=False)
    m = res["metrics"]
    for key in ("test_tf_cell_acc", "test_tf_seq_acc", "test_ar_cell_acc", "val_tf_cell_acc"):
        assert 0.0 <= m[key] <= 1.0
    assert m["test_kgram_acc"] == 1.0  # the coverage filter makes every scored query resolvable
    run = load_run(tmp_path / "run")
    (rollout,) = run.experiment.views(run)
    assert rollout.name == "rollout" and len(rollout.draw().axes) == 3
    second = run_experiment("sih-eca-dedicated-det", "smoke", seed=1, out=tmp_path / "run1", progress=False)["metrics"]
    runs = [read_run(tmp_path / "run"), read_run(tmp_path / "run1")]
    table = get_table("sih-table13").build(runs)
    assert table.headers == ["Task", "Arch.", "Preset", "n", "TF seq acc", "TF cell acc", "AR cell acc"]
    (row,) = table.rows
    assert row[:4] == ["1D V=2, k=3", "Dedicated-heads", "smoke", 2]
    cells = [m["test_tf_cell_acc"], second["test_tf_cell_acc"]]
    assert row[5].mean == pytest.approx(np.mean(cells)) and row[5].sd == pytest.approx(np.std(cells, ddof=1))
    assert "Dedicated-heads" in table.to_markdown() and "1D V=2, k=3" in table.to_latex()


def test_stochastic_cpu_recipe_trains_with_the_alpha_curriculum_and_soft_targets(tmp_path):
    """The stochastic cpu preset's rule-entropy curriculum, with soft targets, on the smoke sizes:
    the objective is the soft-target loss and the run trains through the phase switch and evaluates."""
    from tinyscope.studies.spatial_induction.experiment import soft_target_loss

    exp = registry.get("sih-eca-dedicated-stoch")
    cpu = exp.config("cpu").task
    assert cpu.train_targets == "sampled" and cpu.curriculum_alpha == [0.02] * 3 and cpu.curriculum_T == [3, 5, 10]
    sets = ["task.train_targets=expected", "task.curriculum_T=[3]", "task.curriculum_steps=[8]",
            "task.curriculum_alpha=[0.02]"]
    cfg = exp.config("smoke", overrides=sets)
    assert exp.objective(cfg, exp.build_task(cfg)) is soft_target_loss
    m = run_experiment("sih-eca-dedicated-stoch", "smoke", out=tmp_path / "run", progress=False, overrides=sets)["metrics"]
    assert np.isfinite(m["test_tf_kl_kgram"]) and m["test_tf_kl_kgram"] > 0


@pytest.mark.parametrize("key", sorted(CPU_TRANSFERS))
def test_a_transfer_cpu_preset_starts_from_a_zoo_model_of_its_geometry(key):
    """CPU_TRANSFERS: a cpu run that starts from a converged zoo model (V = 3 stochastic from the
    ECA stochastic model, Shared-head from Dedicated-heads) names a source that must exist, be of
    the same geometry, and fit every tensor but those drawn afresh (so a replaced or removed zoo
    entry fails here, not in a long run); every other tensor is loaded unchanged."""
    from tinyscope.runs.rundir import build, load_initial_weights

    setting, arch, regime = key
    transfer = CPU_TRANSFERS[key]
    exp = registry.get(f"sih-{setting}-{arch}-{regime}")
    cfg = exp.config("cpu")
    assert cfg.train.init_from == transfer.source and cfg.train.steps == transfer.steps
    if regime == "stoch":
        assert cfg.task.curriculum_T == [cfg.task.T] and cfg.task.curriculum_steps == [transfer.near_det_steps]
    else:  # no horizon curriculum: the source already reads full streams
        assert cfg.task.curriculum_T == [] and cfg.task.curriculum_steps == []
    source = load_run(transfer.source)
    assert (source.cfg.task.grid, source.cfg.task.T, source.cfg.task.T0) == (cfg.task.grid, cfg.task.T, cfg.task.T0)
    _, model = build(exp, cfg)
    fresh = load_initial_weights(cfg.train.init_from, model, exclude=cfg.train.init_exclude)
    assert fresh and set(model.state_dict()) - set(source.model.state_dict()) <= set(fresh)  # what the source lacks
    assert all(np.array_equal(model.state_dict()[k].numpy(), v.numpy()) for k, v in source.model.state_dict().items()
               if k not in fresh)


def test_the_v3_stochastic_transfer_preset_gates_on_taking_the_transfer():
    """A V = 3 stochastic start that stays at the marginal predictor is replaced (CPU_GATES)."""
    cfg = registry.get("sih-v3-dedicated-stoch").config("cpu")
    assert cfg.restarts == 2
    assert (cfg.train.gate_metric, cfg.train.gate_step, cfg.train.gate_threshold) == ("val_tf_cell_acc", 2000, 0.5)


def test_tables_13_and_14_read_trained_runs_only_not_compiled_circuits(tmp_path):
    """A folder holding a compiled circuit (sih-compiled-eca-det) beside trained runs builds
    Table 13 from the trained runs alone."""
    from tests.core.report.conftest import write_run
    from tinyscope.studies.spatial_induction.experiment import TABLE13, TABLE14

    metrics = {"test_tf_seq_acc": 0.5, "test_tf_cell_acc": 0.9, "test_ar_cell_acc": 0.8}
    write_run(tmp_path / "trained", 0, metrics, experiment="sih-eca-dedicated-det")
    write_run(tmp_path / "compiled", 0, metrics, experiment="sih-compiled-eca-det", preset="paper")
    runs = [read_run(tmp_path / "trained"), read_run(tmp_path / "compiled")]
    assert [r.experiment for r in TABLE13.select(runs)] == ["sih-eca-dedicated-det"]
    (row,) = TABLE13.build(runs).rows
    assert row[:4] == ["1D V=2, k=3", "Dedicated-heads", "smoke", 1]
    assert TABLE14.select(runs) == []


@pytest.mark.parametrize("table, regime", [("sih-table13", "det"), ("sih-table14", "stoch")])
def test_report_table_of_a_folder_with_a_compiled_run_is_not_a_key_error(tmp_path, capsys, table, regime):
    """`tinyscope report DIR --table sih-table13/14` on a folder that also holds a compiled run
    (it died with KeyError 'compiled') prints the table of the trained runs."""
    from tests.core.report.conftest import write_run
    from tinyscope.cli import main

    metrics = {"test_tf_seq_acc": 0.5, "test_tf_cell_acc": 0.9, "test_ar_cell_acc": 0.8, "test_tf_kl_kgram": 0.01,
               "test_tf_kl_true": 0.02, "test_kgram_acc": 0.7, "test_ar_cell_acc_kgram": 0.6, "test_ar_kl_kgram": 0.03}
    write_run(tmp_path / "trained", 0, metrics, experiment=f"sih-eca-dedicated-{regime}")
    write_run(tmp_path / "compiled", 0, metrics, experiment=f"sih-compiled-eca-{regime}", preset="paper")
    assert main(["report", str(tmp_path), "--table", table]) == 0
    text = capsys.readouterr().out
    assert "Dedicated-heads" in text and "compiled" not in text


def test_run_of_a_compiled_circuit_prints_its_metrics(tmp_path, capsys):
    """`tinyscope run sih-compiled-eca-det` without --preset takes its only preset (paper; the cpu
    default refused it), and, built rather than trained (no wall_time in its results), exits 0
    printing its test metrics (it died with KeyError 'wall_time' after writing the run)."""
    import json

    from tinyscope.cli import main

    assert main(["run", "sih-compiled-eca-det", "--no-progress", "--out",
                 str(tmp_path / "run")]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["metrics"]["test_tf_cell_acc"] == 1.0
    assert "building and evaluating sih-compiled-eca-det" in out.err


@pytest.mark.parametrize("name", ["sih-eca-dedicated-det", "sih-v3-shared-stoch", "sih-vn2d-dedicated-det"])
def test_the_stated_example_length_is_the_sampled_one(name):
    """``example_tokens`` lets a memory estimate skip the first draw (which builds rule pools)."""
    from tinyscope.runs import registry
    from tinyscope.tasks.base import step_rng

    exp = registry.get(name)
    cfg = exp.presets["smoke"]()
    task = exp.build_task(cfg)
    assert task.example_tokens == task.sample(step_rng(0, 0), 1).tokens.size


def test_a_start_that_misses_the_gate_is_replaced_and_the_last_restart_trains_to_the_end(tmp_path):
    """``restarts`` with a gate no start can meet: the main phase and restart 1 stop at the gate
    step, restart 2 (the last) trains its whole schedule on a fresh draw whose horizon curriculum
    starts over; with a gate every start meets, the restarts stop at step 0 and the run measures
    the main phase's model, as a run without restarts does."""
    import json

    from tinyscope.cli import main

    def run(name, *sets):
        out = tmp_path / name
        args = [a for s in sets for a in ("--set", s)]
        assert main(["run", "sih-eca-dedicated-det", "--preset", "smoke", "--no-progress", "--out", str(out),
                     "--set", "task.curriculum_T=[3]", "--set", "task.curriculum_steps=[5]", *args]) == 0
        return out

    def log(path, split):
        return [r for r in map(json.loads, (path / "metrics.jsonl").read_text().splitlines()) if r["split"] == split]

    gate = ["train.gate_step=10", "train.gate_metric=val_tf_cell_acc", "restarts=2"]
    missed = run("missed", *gate, "train.gate_threshold=1.5")
    assert log(missed, "eval")[-1]["step"] == 10 and log(missed / "stages" / "restart1", "eval")[-1]["step"] == 10
    last = missed / "stages" / "restart2"
    assert log(last, "eval")[-1]["step"] == 20 and log(last, "eval")[-1]["restart_kept"] == 0.0
    assert log(last, "train")[0]["tokens"] == log(missed, "train")[0]["tokens"]  # T = 3 again for 5 batches

    kept = run("kept", *gate, "train.gate_threshold=0")
    assert log(kept, "eval")[-1]["step"] == 20
    assert [r["step"] for r in log(kept / "stages" / "restart2", "eval")] == [0]
    plain = run("plain")
    metrics = [json.loads((p / "results.json").read_text())["metrics"] for p in (kept, plain)]
    assert {k: v for k, v in metrics[0].items() if k.startswith("test_")} == \
        {k: v for k, v in metrics[1].items() if k.startswith("test_")}


def test_time_to_accuracy_counts_the_abandoned_starts(tmp_path):
    """benchmarks/spatial_induction/time_to_accuracy.py chains a run's fresh starts: steps and
    seconds of an abandoned start add to the time at which a restart reaches the threshold."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).parents[3] / "benchmarks" / "spatial_induction" / "time_to_accuracy.py"
    spec = importlib.util.spec_from_file_location("time_to_accuracy", path)
    tta = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tta)

    def write(d, rows):
        d.mkdir(parents=True, exist_ok=True)
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write(tmp_path, [{"step": 100, "split": "train", "time": 10.0},
                     {"step": 100, "split": "eval", "val_tf_cell_acc": 0.5, "time": 11.0}])
    write(tmp_path / "stages" / "restart10", [{"step": 0, "split": "eval", "val_tf_cell_acc": 1.0, "time": 0.0}])
    write(tmp_path / "stages" / "restart2", [{"step": 50, "split": "train", "time": 4.0},
                                             {"step": 50, "split": "eval", "val_tf_cell_acc": 0.9995, "time": 5.0}])
    assert [p.name for p in tta.phases(tmp_path)[1:]] == ["restart2", "restart10"]
    points = tta.curve(tmp_path, "val_tf_cell_acc")
    assert points[:2] == [(100, 10.0, 0.5), (150, 15.0, 0.9995)]
    assert tta.time_to(points, 0.999, "max") == (150, 15.0)
