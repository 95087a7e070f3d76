import copy

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.log_icot.absorption import (
    KeyGroups,
    absorption_figures,
    absorption_over_stages,
    attention_patterns,
    format_mass,
    head_ablation,
    head_level_mass,
    level_mass,
    own_level_column,
    probe_table,
    stage_end_steps,
)
from tinyscope.studies.log_icot.model import ConstrainedParityConfig, ConstrainedParityTransformer, set_tree_attention
from tinyscope.studies.log_icot.task import Parity, ParityConfig


@pytest.fixture(scope="module")
def tree_model():
    task = Parity(ParityConfig(n=12, k=8, subset_seed=4))
    model = ConstrainedParityTransformer(ConstrainedParityConfig(), 12, 8)
    set_tree_attention(model, task.subset)
    return task, model


def test_key_groups_partition_bits_and_slots(tree_model):
    task, _ = tree_model
    groups = KeyGroups.of(task)
    assert groups.names == ["bits (selected)", "bits (other)", "level 1 slots", "level 2 slots"]
    flat = np.concatenate(groups.members)
    assert len(flat) == len(set(flat.tolist())) == 12 + 6
    assert set(groups.members[0].tolist()) == set(task.subset.tolist())


def test_exact_tree_gives_the_staircase_of_level_mass(tree_model):
    task, model = tree_model
    patterns = attention_patterns(model, task, n_examples=64)
    assert patterns.shape == (3, 19, 19)
    mass, names = level_mass(patterns, task)
    expect = np.zeros((3, 4))
    expect[0, 0] = expect[1, 2] = expect[2, 3] = 1.0  # layer 1 -> selected bits, layer l -> level l-1 slots
    np.testing.assert_allclose(mass, expect, atol=1e-6)
    assert "layer" in format_mass({"stage": 0, "step": 5, "mass": mass, "groups": names})


def test_probes_read_each_level_after_its_layer(tree_model):
    task, model = tree_model
    table, rows = probe_table(model, task, n_train=300, n_test=300)
    assert rows == ["layer 1", "layer 2", "layer 3"]
    assert table.shape == (3, 3)
    for layer in range(3):
        for level in range(3):
            if level <= layer:
                assert table[layer, level] == pytest.approx(1.0)  # computed by now and kept
            else:
                assert table[layer, level] < 0.7  # not computed yet: about chance


@pytest.fixture(scope="module")
def standard_model():
    from tinyscope.models.transformer import Transformer
    from tinyscope.studies.log_icot.experiment import parity_model

    task = Parity(ParityConfig(n=10, k=4, subset_seed=1))
    torch.manual_seed(0)
    return task, Transformer(parity_model(10, 4, d_model=16, n_heads=2, d_mlp=32)).eval()


def test_head_level_mass_averages_to_the_layers_own_level_mass(standard_model):
    task, model = standard_model
    per_head = head_level_mass(model, task, n_examples=64)  # (L, H)
    mass, _ = level_mass(attention_patterns(model, task, n_examples=64), task)
    assert per_head.shape == (2, 2)
    own = [mass[layer, own_level_column(layer)] for layer in range(2)]
    np.testing.assert_allclose(per_head.mean(1), own, atol=1e-6)


def test_head_ablation_leaves_answers_of_a_silenced_head_and_changes_those_of_a_needed_one(standard_model):
    task, model = standard_model
    model = copy.deepcopy(model)
    with torch.no_grad():
        model.blocks[1].attn.W_O.weight[:, 8:] = 0  # head 1 of layer 2 writes nothing
        model.blocks[1].attn.W_O.weight[:, :8] *= 50  # head 0 of layer 2 dominates the answer
        for p in model.blocks[1].mlp.parameters():
            p.zero_()
        model.W_U.bias.zero_()
    share = head_ablation(model, task, n_examples=256)  # (L, H)
    assert share.shape == (2, 2)
    assert share[1, 1] == 1.0  # a head that writes nothing cannot matter
    assert share[1, 0] < 0.95  # replacing the dominant head's input-dependent part moves answers (0.83)


def test_stage_end_steps_pick_the_last_checkpointed_evaluation():
    metrics = [{"split": "eval", "step": s, "stage": st} for s, st in [(0, 0), (10, 0), (20, 1), (25, 1), (30, 2)]]
    metrics.append({"split": "train", "step": 30, "loss": 0.1})
    assert stage_end_steps(metrics, [0, 10, 20, 30]) == {0: 10, 1: 20, 2: 30}


def test_figures_of_a_constrained_logicot_run(tmp_path):
    torch.manual_seed(0)
    out = tmp_path / "run"
    res = run_experiment("parity-logicot", "smoke", overrides=["arch=constrained", "train.lr=0.1"], out=out,
                         progress=False, report="none")
    assert res["metrics"]["n_stages"] == 2
    run = load_run(out)
    run.load_step(run.checkpoint_steps()[0])  # weights no stage ends at
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    stages = absorption_over_stages(run, n_examples=64, probes=False)
    after = run.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the stages load into copies
    assert [s["stage"] for s in stages] == list(range(len(stages))) and stages
    figs = absorption_figures(run)
    assert set(figs) == {"absorption_attention", "absorption_probes"}
    assert all(isinstance(f, Figure) for f in figs.values())
