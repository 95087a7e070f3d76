import json

import numpy as np
import pytest
import torch

from tinyscope.studies.spatial_induction.bayes import stream_predictive
from tinyscope.studies.spatial_induction.constructions.addressing import (
    isolating_kernel,
    kernel_features,
    kernel_form,
    offset_form,
    offset_scores,
    positional_table,
)
from tinyscope.studies.spatial_induction.constructions.colorings import is_admissible, periodic_coloring
from tinyscope.studies.spatial_induction.constructions.dedicated_heads import construction_one, table8
from tinyscope.studies.spatial_induction.constructions.shared_head import construction_two
from tinyscope.studies.spatial_induction.experiment import task_config
from tinyscope.studies.spatial_induction.lattice import elementary, von_neumann
from tinyscope.studies.spatial_induction.serialize import Layout
from tinyscope.studies.spatial_induction.task import CellularTask

SMALL_POOLS = [600, 60, 60]  # App. I.1's pool shape, built in seconds (the paper sizes take minutes once)
SETTINGS = {"eca": task_config("eca", "det"), "v3": task_config("v3", "det", pool_sizes=SMALL_POOLS),
            "vn2d": task_config("vn2d", "det", pool_sizes=SMALL_POOLS)}


def test_sizes_equal_table_8():
    rows = {name: table8(CellularTask(cfg).layout) for name, cfg in SETTINGS.items()}
    got = {name: (r["I"]["heads"], r["I"]["d_mlp"], r["I"]["d_S"], r["I"]["d_p"], r["I"]["B3_width"],
                  r["I"]["d_model"], r["I"]["block_error_threshold"], round(r["I"]["gamma"], 3), r["I"]["Lambda"],
                  r["II"]["colors"], r["II"]["d_mlp_bound"], r["II"]["B3_agg_width"]) for name, r in rows.items()}
    assert got == {
        "eca": (4, 0, 2, 5, 8, 20, 1 / 8, 0.076, 95, 4, 38, 5),
        "v3": (4, 0, 2, 5, 12, 26, 1 / 8, 0.019, 420, 4, 70, 5),
        "vn2d": (8, 0, 4, 7, 16, 30, 1 / 12, 0.5, 18, 12, 206, 13),
    }
    for name, cfg in SETTINGS.items():  # the compiled models have exactly these widths
        c = construction_one(CellularTask(cfg).layout)
        s = c.sizes()
        assert (s["heads"], s["d_model"], s["d_p"], s["B3_width"], s["Lambda"]) == (
            [rows[name]["I"]["heads"], 1], rows[name]["I"]["d_model"], rows[name]["I"]["d_p"],
            rows[name]["I"]["B3_width"], rows[name]["I"]["Lambda"])
        assert c.model.cfg.d_model == rows[name]["I"]["d_model"] and c.model.cfg.d_mlp == [0, 0]


def test_colorings_of_table_6_are_admissible():
    for lat, M in ((elementary(16), 4), (elementary(32, 3), 4), (von_neumann(6, 6), 12)):
        color = periodic_coloring(lat.routing_set(), lat.shape)
        assert color.max() + 1 == M and is_admissible(color, lat.routing_set())
    bad = np.arange(16) % 3  # period 3 puts equal colors 3 apart, and 3 is in U - U
    assert not is_admissible(bad, elementary(16).routing_set())


def test_the_bilinear_form_realizes_the_kernels():
    for lat in (elementary(7), von_neumann(4, 5)):
        layout = Layout(lat, 4)
        P = positional_table(layout)[:, :-1]  # addressing coordinates (zeta excluded)
        for delta in lat.routing_set():
            np.testing.assert_allclose(P @ offset_form(layout, delta, 0.7) @ P.T, offset_scores(layout, delta, 0.7),
                                       atol=1e-12)


def test_isolating_kernels_and_their_bilinear_form():
    for lat in (elementary(16), von_neumann(6, 6), von_neumann(5, 7)):
        U = lat.routing_set()
        omegas, a, b, gamma = isolating_kernel(lat.shape, U)
        cells = np.array(list(np.ndindex(*lat.shape)))
        feats = kernel_features(cells, omegas, lat.shape)  # (|G|, 2m)
        scores = feats[0] @ kernel_form(a, b) @ feats.T  # g(x - 0) for every x
        phases = 2 * np.pi * (cells[:, None, :] * omegas[None] / np.asarray(lat.shape)).sum(-1)
        np.testing.assert_allclose(scores, (a * np.cos(phases) + b * np.sin(phases)).sum(-1), atol=1e-12)
        in_U = np.array([tuple(c) in {tuple(np.mod(u, lat.shape)) for u in U} for c in cells])
        assert scores[in_U].min() - scores[~in_U].max() == pytest.approx(gamma) and gamma > 0


@pytest.mark.parametrize("name", ["eca", "v3", "vn2d"])
def test_construction_two_is_exact_and_has_the_table_8_widths(name):
    cfg = SETTINGS[name]
    task, batch = covered(cfg, 4)
    c = construction_two(task.layout)
    row = table8(task.layout)["II"]
    s = c.sizes()
    assert (s["colors"], s["d_mlp"], s["B3_agg_width"]) == (row["colors"], row["d_mlp_bound"], row["B3_agg_width"])
    assert c.model.cfg.d_mlp[0] == row["d_mlp_bound"] and c.model.cfg.n_heads == [1, 1]
    c.model.double()
    out = c.predictive(batch.tokens).numpy()
    _, resolvable = stream_predictive(task.layout, batch.meta["traj"])
    scored = batch.loss_mask & resolvable
    assert (out.argmax(-1) == batch.targets)[scored].all()
    stoch = task_config(name, "stoch")
    task, batch = covered(stoch, 2)
    q, resolvable = stream_predictive(task.layout, batch.meta["traj"], alpha=1.0)
    c = construction_two(task.layout, stochastic=True, kappa=0.01)
    c.model.double()
    out = c.predictive(batch.tokens).numpy()
    assert (q * (np.log(q) - np.log(out))).sum(-1)[batch.loss_mask & resolvable].max() <= 0.01


def covered(cfg, n, seed=0):
    task = CellularTask(cfg)
    tables, traj = task.trajectories(np.random.default_rng(seed), n, "test", covered=True)
    return task, task.batch(tables, traj, scored_only=True)


@pytest.mark.parametrize("name", ["eca", "v3", "vn2d"])
def test_deterministic_circuits_predict_every_resolvable_cell(name):
    task, batch = covered(SETTINGS[name], 6)
    c = construction_one(task.layout)
    pred = c.model(torch.from_numpy(batch.tokens))[..., :task.lattice.V].argmax(-1).numpy()
    _, resolvable = stream_predictive(task.layout, batch.meta["traj"])
    scored = batch.loss_mask & resolvable
    assert scored.sum() > 100 and (pred == batch.targets)[scored].all()


@pytest.mark.parametrize("name", ["eca", "vn2d"])
def test_stochastic_circuits_are_within_kappa_of_the_bayes_posterior(name):
    cfg = task_config(name, "stoch")
    task, batch = covered(cfg, 4)
    q, resolvable = stream_predictive(task.layout, batch.meta["traj"], alpha=1.0)
    scored = batch.loss_mask & resolvable
    for kappa in (0.1, 0.01, 0.001):
        c = construction_one(task.layout, stochastic=True, kappa=kappa)
        c.model.double()
        out = c.predictive(batch.tokens).numpy()
        kl = (q * (np.log(q) - np.log(out))).sum(-1)[scored]
        assert kl.max() <= kappa
        np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-9)


def test_positional_width_is_grid_independent_and_accuracy_stays_exact():
    widths = set()
    for cfg in (task_config("eca", "det", grid=[64], T=4, T0=3), task_config("eca", "det", grid=[256], T=3, T0=2),
                task_config("vn2d", "det", grid=[10, 10], T=4, T0=3, pool_sizes=SMALL_POOLS)):
        task, batch = covered(cfg, 2)
        c = construction_one(task.layout)
        widths.add((task.lattice.dim, c.sizes()["d_p"]))
        pred = c.model(torch.from_numpy(batch.tokens))[..., :2].argmax(-1).numpy()
        _, resolvable = stream_predictive(task.layout, batch.meta["traj"])
        assert (pred == batch.targets)[batch.loss_mask & resolvable].all()
    assert widths == {(1, 5), (2, 7)}


def test_construct_cli_writes_a_run_that_eval_reads(tmp_path, capsys):
    from tinyscope.cli import main

    out = tmp_path / "c"
    assert main(["construct", "eca", "--grid", "8", "--T", "5", "--T0", "3", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["metrics"]["test_tf_cell_acc"] == 1.0 and results["construction"]["sizes"]["d_model"] == 20
    capsys.readouterr()
    assert main(["eval", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["test_tf_cell_acc"] == 1.0
    capsys.readouterr()
    assert main(["construct", "eca", "--construction", "II", "--grid", "8", "--T", "5", "--T0", "3",
                 "--out", str(tmp_path / "d")]) == 0
    assert json.loads((tmp_path / "d" / "results.json").read_text())["metrics"]["test_tf_cell_acc"] == 1.0
    assert main(["construct", "eca", "--out", str(out)]) == 2  # never overwrites a run


@pytest.mark.parametrize("setting, grid, T, T0, small", [("eca", ["8"], 5, 3, ["4"]), ("v3", ["12"], 9, 8, ["12"]),
                                                          ("vn2d", ["5", "5"], 8, 7, ["5", "5"])])
def test_construct_writes_a_complete_run_for_every_setting(tmp_path, capsys, setting, grid, T, T0, small):
    """`tinyscope construct SETTING` exits 0 with a whole run directory (the v3 one used to exit 2
    after writing part of it); a context that cannot be covered exits 2 and writes nothing."""
    from tinyscope.cli import main

    out = tmp_path / setting
    args = ["construct", setting, "--grid", *grid, "--T", str(T), "--T0", str(T0), "--set", "task.n_test=4",
            "--set", "task.n_val=2", "--out", str(out)]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["metrics"]["test_tf_cell_acc"] == 1.0 and len(results["grid_independence"]) == 3
    assert all(row["acc"] == 1.0 for row in results["grid_independence"])
    assert (out / "config.json").exists() and (out / "checkpoints" / "best.safetensors").exists()
    capsys.readouterr()
    bad = tmp_path / f"{setting}-bad"
    # one context step has fewer cells than there are configurations: nothing is ever covered
    assert main(["construct", setting, "--grid", *small, "--T", "3", "--T0", "2", "--set", "task.n_test=4",
                 "--set", "task.coverage_tries=2", "--out", str(bad)]) == 2
    assert not bad.exists()
