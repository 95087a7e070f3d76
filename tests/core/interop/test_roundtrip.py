"""ours -> TransformerLens 4.x (native TransformerBridge) -> ours: logits and every same-named hook
equal to 1e-5 on plus-last-even and a Shared-head spatial-induction model; the hook-name
conventions that differ (hook_attn_scores); other shapes TransformerLens can hold; bridges
TransformerLens made itself; and the refusals."""
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformer_lens", reason="the interop extra (pip install 'tinyscope[interop]')")

from tests.core.interop.test_layout import experiment_model, perturbed  # noqa: E402
from tinyscope.errors import TinyscopeError  # noqa: E402
from tinyscope.interop import NotRepresentable, from_transformer_lens, to_transformer_lens  # noqa: E402
from tinyscope.interop import bridge as bridge_module  # noqa: E402
from tinyscope.models.transformer import Transformer, TransformerConfig  # noqa: E402
from tinyscope.runs import registry  # noqa: E402
from tinyscope.runs.rundir import build  # noqa: E402

# TransformerLens 4.3's bridge fires the softmaxed pattern at hook_attn_scores; ours holds the
# masked scores before the softmax (classic TransformerLens). Every other shared name is equal.
DIFFERENT = {"hook_attn_scores"}


def tokens_for(model: Transformer, batch: int = 3, seed: int = 0) -> torch.Tensor:
    cfg = model.cfg
    return torch.randint(0, cfg.vocab_size, (batch, cfg.n_ctx), generator=torch.Generator().manual_seed(seed))


def compare(model: Transformer, bridge, atol: float = 1e-5):
    """(shared hook names, names whose values differ by more than ``atol``, logit difference)."""
    tokens = tokens_for(model)
    with torch.no_grad():
        ours_logits, ours = model.run_with_cache(tokens)
        tl_logits, theirs = bridge.run_with_cache(tokens)
    shared = [name for name in ours.keys() if name in theirs]
    differ = [name for name in shared if not torch.allclose(ours[name], theirs[name], atol=atol, rtol=0)]
    return shared, differ, (ours_logits - tl_logits).abs().max().item()


@pytest.fixture(scope="module", params=["plus-last-even", "sih-eca-shared-det"])
def pair(request):
    model = experiment_model(request.param)
    return request.param, model, to_transformer_lens(model)


def test_logits_and_every_shared_hook_agree(pair):
    name, model, bridge = pair
    shared, differ, logit_diff = compare(model, bridge)
    assert logit_diff < 1e-5
    assert sorted(shared) == sorted(model.hook_names)  # TransformerLens has every hook name tinyscope's Transformer has
    assert len(shared) == {"plus-last-even": 15, "sih-eca-shared-det": 28}[name]
    assert {n.rpartition(".")[2] for n in differ} == DIFFERENT
    assert len(differ) == model.cfg.n_layers


def test_hook_attn_scores_is_the_pattern_in_transformer_lens_4(pair):
    _, model, bridge = pair
    tokens = tokens_for(model)
    _, ours = model.run_with_cache(tokens)
    _, theirs = bridge.run_with_cache(tokens)
    for layer in range(model.cfg.n_layers):
        scores = ours["attn_scores", layer]  # (B, H, T, T), -inf above the diagonal
        assert torch.isinf(scores.triu(1)[..., 0, 1:]).all()
        torch.testing.assert_close(theirs["attn_scores", layer], torch.softmax(scores, dim=-1), atol=1e-6, rtol=0)
        torch.testing.assert_close(theirs["attn_scores", layer], ours["pattern", layer], atol=1e-6, rtol=0)


def test_back_from_transformer_lens_is_the_same_model(pair):
    _, model, bridge = pair
    back = from_transformer_lens(bridge)
    assert back.cfg == model.cfg
    state = back.state_dict()
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    shared, differ, logit_diff = compare(back, bridge)
    assert sorted(shared) == sorted(model.hook_names) and logit_diff < 1e-5


def test_double_precision_agrees_to_rounding(pair):
    """float64 leaves no room for a convention error to hide under float32 rounding."""
    _, model, _ = pair
    model64 = perturbed(Transformer(model.cfg)).double()
    bridge = to_transformer_lens(model64)
    _, differ, logit_diff = compare(model64, bridge, atol=1e-12)
    assert logit_diff < 1e-12 and {n.rpartition(".")[2] for n in differ} == DIFFERENT


@pytest.mark.parametrize("kw", [
    dict(d_mlp=[0, 0], norm="pre", final_norm=True, attn_out_proj=True, causal=False),  # attn_only, encoder
    dict(d_mlp=[20, 20], norm="none", final_norm=True, act="gelu", d_vocab_out=5, qkv_bias=True),  # LN only at the end
    dict(n_heads=[2], d_head=3, d_mlp=[20], norm="pre", attn_out_proj=True, ffn="gelu", mlp_bias=False,
         unembed_bias=False, act="silu"),
], ids=["attn-only-bidirectional", "final-norm-only", "d_head-3-gelu-kind"])
def test_other_shapes_transformer_lens_holds(kw):
    torch.manual_seed(0)
    model = perturbed(Transformer(TransformerConfig(**{"vocab_size": 7, "n_ctx": 9, "d_model": 12, "n_heads": [3, 3],
                                                       **kw})))
    bridge = to_transformer_lens(model)
    shared, differ, logit_diff = compare(model, bridge)
    assert logit_diff < 1e-5 and {n.rpartition(".")[2] for n in differ} == DIFFERENT
    _, fired = model.run_with_cache(tokens_for(model))
    # an attention-only bridge has no hook_resid_mid (ours equals hook_resid_post there)
    assert [n for n in fired if n not in shared] == (
        [f"blocks.{l}.hook_resid_mid" for l in range(2)] if kw["d_mlp"] == [0, 0] else [])
    assert from_transformer_lens(bridge).cfg == model.cfg


def test_a_bridge_transformer_lens_made_itself_converts_keeping_every_parameter():
    from transformer_lens import TransformerBridge
    from transformer_lens.config import TransformerBridgeConfig

    cfg = TransformerBridgeConfig(d_model=8, n_layers=2, n_heads=2, d_head=4, d_mlp=16, n_ctx=6, d_vocab=5,
                                  act_fn="gelu", normalization_type="LN", architecture="TransformerLensNative", seed=3)
    bridge = TransformerBridge.boot_native(cfg)
    model = from_transformer_lens(bridge)
    assert model.cfg.attn_out_proj and model.cfg.qkv_bias and model.cfg.final_norm and model.cfg.norm == "pre"
    shared, differ, logit_diff = compare(model, bridge)
    assert logit_diff < 1e-5 and len(shared) == len(model.hook_names)


def test_a_bridge_changed_in_transformer_lens_comes_back_with_its_changes():
    model = experiment_model("plus-last-even")  # no W_O: the bridge holds the identity
    bridge = to_transformer_lens(model)
    with torch.no_grad():
        bridge.blocks[0].attn.o.weight.mul_(0.5)
    back = from_transformer_lens(bridge)
    assert back.cfg.attn_out_proj and not model.cfg.attn_out_proj
    assert compare(back, bridge)[2] < 1e-5


@pytest.mark.parametrize("field, value, expected", [
    ("normalization_type", "RMS", "normalization_type='RMS'"),
    ("gated_mlp", True, "gated_mlp=True"),
    ("positional_embedding_type", "rotary", "positional_embedding_type='rotary'"),
    ("n_key_value_heads", 1, "n_key_value_heads=1"),
])
def test_what_tinyscope_cannot_take_from_transformer_lens_is_named(field, value, expected):
    from transformer_lens import TransformerBridge
    from transformer_lens.config import TransformerBridgeConfig

    cfg = TransformerBridgeConfig(d_model=8, n_layers=1, n_heads=2, d_head=4, d_mlp=16, n_ctx=6, d_vocab=5,
                                  act_fn="relu", architecture="TransformerLensNative", seed=0, **{field: value})
    with pytest.raises(NotRepresentable, match=expected):
        from_transformer_lens(TransformerBridge.boot_native(cfg))


def test_the_dedicated_heads_model_is_refused_in_one_line():
    exp = registry.get("sih-eca-dedicated-det")
    _, model = build(exp, exp.config("smoke", 0))
    with pytest.raises(NotRepresentable) as err:
        to_transformer_lens(model)
    assert "\n" not in str(err.value) and str(err.value).startswith("TransformerLens cannot represent this model: layer 1")


def test_without_the_extra_one_error_says_how_to_install_it(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(bridge_module.importlib.metadata, "version", missing)
    with pytest.raises(TinyscopeError, match=r"pip install 'tinyscope\[interop\]'"):
        to_transformer_lens(experiment_model("plus-last-even"))
    monkeypatch.setattr(bridge_module.importlib.metadata, "version", lambda name: "3.2.1")
    with pytest.raises(TinyscopeError, match="TransformerLens 3.2.1 is installed; tinyscope.interop needs >= 4.3"):
        to_transformer_lens(experiment_model("plus-last-even"))


def test_importing_tinyscope_interop_does_not_import_transformer_lens():
    code = "import sys, tinyscope.interop; assert 'transformer_lens' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
