"""The residual invariant of every model built on the core transformer :class:`Block`.

For layers l = 0 .. L-1 of a model whose residual stream runs through core Blocks:

* ``blocks.{l}.hook_resid_post == blocks.{l+1}.hook_resid_pre`` exactly (bit for bit): nothing is
  added to the stream between two blocks;
* the last ``hook_resid_post`` is what the readout consumes: ``logits == W_U(ln_final(x_L))`` for a
  :class:`Transformer`, ``hook_pooled == mean_T(x_L)`` and ``logits == W_U(ln_final(pooled))`` for
  THEIA's transformer baseline.

The models are every registered experiment's smoke preset (the first preset where there is no
smoke one) whose model holds a core Block, the variants that only an override builds (the
quantified GPT of the NC-FFN study, THEIA's transformer baseline), and a plain Transformer with
each FFN kind of ``models/ffn.py``.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from tinyscope.models.ffn import FFN_KINDS
from tinyscope.models.hooks import HookedModule
from tinyscope.models.transformer import Block, Transformer, TransformerConfig
from tinyscope.runs import registry
from tinyscope.runs.rundir import build
from tinyscope.tasks.base import step_rng

# (experiment, overrides) built only by an override: the quantified GPT, with GELU and NC-FFN
# FFNs, and THEIA's pre-LN transformer baseline
VARIANTS = [
    ("ncffn-lm", ["quant.layers=0,1"]),
    ("ncffn-lm", ["model.ffn=nc", "quant.layers=1"]),
    ("ncffn-lm", ["model.norm=none", "model.final_norm=false", "quant.layers=0"]),
    ("theia-kleene", ["model.arch=transformer"]),
]


def _block_owner(model: nn.Module) -> HookedModule | None:
    """The hooked module whose ``blocks`` are core Blocks (the model itself or a wrapped one)."""
    for m in model.modules():
        if isinstance(m, HookedModule) and isinstance(getattr(m, "blocks", None), nn.ModuleList) \
                and len(m.blocks) and all(isinstance(b, Block) for b in m.blocks):
            return m
    return None


def _cache(model: nn.Module, owner: HookedModule, tokens: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """``run_with_cache`` of ``owner`` while ``model`` (which may wrap it) runs on ``tokens``;
    also records the owner's own output under ``"owner_out"``."""
    seen: dict[str, torch.Tensor] = {}
    handle = owner.register_forward_hook(lambda mod, args, out: seen.__setitem__("owner_out", out.detach()))
    try:
        if owner is model:
            out, cache = model.run_with_cache(tokens)
        else:
            store: dict[str, torch.Tensor] = {}

            def save(x: torch.Tensor, hook) -> None:
                store[hook.name] = x.detach()

            with owner.hooks([(name, save) for name in owner.hook_names]):
                out = model(tokens)
            cache = store
    finally:
        handle.remove()
    return out, {**{k: cache[k] for k in cache}, **seen}


def assert_residual_invariant(model: nn.Module, tokens: torch.Tensor) -> None:
    owner = _block_owner(model)
    assert owner is not None, f"{type(model).__name__} holds no core Blocks"
    model.eval()
    with torch.no_grad():
        _, cache = _cache(model, owner, tokens)
        L = len(owner.blocks)
        for l in range(L - 1):
            post, pre = cache[f"blocks.{l}.hook_resid_post"], cache[f"blocks.{l + 1}.hook_resid_pre"]  # (B, T, D)
            assert torch.equal(post, pre), (f"{type(owner).__name__}: blocks.{l}.hook_resid_post differs from "
                                            f"blocks.{l + 1}.hook_resid_pre by {(post - pre).abs().max().item():.3g}")
        last = cache[f"blocks.{L - 1}.hook_resid_post"]  # (B, T, D)
        if isinstance(owner, Transformer):
            expect = owner.W_U(owner.ln_final(last))  # (B, T, n_out)
        else:  # THEIA's baseline mean-pools the stream before its readout
            assert torch.equal(cache["hook_pooled"], last.mean(1))
            expect = owner.W_U(owner.ln_final(cache["hook_pooled"]))  # (B, n_out)
        assert torch.equal(cache["owner_out"], expect), "the last hook_resid_post does not feed the unembedding"


# The architectures that are not built on the core Block: they have their own residual layout
# and tests (the looped circuit transformer, TraceRelay, THEIA's engines, its chain model and its post-LN
# 4-domain BigTransformer, the circuits study's looped RoPE/FIRE baseline and its CRvNN recursive cell).
NOT_ON_BLOCK = {"CircuitTransformer", "TraceRelay", "Theia", "ChainModel", "BigTransformer", "RelativeLoopedBlock",
                "CRvNN"}


def _built(name: str, preset: str, overrides: list):
    exp = registry.get(name)
    task, model = build(exp, exp.config(preset, overrides=overrides))
    return task, model


def _smoke_cases() -> list:
    cases = []
    for exp in registry.experiments():
        preset = "smoke" if "smoke" in exp.presets else next(iter(exp.presets))
        cases.append((exp.name, preset, []))
    cases += [(name, "smoke", overrides) for name, overrides in VARIANTS]
    return cases


def _on_block(cases: list) -> list:
    out = []
    for name, preset, overrides in cases:
        _, model = _built(name, preset, overrides)
        if type(model).__name__ not in NOT_ON_BLOCK:
            out.append(pytest.param(name, preset, overrides, id=f"{name}-{preset}{'-' if overrides else ''}"
                                                               f"{'-'.join(overrides)}"))
    return out


def test_exactly_the_named_architectures_are_left_out():
    """Every registered model is checked below unless it is one of NOT_ON_BLOCK, and those are
    indeed not built on the core Block."""
    left_out = set()
    for name, preset, overrides in _smoke_cases():
        _, model = _built(name, preset, overrides)
        if type(model).__name__ in NOT_ON_BLOCK:
            assert _block_owner(model) is None, name
            left_out.add(type(model).__name__)
        else:
            assert _block_owner(model) is not None, f"{name}: {type(model).__name__} has no Block"
    assert left_out == NOT_ON_BLOCK


@pytest.mark.parametrize("name, preset, overrides", _on_block(_smoke_cases()))
def test_every_experiment_on_the_transformer_keeps_the_residual_stream(name, preset, overrides):
    task, model = _built(name, preset, overrides)
    tokens = torch.from_numpy(task.sample(step_rng(0, 0), 4).tokens)  # (B, T)
    assert_residual_invariant(model, tokens)


def test_the_variants_are_the_architectures_they_name():
    from tinyscope.studies.ncffn.model import QuantifiedTransformer

    exp = registry.get("ncffn-lm")
    _, model = build(exp, exp.config("smoke", overrides=["quant.layers=0,1"]))
    assert isinstance(model, QuantifiedTransformer) and all(b.quant is not None for b in model.blocks)
    exp = registry.get("theia-kleene")
    _, model = build(exp, exp.config("smoke", overrides=["model.arch=transformer"]))
    assert type(model).__name__ == "TheiaTransformer" and _block_owner(model) is model


@pytest.mark.parametrize("norm", ["pre", "none"])
@pytest.mark.parametrize("kind", sorted(FFN_KINDS))
def test_plain_transformer_with_each_ffn_kind(kind, norm):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=11, n_ctx=10, d_model=16, d_head=4, n_heads=[4, 2, 1], d_mlp=[32, 0, 24],
                            ffn=kind, act="gelu", norm=norm, final_norm=norm == "pre", attn_out_proj=True)
    assert_residual_invariant(Transformer(cfg), torch.randint(0, 11, (3, 10)))


def test_a_declared_quantifier_sits_inside_its_block():
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=7, n_ctx=6, d_model=8, d_head=4, n_heads=[2, 2], d_mlp=[16, 16],
                            norm="pre", attn_out_proj=True)
    model = Transformer(cfg)
    assert not any("quant" in n for n in model.hook_names)  # no sublayer: no hook point for one
    model.blocks[0].add_quant(nn.Linear(8, 8))  # position-wise, hence causal
    model.setup_hooks()
    tokens = torch.randint(0, 7, (2, 6))  # (B, T)
    assert_residual_invariant(model, tokens)
    _, cache = model.run_with_cache(tokens)
    mid, mlp, quant = (cache[f"blocks.0.hook_{h}"] for h in ("resid_mid", "mlp_out", "quant_out"))  # (B, T, D)
    torch.testing.assert_close(cache["blocks.0.hook_resid_post"], mid + mlp + quant)
    assert "blocks.1.hook_quant_out" not in cache
    with pytest.raises(ValueError, match="already has"):
        model.blocks[0].add_quant(nn.Linear(8, 8))
