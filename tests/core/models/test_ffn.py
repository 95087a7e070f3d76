"""FFN kinds: parameter neutrality, the NC-FFN unit algebra, per-layer selection, hooks."""
import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.models.ffn import FFN_KINDS, MLP, NCFFN, GatedFFN, build_ffn, matched_width
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.models.utils import count_parameters


@pytest.mark.parametrize("d_model,d_hidden,bias", [(128, 512, True), (16, 64, False), (7, 10, True)])
def test_nc_ffn_is_parameter_neutral(d_model, d_hidden, bias):
    gelu = build_ffn("gelu", d_model, d_hidden, "gelu", bias)
    for kind in ("nc", "nc_bool"):
        nc = build_ffn(kind, d_model, d_hidden, "gelu", bias)
        assert count_parameters(nc) == count_parameters(gelu) == 2 * d_model * d_hidden + bias * (d_hidden + d_model)


@pytest.mark.parametrize("kind", ["swiglu", "bilinear"])
def test_gated_kinds_match_within_one_unit(kind):
    d_model, d_hidden = 128, 512
    target = count_parameters(build_ffn("gelu", d_model, d_hidden, "gelu", True))
    got = count_parameters(build_ffn(kind, d_model, d_hidden, "gelu", True))
    assert abs(got - target) <= 3 * d_model + 2  # at most one hidden unit's weights apart
    assert matched_width(kind, d_model, d_hidden) == round((target - d_model) / (3 * d_model + 2))


def test_nc_split_and_layout():
    nc = NCFFN(8, 40, gelu_share=0.75)
    assert (nc.n_smooth, nc.n_pairs) == (30, 5)
    nc = NCFFN(8, 41, gelu_share=0.75)  # odd logic share is rounded to whole pairs
    assert nc.n_smooth + 2 * nc.n_pairs == 41 and (41 - nc.n_smooth) % 2 == 0
    assert NCFFN(8, 40, gelu_share=0.0).n_smooth == 0


def test_nc_forward_matches_its_definition():
    torch.manual_seed(0)
    nc = NCFFN(6, 16, gelu_share=0.5)
    x = torch.randn(2, 3, 6)
    pre = nc.W_in(x)
    s, p = nc.n_smooth, nc.n_pairs
    A, B = torch.sigmoid(pre[..., s:s + p]), torch.sigmoid(pre[..., s + p:])
    hidden = torch.cat([torch.nn.functional.gelu(pre[..., :s]), A * B, A * (1 - B)], -1)
    torch.testing.assert_close(nc(x), nc.W_out(hidden))


def test_set_difference_is_monotone_in_A_and_B():
    """A*(1-B) increases with A and decreases with B; A*B increases with both (all in [0, 1])."""
    torch.manual_seed(0)
    nc = NCFFN(2, 8, gelu_share=0.0)  # 4 pairs
    s, p = nc.n_smooth, nc.n_pairs
    grid = torch.linspace(-6, 6, 25)
    a_pre, b_pre = torch.meshgrid(grid, grid, indexing="ij")  # (25, 25)
    pre = torch.zeros(25, 25, nc.d_hidden)
    pre[..., s:s + p] = a_pre[..., None]
    pre[..., s + p:] = b_pre[..., None]
    seen = {}
    nc.hook_post.add_hook(lambda h, hook: seen.__setitem__("post", h))
    with torch.no_grad():
        nc.W_in.weight.zero_()
        nc.W_in.bias.zero_()
        # feed the grid as pre-activations through the hook on hook_pre
        nc.hook_pre.add_hook(lambda h, hook: pre)
        nc(torch.zeros(25, 25, 2))
    diff = seen["post"][..., s + p:]  # (25, 25, p) A*(1-B)
    both = seen["post"][..., s:s + p]  # A*B
    assert (diff.diff(dim=0) > 0).all() and (diff.diff(dim=1) < 0).all()
    assert (both.diff(dim=0) > 0).all() and (both.diff(dim=1) > 0).all()
    assert (diff >= 0).all() and (diff <= 1).all()


def test_gated_forward_definitions():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5)
    for gate, fn in (("silu", torch.nn.functional.silu), ("none", lambda t: t)):
        g = GatedFFN(5, 7, gate=gate)
        h = g.W_in(x)
        torch.testing.assert_close(g(x), g.W_out(fn(h[..., :7]) * h[..., 7:]))


def test_logical_form_names_the_strongest_inputs():
    nc = NCFFN(4, 8, gelu_share=0.0)
    with torch.no_grad():
        nc.W_in.weight.zero_()
        nc.W_in.weight[nc.n_smooth + 1, 2] = 3.0      # A of pair 1 <- x2
        nc.W_in.weight[nc.n_smooth + nc.n_pairs + 1, 0] = -2.0  # B of pair 1 <- -x0
    form = nc.logical_form(1, top=1, names=["a", "b", "c", "d"])
    assert form["A"] == [("c", 3.0)] and form["B"] == [("a", -2.0)]
    assert "A∧¬B" in form["text"]
    with pytest.raises(ConfigError):
        nc.logical_form(4)


def test_per_layer_ffn_kinds_and_equal_counts():
    base = dict(vocab_size=11, n_ctx=8, d_model=16, d_head=4, n_heads=[4, 4], d_mlp=[64, 64],
                attn_out_proj=True, norm="pre", act="gelu")
    gelu = Transformer(TransformerConfig(**base, ffn="gelu"))
    mixed = Transformer(TransformerConfig(**base, ffn="nc,gelu"))
    assert isinstance(mixed.blocks[0].mlp, NCFFN) and isinstance(mixed.blocks[1].mlp, MLP)
    assert count_parameters(mixed) == count_parameters(gelu)
    assert TransformerConfig(**base, ffn=["nc", "nc_bool"]).ffn_kind(1) == "nc_bool"
    with pytest.raises(ConfigError):
        TransformerConfig(**base, ffn=["nc"])
    with pytest.raises(ConfigError):
        TransformerConfig(**base, ffn="nope")
    _, cache = mixed.run_with_cache(torch.zeros(1, 5, dtype=torch.long))
    assert cache["blocks.0.mlp.hook_A"].shape == (1, 5, mixed.blocks[0].mlp.n_pairs)


def test_every_kind_trains_one_step():
    torch.manual_seed(0)
    x = torch.randn(4, 3, 8)
    for kind in FFN_KINDS:
        f = build_ffn(kind, 8, 12, "relu", True)
        f(x).square().mean().backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in f.parameters())
