"""KV-cache decoding, autoregressive rollouts and the teacher-forced metrics of App. I.3."""
import numpy as np
import pytest
import torch

from tinyscope.models.kv_cache import KVCacheDecoder
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.studies.spatial_induction.coverage import is_covered
from tinyscope.studies.spatial_induction.evolve import evolve
from tinyscope.studies.spatial_induction.lattice import elementary
from tinyscope.studies.spatial_induction.metrics import kl, teacher_forced_metrics
from tinyscope.studies.spatial_induction.rollout import (
    autoregressive_metrics,
    generate,
    kgram_rollout,
    rollout_figure,
    rollout_panel,
    teacher_forced_probs,
)
from tinyscope.studies.spatial_induction.rules import stavskaya, wolfram
from tinyscope.studies.spatial_induction.serialize import Layout
from tinyscope.studies.spatial_induction.task import CellularConfig, CellularTask


def tiny_model(n_ctx, vocab=4, heads=(4, 1), mlp=(0, 32), d=16):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=vocab, n_ctx=n_ctx, d_model=d, d_head=d // heads[0], n_heads=list(heads),
                            d_mlp=list(mlp), norm="pre", attn_out_proj=True, qkv_bias=True, unembed_bias=False)
    return Transformer(cfg).eval()


@pytest.mark.parametrize("heads,mlp", [((4, 1), (0, 32)), ((1, 1), (32, 32))])
def test_kv_cache_equals_full_forward(heads, mlp):
    model = tiny_model(40, heads=heads, mlp=mlp)
    tokens = torch.randint(0, 4, (3, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)  # (3, 40, 4)
    dec = KVCacheDecoder(model)
    parts = [dec.prefill(tokens[:, :7])] + [dec.step(tokens[:, i])[:, None] for i in range(7, 40)]
    assert torch.allclose(torch.cat(parts, 1), full, atol=1e-5)
    with pytest.raises(ValueError):
        dec.step(tokens[:, 0])  # past the context


def test_rollout_is_consistent_with_parallel_forward_and_inserts_separators():
    layout = Layout(elementary(6), 5)
    model = tiny_model(layout.input_length)
    rng = np.random.default_rng(0)
    traj = evolve(layout.lattice, np.stack([wolfram(30)] * 4), 5, rng)
    gen, q = generate(model, layout, traj, T0=2, greedy=True)
    assert np.array_equal(gen[:, :2], traj[:, :2]) and np.isnan(q[:, :2]).all()
    # the generated stream, re-read with teacher forcing, gives the same distributions and argmaxes
    tf = teacher_forced_probs(model, layout, gen)
    assert np.allclose(tf[:, 2:], q[:, 2:], atol=1e-5)
    assert np.array_equal(gen[:, 2:], q[:, 2:].argmax(-1))
    stream = layout.serialize(gen)
    assert (stream[:, 6::7] == layout.time_sep).all()  # separators where the layout puts them


def test_kgram_rollout_reproduces_a_covered_deterministic_rule():
    lat = elementary(16)
    rng = np.random.default_rng(0)
    x = evolve(lat, np.stack([wolfram(110)] * 32), 10, rng)
    x = x[is_covered(lat, x, 4)]
    out = kgram_rollout(lat, x, 4, np.random.default_rng(1), alpha=1e-9)
    assert np.array_equal(out, x)


def test_kl_and_teacher_forced_metrics_on_an_oracle():
    p = torch.tensor([[0.5, 0.5], [1.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(kl(p, torch.log(p.clamp_min(1e-300))), torch.zeros(2, dtype=torch.float64))
    assert torch.isclose(kl(p[:1], torch.log(torch.tensor([[0.25, 0.75]], dtype=torch.float64)))[0],
                         torch.tensor(0.5 * np.log(2) + 0.5 * np.log(0.5 / 0.75), dtype=torch.float64))
    task = CellularTask(CellularConfig(rules="stochastic", T=8, T0=5, n_val=32))
    ev = task.eval_set("val")
    from tinyscope.studies.spatial_induction.bayes import stream_predictive

    q, _ = stream_predictive(task.layout, ev.meta["traj"], alpha=1.0)
    logits = torch.zeros(*ev.tokens.shape, 4, dtype=torch.float64)
    logits[..., :2] = torch.log(torch.from_numpy(q))  # a model that outputs the k-gram predictive
    m = teacher_forced_metrics(logits, task.layout, ev.meta["traj"], ev.targets, ev.loss_mask, ev.meta["tables"], True)
    assert m["tf_kl_kgram"] < 1e-9
    assert abs(m["tf_cell_acc"] - m["kgram_acc"]) < 0.02  # equal up to argmax ties
    assert m["tf_kl_true"] == pytest.approx(m["kgram_kl_true"], abs=1e-9)


def test_autoregressive_metrics_and_rollout_figure():
    task = CellularTask(CellularConfig(grid=[8], T=5, T0=3, rules="stochastic", n_val=8))
    model = tiny_model(task.n_ctx)
    traj = task.eval_set("val").meta["traj"]
    m = autoregressive_metrics(model, task.layout, traj, 3, stochastic=True, seed=42, batch_size=4)
    assert set(m) == {"ar_cell_acc", "ar_cell_acc_kgram", "ar_kl_kgram"}
    assert m["ar_kl_kgram"] > 0 and 0 <= m["ar_cell_acc"] <= 1
    assert m == autoregressive_metrics(model, task.layout, traj, 3, stochastic=True, seed=42, batch_size=4)
    lat = task.lattice
    x = evolve(lat, stavskaya(0.29)[None].repeat(1, 0), 5, np.random.default_rng(0))
    panel = rollout_panel(model, task.layout, x, 3, True, "Stavskaya")
    fig = rollout_figure([panel, dict(panel, title="again")], 3)
    assert len(fig.axes) == 6
    fig.canvas.draw()
