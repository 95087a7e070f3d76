import numpy as np
import pytest
import torch

from tinyscope.cli import main
from tinyscope.errors import ConfigError
from tinyscope.runs import registry
from tinyscope.runs.rundir import load_run
from tinyscope.studies.spatial_induction.construction_sets import query_sets, routing_positions
from tinyscope.studies.spatial_induction.routing_heads import distinct_routing_peaks, routing_coverage, routing_mass


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Construction I on ECA: one layer-1 head per routing cell."""
    out = tmp_path_factory.mktemp("c") / "c"
    assert main(["construct", "eca", "--grid", "8", "--T", "5", "--T0", "3", "--out", str(out)]) == 0
    return load_run(out)


def _streams(run, n=8):
    """Trajectories (n, T, W) of held-out rules and their input tokens (n, N_in)."""
    tables, traj = run.task.trajectories(np.random.default_rng(0), n, "test", covered=True)
    return traj, run.task.batch(tables, traj, scored_only=True).tokens


def test_routing_positions_are_the_query_sets_routing_cells(compiled):
    layout, T0 = compiled.task.layout, compiled.task.cfg.T0
    traj, _ = _streams(compiled, 2)
    sets = query_sets(layout, traj, T0)
    queries, pos = routing_positions(layout, T0)
    assert np.array_equal(sets.pos[:len(queries)], queries)
    for i in range(len(queries)):
        assert set(pos[i].tolist()) == set(np.flatnonzero(sets.routing[i]).tolist())


def test_construction_one_points_every_head_at_its_own_cell(compiled):
    _, tokens = _streams(compiled)
    mass = routing_mass(compiled.model, tokens, compiled.task.layout, compiled.task.cfg.T0)  # (H, |U|)
    U = len(compiled.task.lattice.routing_set())
    assert mass.shape == (compiled.model.blocks[0].attn.n_heads, U)
    assert mass.max(-1).values.min() > 0.9
    assert distinct_routing_peaks(mass) == U == 4


def test_routing_coverage_is_the_most_one_head_puts_on_the_routing_cells(compiled):
    """A weighted gather of the whole neighbourhood (the Shared-head code, 4:2:1 plus the cell
    below) covers ~1 with one peak; a head that reads older rows covers little; Construction I's
    heads each cover their own cell, so its coverage is one cell's mass."""
    gather = torch.tensor([[0.52, 0.26, 0.13, 0.06]], dtype=torch.float64)
    assert routing_coverage(gather) == pytest.approx(0.97) and distinct_routing_peaks(gather) == 1
    older_rows = torch.tensor([[0.15, 0.10, 0.06, 0.03]], dtype=torch.float64)
    assert routing_coverage(older_rows) == pytest.approx(0.34)
    _, tokens = _streams(compiled)
    mass = routing_mass(compiled.model, tokens, compiled.task.layout, compiled.task.cfg.T0)  # (H, |U|)
    assert routing_coverage(mass) == pytest.approx(float(mass.sum(-1).max())) and 0.9 < routing_coverage(mass) <= 1.0 + 1e-6


def test_copies_of_one_head_point_at_one_cell(compiled):
    """The V = 3 failure: layer-1 heads that are copies of one head."""
    model = compiled.model
    attn = model.blocks[0].attn
    Dh = attn.W_Q.out_features // attn.n_heads
    with torch.no_grad():
        for W in (attn.W_Q, attn.W_K):
            for h in range(1, attn.n_heads):
                W.weight[h * Dh:(h + 1) * Dh] = W.weight[:Dh]
                if W.bias is not None:
                    W.bias[h * Dh:(h + 1) * Dh] = W.bias[:Dh]
    _, tokens = _streams(compiled)
    assert distinct_routing_peaks(routing_mass(model, tokens, compiled.task.layout, compiled.task.cfg.T0)) == 1


def test_diffuse_heads_point_nowhere():
    mass = torch.tensor([[0.02, 0.03, 0.01, 0.02],   # diffuse
                         [0.50, 0.25, 0.14, 0.01],
                         [0.49, 0.26, 0.12, 0.01],
                         [0.10, 0.05, 0.60, 0.02]], dtype=torch.float64)
    assert distinct_routing_peaks(mass) == 2
    assert distinct_routing_peaks(mass, floor=0.55) == 1
    assert distinct_routing_peaks(torch.full((4, 4), 0.01, dtype=torch.float64)) == 0


def test_the_validation_reports_routing_peaks_only_when_asked():
    exp = registry.get("sih-eca-dedicated-det")
    for n in (0, 4):
        cfg = exp.config("smoke", seed=0, overrides=[f"eval.head_peaks_n={n}"])
        task = exp.build_task(cfg)
        metrics = exp.evaluator(cfg, task)(exp.build_model(cfg, task))
        assert ("val_l1_routing_peaks" in metrics) == ("val_l1_routing_coverage" in metrics) == (n > 0)
        if n:
            assert metrics["val_l1_routing_peaks"] in {0.0, 1.0, 2.0, 3.0, 4.0}
            assert 0.0 <= metrics["val_l1_routing_coverage"] <= 1.0 + 1e-6


def test_a_negative_sample_count_is_refused():
    from tinyscope.studies.spatial_induction.experiment import SihEvalConfig

    with pytest.raises(ConfigError, match="head_peaks_n"):
        SihEvalConfig(head_peaks_n=-1)


def test_the_v3_dedicated_preset_gates_on_the_heads_and_eca_on_accuracy():
    v3 = registry.get("sih-v3-dedicated-det").config("cpu", seed=0)
    assert (v3.train.gate_metric, v3.train.gate_step, v3.train.gate_threshold) == ("val_l1_routing_peaks", 3000, 3)
    assert v3.eval.head_peaks_n > 0 and v3.restarts == 4
    eca = registry.get("sih-eca-dedicated-det").config("cpu", seed=0)
    assert (eca.train.gate_metric, eca.eval.head_peaks_n) == ("val_tf_cell_acc", 0)


def test_a_routing_gate_without_the_trajectories_it_reads_is_refused():
    exp = registry.get("sih-eca-shared-det")
    with pytest.raises(ConfigError, match="head_peaks_n"):
        exp.config("smoke", seed=0, overrides=["train.gate_metric=val_l1_routing_coverage", "train.gate_step=10"])
    cfg = exp.config("smoke", seed=0, overrides=["train.gate_metric=val_l1_routing_coverage", "train.gate_step=10",
                                                 "eval.head_peaks_n=4"])
    assert cfg.train.gate_metric == "val_l1_routing_coverage"
