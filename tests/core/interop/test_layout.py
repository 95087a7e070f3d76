"""The classic HookedTransformer layout of tinyscope's Transformer (pure torch, no TransformerLens):
per-head shapes, zero biases, the identity W_O, the final norm read from the keys, the exact
representability condition, and the hint that brings the switches back."""
import pytest
import torch
from torch import nn

from tinyscope.interop.layout import (
    NotRepresentable,
    check_representable,
    from_tl_state_dict,
    problems,
    tl_config,
    to_tl_state_dict,
)
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.runs import registry
from tinyscope.runs.rundir import build


def perturbed(model: Transformer, scale: float = 0.1, seed: int = 0) -> Transformer:
    """``model`` with every parameter moved off its initial value (LayerNorm weights no longer 1,
    biases no longer 0), so a transposed or dropped tensor shows in the logits."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return model.eval()


def experiment_model(name: str) -> Transformer:
    exp = registry.get(name)
    return perturbed(build(exp, exp.config("smoke", 0))[1])


def test_per_head_shapes_follow_the_classic_layout():
    cfg = TransformerConfig(vocab_size=5, n_ctx=6, d_model=8, n_heads=[2], d_head=3, d_mlp=[7], norm="pre",
                            final_norm=True, attn_out_proj=True, qkv_bias=True)
    model = perturbed(Transformer(cfg))
    sd = to_tl_state_dict(model)
    assert sd["blocks.0.attn.W_Q"].shape == (2, 8, 3) and sd["blocks.0.attn.b_Q"].shape == (2, 3)
    assert sd["blocks.0.attn.W_O"].shape == (2, 3, 8)
    assert sd["blocks.0.mlp.W_in"].shape == (8, 7) and sd["unembed.W_U"].shape == (8, 5)
    attn = model.blocks[0].attn
    # head h, coordinate d is row h*Dh + d of tinyscope's (H*Dh, D) nn.Linear
    assert torch.equal(sd["blocks.0.attn.W_K"][1, :, 2], attn.W_K.weight[1 * 3 + 2])
    assert torch.equal(sd["blocks.0.attn.W_O"][1, 0], attn.W_O.weight[:, 3])
    x = torch.randn(4, 8)
    q = attn.W_Q(x).view(4, 2, 3)  # (N, H, Dh)
    q_tl = torch.einsum("nd,hde->nhe", x, sd["blocks.0.attn.W_Q"]) + sd["blocks.0.attn.b_Q"]
    torch.testing.assert_close(q, q_tl)


def test_missing_biases_are_zeros_and_no_output_projection_is_the_identity():
    model = experiment_model("plus-last-even")  # d_model 2, one head, no W_O, no q/k/v bias
    assert model.blocks[0].attn.W_O is None and model.blocks[0].attn.W_Q.bias is None
    sd = to_tl_state_dict(model)
    assert torch.equal(sd["blocks.0.attn.W_O"], torch.eye(2).view(1, 2, 2))
    assert not sd["blocks.0.attn.b_O"].any() and not sd["blocks.0.attn.b_V"].any()
    assert "ln_final.w" not in sd and "blocks.0.ln1.w" not in sd
    assert tl_config(model.cfg)["normalization_type"] is None


def test_final_norm_shows_in_the_keys_not_in_normalization_type():
    model = experiment_model("sih-eca-shared-det")  # pre-LN blocks, no final LN
    sd = to_tl_state_dict(model)
    assert "blocks.1.ln2.w" in sd and "ln_final.w" not in sd
    assert tl_config(model.cfg)["normalization_type"] == "LN"


@pytest.mark.parametrize("name", ["plus-last-even", "sih-eca-shared-det"])
def test_the_layout_round_trips_bit_for_bit_with_the_hint(name):
    model = experiment_model(name)
    back = from_tl_state_dict(to_tl_state_dict(model), tl_config(model.cfg), hint=model.cfg)
    assert back.cfg == model.cfg
    theirs = back.state_dict()
    assert theirs.keys() == model.state_dict().keys()
    assert all(torch.equal(v, theirs[k]) for k, v in model.state_dict().items())


def test_without_a_hint_every_transformer_lens_parameter_is_kept():
    model = experiment_model("plus-last-even")
    back = from_tl_state_dict(to_tl_state_dict(model), tl_config(model.cfg)).eval()
    assert back.cfg.attn_out_proj and back.cfg.qkv_bias and back.cfg.attn_out_bias
    tokens = torch.randint(0, 12, (5, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(back(tokens), model(tokens), atol=1e-6, rtol=0)


def test_a_hinted_switch_turns_on_when_its_tensor_is_no_longer_zero():
    model = experiment_model("plus-last-even")
    sd = to_tl_state_dict(model)
    sd["blocks.0.attn.W_O"] = sd["blocks.0.attn.W_O"] * 1.5  # trained elsewhere: no longer the identity
    sd["blocks.0.attn.b_Q"] = sd["blocks.0.attn.b_Q"] + 0.25
    back = from_tl_state_dict(sd, tl_config(model.cfg), hint=model.cfg)
    assert back.cfg.attn_out_proj and back.cfg.qkv_bias and not back.cfg.attn_out_bias
    assert torch.equal(back.blocks[0].attn.W_O.weight, 1.5 * torch.eye(2))


def test_the_dedicated_heads_model_is_refused_naming_layer_and_field():
    exp = registry.get("sih-eca-dedicated-det")
    cfg = exp.config("smoke", 0).model
    assert cfg.n_heads == [4, 1] and cfg.d_mlp == [0, 32]
    with pytest.raises(NotRepresentable) as err:
        check_representable(cfg)
    text = str(err.value)
    assert "\n" not in text
    assert "layer 1: model.n_heads=1 differs from layer 0's 4" in text
    assert "layer 1: model.d_mlp=32 differs from layer 0's 0" in text


BASE = dict(vocab_size=6, n_ctx=5, d_model=8, n_heads=[2, 2], d_mlp=[16, 16], norm="pre")


@pytest.mark.parametrize("change, expected", [
    (dict(d_mlp=[16, 0]), "layer 1: model.d_mlp=0 (no MLP)"),
    (dict(n_heads=[2, 4]), "layer 1: model.n_heads=4"),
    (dict(ffn="mlp,swiglu"), "layer 1: model.ffn='swiglu'"),
    (dict(ffn="nc"), "layer 0: model.ffn='nc'"),
    (dict(act="tanh"), "layer 0: model.act='tanh'"),
    (dict(act="quadratic", ffn="gelu,mlp"), "layer 1: model.act='quadratic'"),
    (dict(positions="none"), "model.positions='none'"),
])
def test_each_condition_names_its_layer_and_field(change, expected):
    cfg = TransformerConfig(**{**BASE, **change})
    found = problems(cfg)
    assert len(found) == 1 and found[0].startswith(expected), found


@pytest.mark.parametrize("change", [dict(d_mlp=[0, 0]), dict(ffn="gelu", act="tanh"), dict(causal=False),
                                    dict(norm="none", final_norm=True), dict(attn_out_proj=True, d_head=3),
                                    dict(d_vocab_out=3), dict(act="silu")])
def test_what_transformer_lens_can_hold_is_accepted(change):
    assert problems(TransformerConfig(**{**BASE, **change})) == []


def test_a_quantifier_sublayer_is_refused():
    model = Transformer(TransformerConfig(**BASE))
    model.blocks[1].add_quant(nn.Identity())
    model.setup_hooks()
    assert [p.split(":")[0] for p in problems(model.cfg, model)] == ["layer 1"]
    with pytest.raises(NotRepresentable, match=r"blocks\.1\.quant"):
        to_tl_state_dict(model)


def test_a_state_dict_that_does_not_match_its_config_is_named():
    model = experiment_model("plus-last-even")
    sd, tl = to_tl_state_dict(model), tl_config(model.cfg)
    with pytest.raises(NotRepresentable, match="blocks.0.attn.W_Q has shape"):
        from_tl_state_dict({**sd, "blocks.0.attn.W_Q": sd["blocks.0.attn.W_Q"][..., :1]}, tl)
    with pytest.raises(NotRepresentable, match="missing"):
        from_tl_state_dict({k: v for k, v in sd.items() if k != "unembed.b_U"}, tl)
    with pytest.raises(NotRepresentable, match="normalization_type='RMS'"):
        from_tl_state_dict(sd, {**tl, "normalization_type": "RMS"})
    with pytest.raises(NotRepresentable, match="gated_mlp=True"):
        from_tl_state_dict(sd, {**tl, "gated_mlp": True})


def test_config_fields_are_plain_json():
    import json

    tl = tl_config(experiment_model("sih-eca-shared-det").cfg)
    assert json.loads(json.dumps(tl)) == tl
