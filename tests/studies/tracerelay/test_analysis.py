"""The Most-Freq OOD diagnosis: unwrapped phases against the model's wrapped ones, the count
fit, the aliasing measure by hand, the increment rescaling, and the analyses on a smoke run."""
import math

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from tinyscope.runs.experiment import AnalysisOptions
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.tracerelay.analysis import (
    ANALYSES,
    aliasing,
    count_fit,
    prompt_phases,
    rescale_variants,
    scaled_increments,
    unwrapped_phase,
)
from tinyscope.studies.tracerelay.model import TraceRelay, TraceRelayConfig
from tinyscope.studies.tracerelay.ops.phase_scan import phase_scan_reference
from tinyscope.studies.tracerelay.task import MostFreq, MostFreqConfig


def test_unwrapped_phase_wraps_to_the_reference_scan():
    torch.manual_seed(0)
    B, T, d, W = 2, 37, 4, 8
    delta = (torch.rand(B, T, d) * 2 - 1) * math.pi  # (B, T, d)
    valid = torch.rand(B, T) > 0.2
    phi = unwrapped_phase(delta, valid, W)
    u = torch.cat([torch.zeros(B, W, d), delta[:, :T - W]], 1)
    q = torch.cat([torch.zeros(B, W, dtype=torch.bool), valid[:, :T - W]], 1)
    theta, _ = phase_scan_reference((u * q[..., None]).double(), q, W)
    assert torch.allclose(torch.remainder(phi, 2 * math.pi), theta, atol=1e-9)
    assert phi.abs().max() > 2 * math.pi  # the sums do leave the first turn


def test_prompt_phases_match_the_hooked_phase():
    torch.manual_seed(1)
    task = MostFreq(MostFreqConfig(V=3, gap=1, min_len=8, max_len=40))
    model = TraceRelay(TraceRelayConfig(vocab_size=6, n_out=4, d_model=16, d_trace=[8, 8, 8], n_heads=2, d_ffn=32,
                                        left_window=3, right_window=1, stride=2)).eval()
    src = task.eval_set(40, 5, 3).tokens[:, :40]
    layers = prompt_phases(model, task, src, bs=2)
    assert len(layers) == 3 and layers[0]["phi"].shape == (5, 2, 8) and layers[0]["trace"].shape == (41, 8)
    for layer in layers:
        diff = np.mod(layer["phi"] - layer["theta"], 2 * math.pi)
        assert np.minimum(diff, 2 * math.pi - diff).max() < 1e-4


def test_count_fit_finds_a_linear_count_channel():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, (200, 5)).astype(float)
    totals = np.stack([counts @ [0.3, -0.1, 0, 0.2, 0] + 1.0, rng.normal(size=200)], 1)  # (200, 2)
    r2, coef = count_fit(totals, counts)
    assert r2[0] > 0.999 and r2[1] < 0.1
    assert np.allclose(coef[:, 0], [0.3, -0.1, 0, 0.2, 0, 1.0], atol=1e-8)


def test_aliasing_by_hand():
    id_phi = np.linspace(0.0, 2.0, 1001)  # ID range [0.01, 1.99] after the percentiles
    assert aliasing(id_phi, id_phi)["aliased"] == 0.0
    far = aliasing(id_phi, np.full(100, 2 * math.pi + 1.0))  # one turn up: reads as phase 1.0
    assert far["outside"] == 1.0 and far["aliased"] == 1.0
    near = aliasing(id_phi, np.full(100, 3.0))  # outside, but no ID phase wraps onto it
    assert near["outside"] == 1.0 and near["aliased"] == 0.0
    wide = aliasing(id_phi, np.linspace(0, 4 * math.pi, 1001))
    assert wide["turns"] == pytest.approx(2 * 0.99, abs=0.01)


def test_scaled_increments_scale_one_layer_in_forward_and_step_and_restore():
    torch.manual_seed(2)
    model = TraceRelay(TraceRelayConfig(vocab_size=6, n_out=4, d_model=16, d_trace=[8, 8, 8], n_heads=2, d_ffn=32,
                                        left_window=3, right_window=1, stride=2)).double().eval()
    tokens = torch.randint(0, 6, (2, 30), generator=torch.Generator().manual_seed(4))
    names = [f"blocks.{l}.relay.hook_increment" for l in range(3)]
    plain, before = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    with scaled_increments(model, [1], 0.25):
        scaled, during = model.run_with_cache(tokens, names_filter=lambda n: n in names)
        state = model.prefill(tokens[:, :20])
        for t in range(20, 30):
            logits, state = model.step(tokens[:, t], state)
        assert torch.allclose(logits, scaled[:, -1], atol=1e-10)  # decoding sees the scaling too
    assert torch.equal(during[names[0]], before[names[0]])  # layer 0 is upstream and untouched
    # layer 1's writer reads layer 0's output (Right does not read its own layer's phase): exactly scaled
    assert torch.allclose(during[names[1]], 0.25 * before[names[1]], atol=1e-12)
    assert not torch.allclose(scaled, plain)
    assert all(b.relay.alpha == math.pi for b in model.blocks)  # restored
    assert torch.equal(model(tokens), plain)
    assert rescale_variants(3) == {"none": [], "layer 0": [0], "layer 1": [1], "layer 2": [2],
                                   "layers 0-1": [0, 1], "layers 0-2": [0, 1, 2]}


def test_most_freq_analyses_on_a_smoke_run(tmp_path):
    run_experiment("tracerelay-most-freq", "smoke", out=tmp_path / "mf", progress=False, report="none",
                   overrides=["train.steps=2"])
    run = load_run(tmp_path / "mf")
    assert run.experiment.analyses() == ANALYSES
    res = run.experiment.analyze(run, AnalysisOptions(only=ANALYSES, n=8))
    kept = res.numbers["kept_gaps"]
    assert kept["reference"] == 12 and set(kept["by_length"]) == {"12", "24"}
    row = kept["by_length"]["24"]
    assert row["kept"]["median_relative_gap"] > row["plain"]["median_relative_gap"]
    phase = res.numbers["phase"]
    assert phase["lengths"] == [8, 12, 24, 2048] and len(phase["layers"]) == 3
    assert all(rec["by_length"][str(T)]["wrap_check"] < 1e-3 for rec in phase["layers"] for T in phase["lengths"])
    assert set(res.numbers["precision"]["24"]) == {"fp32", "bf16"}
    resc = res.numbers["rescaled"]
    assert resc["reference"] == 12 and set(resc["by_length"]) == {"24"}
    assert set(resc["by_length"]["24"]["kept"]) == set(rescale_variants(3))
    assert set(res.figures) == {"kept_gaps", "phase_traces", "phase_vs_count", "phase_aliasing", "rescaled"}
    assert all(isinstance(f, Figure) for f in res.figures.values())
