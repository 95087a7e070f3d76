"""The quantified GPT: equal parameter counts, hooks, the ncffn-lm smoke run and legibility."""
import math

import numpy as np
import pytest
import torch

from tinyscope.models.transformer import Transformer
from tinyscope.models.utils import count_parameters
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.ncffn.experiment import NCLMExperiment, gpt
from tinyscope.studies.ncffn.legibility import (
    format_detectors,
    half_life_summary,
    half_lives,
    licensor_detectors,
    plot_half_lives,
    unit_trace,
)
from tinyscope.studies.ncffn.model import QuantifiedTransformer, equal_parameter_widths, parameter_report
from tinyscope.studies.ncffn.quantifiers import QuantifierConfig


def test_equal_parameter_widths_and_forward():
    cfg = gpt(vocab_size=50, n_ctx=16, d_model=32, d_head=8, d_mlp=[128, 128])
    quant = QuantifierConfig(layers=[0, 1], n_exist=4, n_prop=4)
    base = count_parameters(Transformer(cfg))
    model = QuantifiedTransformer(equal_parameter_widths(cfg, quant), quant)
    assert abs(count_parameters(model) - base) <= 2 * (2 * 32 + 1)  # within one FFN unit per layer
    rep = parameter_report(model)
    assert rep["total"] == count_parameters(model) and rep["quantifiers"] > 0
    tokens = torch.randint(0, 50, (2, 16))
    out, cache = model.run_with_cache(tokens)
    assert out.shape == (2, 16, 50)
    assert cache["blocks.1.quant.hook_exist"].shape == (2, 16, 4)
    # no quantifier layers: exactly the foundation Transformer
    torch.manual_seed(0)
    plain = QuantifiedTransformer(cfg)
    torch.manual_seed(0)
    torch.testing.assert_close(plain(tokens), Transformer(cfg)(tokens))


def test_quantifier_sits_inside_its_block_and_keeps_the_parameter_names():
    cfg = gpt(vocab_size=50, n_ctx=16, d_model=32, d_head=8, d_mlp=[64, 64])
    torch.manual_seed(0)
    model = QuantifiedTransformer(cfg, QuantifierConfig(layers=[1], n_exist=4, n_prop=4)).eval()
    tokens = torch.randint(0, 50, (2, 16))  # (B, T)
    # the formula written out: x + Attn(LN x), + FFN(LN x), + Q(LN x), then the next layer
    x = model.embed(tokens)  # (B, T, D)
    for b in model.blocks:
        x = x + b.attn(b.ln1(x))  # (B, T, D)
        x = x + b.mlp(b.ln2(x))  # (B, T, D)
        if b.quant is not None:
            x = x + b.quant(b.ln_quant(x))  # (B, T, D)
    logits, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(logits, model.W_U(model.ln_final(x)))
    assert torch.equal(cache["blocks.0.hook_resid_post"], cache["blocks.1.hook_resid_pre"])
    torch.testing.assert_close(cache["blocks.1.hook_resid_post"],
                               cache["blocks.1.hook_resid_mid"] + cache["blocks.1.hook_mlp_out"]
                               + cache["blocks.1.hook_quant_out"])
    assert "blocks.0.hook_quant_out" not in cache
    # checkpoints written before the quantifier moved into Block name its weights the same way
    names = set(model.state_dict())
    assert {"blocks.1.ln_quant.weight", "blocks.1.ln_quant.bias", "blocks.1.quant.W_m.weight",
            "blocks.1.quant.W_o.bias", "blocks.1.quant.theta_gamma", "blocks.1.quant.theta_lam"} <= names
    assert not any("quant" in n for n in names if n.startswith("blocks.0."))


def test_kv_cached_decoding_refuses_a_quantified_model_in_one_line():
    from tinyscope.errors import ConfigError
    from tinyscope.models.kv_cache import KVCacheDecoder

    cfg = gpt(vocab_size=50, n_ctx=16, d_model=32, d_head=8, d_mlp=[64, 64])
    model = QuantifiedTransformer(cfg, QuantifierConfig(layers=[1], n_exist=4, n_prop=4))
    with pytest.raises(ConfigError, match=r"blocks \[1\] have one"):
        KVCacheDecoder(model)
    KVCacheDecoder(QuantifiedTransformer(cfg))  # no quantifier: the plain decoder


def test_smoke_run_and_legibility(tmp_path):
    res = run_experiment("ncffn-lm", "smoke", overrides=["model.ffn=nc", "quant.layers=0,1"], out=tmp_path / "r",
                         progress=False)
    m = res["metrics"]
    assert math.isfinite(m["val_loss"]) and 0 <= m["licensed_acc"] <= 1 and m["n_quantifier_units"] == 16
    assert 0 < m["licensed_acc_bayes"] <= 1
    run = load_run(tmp_path / "r")
    rows = half_lives(run.model)
    assert len(rows) == 16 and all(r["half_life"] > 0 for r in rows)
    summary = half_life_summary(run.model, latch_half_life=1e9)
    assert summary["n_latch"] == 0 and summary["half_life_median"] == np.median([r["half_life"] for r in rows])
    table = licensor_detectors(run.model, run.task.eval_set(), top=2)
    assert set(table) == {"comparative", "passive participle", "negative polarity (neither)"}
    assert all(len(v) == 2 for v in table.values())
    assert "licensor" in format_detectors(table)
    trace = unit_trace(run.model, run.task.eval_set().tokens[0], 0, 1, run.task.vocab)
    assert len(trace) == run.task.eval_set().tokens.shape[1] and all(0 <= t[1] <= 1 for t in trace)
    assert plot_half_lives(run.model).axes
    assert [v.name for v in NCLMExperiment().views(run)] == ["half_lives"]
