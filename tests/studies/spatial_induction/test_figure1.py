"""Figure 1's visualization checkpoints (App. I.9, Table 15): presets, held-out rules, the figure."""
import numpy as np
import pytest

from tinyscope.errors import ConfigError
from tinyscope.runs.registry import get
from tinyscope.studies.spatial_induction.figure1 import EXPERIMENTS, TABLE15
from tinyscope.studies.spatial_induction.rules import near, numbers_of, stavskaya
from tinyscope.studies.spatial_induction.symmetry import eca_classes
from tinyscope.studies.spatial_induction.task import CellularConfig, CellularTask

RULE110_CLASS = next(members for members in eca_classes().values() if 110 in members)


@pytest.mark.parametrize("regime", ["det", "stoch"])
def test_paper_preset_is_table_15(regime):
    cfg = get(EXPERIMENTS[regime]).presets["paper"]()
    arch, d, d_ffn, lr, wd, epochs = TABLE15[regime]
    assert (cfg.task.grid, cfg.task.T, cfg.task.T0, cfg.task.V, cfg.task.neighbourhood) == ([64], 64, 12, 2, "elementary")
    assert (cfg.model.n_heads, cfg.model.d_mlp) == (([4, 1], [0, 2048]) if regime == "det" else ([1, 1], [2048, 2048]))
    assert (cfg.model.d_model, cfg.train.lr, cfg.train.weight_decay, cfg.train.batch_size) == (512, lr, 0.2, 1024)
    assert cfg.train.steps == 50_000_000 * (10 if regime == "det" else 8) // 1024
    assert cfg.train.select_metric == ("val_tf_seq_acc" if regime == "det" else "val_tf_kl_true")
    assert cfg.model.n_ctx == 64 * 65 - 2  # the whole 64 x 64 stream but its last token
    cpu = get(EXPERIMENTS[regime]).presets["cpu"]()
    assert (cpu.task.T0, cpu.model.n_heads) == (12, cfg.model.n_heads)


def _training_tables(cfg: CellularConfig, n_batches: int, batch: int = 64) -> np.ndarray:
    task, rng = CellularTask(cfg), np.random.default_rng(0)
    return np.concatenate([task.sample(rng, batch).meta["tables"] for _ in range(n_batches)])


def test_rule_110_is_in_test_and_in_no_training_trajectory():
    cfg = get("sih-figure1-det").presets["smoke"]().task
    task = CellularTask(cfg)
    assert set(RULE110_CLASS) <= set(task.pool("test").tolist())
    assert not set(RULE110_CLASS) & (set(task.pool("train").tolist()) | set(task.pool("val").tolist()))
    used = set(numbers_of(_training_tables(cfg, 40)).tolist())
    assert len(used) > 150 and not used & set(RULE110_CLASS)  # many training rules, never Rule 110's class


def test_stavskaya_and_its_images_are_held_out_of_stochastic_training():
    cfg = get("sih-figure1-stoch").presets["smoke"]().task
    task = CellularTask(cfg)
    held = task.held_out_tables  # (4, 8, 2): Stavskaya p = 0.29 under reflection x complement
    assert held.shape == (4, 8, 2) and near(stavskaya(0.29)[None], held, 1e-9).all()
    complement = stavskaya(0.29)[::-1, ::-1]  # f'(. | c) = f(swapped . | 7 - c): states 0 <-> 1
    assert not near(complement[None], stavskaya(0.29)[None], 0.1).any() and near(complement[None], held, 1e-9).all()
    # at a radius wide enough that unfiltered Dirichlet(1) draws fall inside it often, none is kept
    wide = CellularConfig(**{**cfg.__dict__, "holdout_radius": 0.6})
    free = CellularConfig(**{**cfg.__dict__, "holdout_stochastic": []})
    assert near(_training_tables(free, 10), CellularTask(wide).held_out_tables, 0.6).mean() > 0.05
    assert not near(_training_tables(wide, 10), CellularTask(wide).held_out_tables, 0.6).any()


def test_default_radius_leaves_the_training_stream_as_the_sih_one():
    cfg = get("sih-figure1-stoch").presets["smoke"]().task
    free = CellularConfig(**{**cfg.__dict__, "holdout_stochastic": []})
    assert np.array_equal(_training_tables(cfg, 3), _training_tables(free, 3))


@pytest.mark.parametrize("kw, field", [(dict(rules="deterministic", holdout_stochastic=["stavskaya"]), "holdout_stochastic"),
                                       (dict(rules="stochastic", holdout_stochastic=["rule110"]), "holdout_stochastic"),
                                       (dict(rules="stochastic", holdout_radius=0.0), "holdout_radius")])
def test_holdout_config_is_validated(kw, field):
    with pytest.raises(ConfigError, match=field):
        CellularConfig(**kw)


def test_train_report_and_viz_draw_figure_1_from_one_det_and_one_stoch_run(tmp_path, capsys):
    from tinyscope.cli import main
    from tinyscope.runs.rundir import load_run, run_experiment
    from tinyscope.studies.spatial_induction.figure1 import figure1_for_paths, partner_run

    for regime in ("det", "stoch"):
        run_experiment(EXPERIMENTS[regime], "smoke", seed=0, out=tmp_path / regime, progress=False)
    assert partner_run(tmp_path / "det", "stoch") == (tmp_path / "stoch").resolve()
    fig = figure1_for_paths(tmp_path / "stoch", tmp_path / "det")
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 6 and titles[0].startswith("Rule 110: ground truth") and titles[3].startswith("Stavskaya")
    assert titles[2] == "Rule 110: greedy rollout" and titles[5] == "Stavskaya p=0.29: sampled AR: P(state 1)"
    image = fig.axes[0].get_images()[0].get_array()
    assert image.shape == (7, 8)  # the run's T x |G|

    assert main(["report", str(tmp_path)]) == 0
    assert (tmp_path / "report" / "figures" / "sih-fig1.png").stat().st_size > 10_000
    assert "figures/sih-fig1.png" in capsys.readouterr().out
    assert main(["viz", str(tmp_path / "det"), "--no-report"]) == 0
    assert (tmp_path / "det" / "figures" / "figure1.png").stat().st_size > 10_000
    alone = load_run(tmp_path / "stoch")
    (view,) = alone.experiment.views(alone)
    assert "both rules" in view.caption
