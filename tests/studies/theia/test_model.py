"""THEIA models: parameter counts against the paper, Unknown handling, the prototype head, the
non-causal transformer baseline's attention paths, and the chain model's decoding."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tinyscope.models.transformer import Attention, TransformerConfig
from tinyscope.studies.theia.model import (
    ChainModel,
    FlatMLP,
    Theia,
    TheiaModelConfig,
    TheiaStep,
    TheiaTransformer,
    TransitionNet,
    build_theia_model,
    straight_through_gumbel,
)
from tinyscope.studies.theia.task import CHAIN, evaluate_records, sample_chains, sample_records


def n_params(m):
    return sum(p.numel() for p in m.parameters())


def test_parameter_counts_match_the_paper():
    theia = Theia()
    assert n_params(theia) == 2_751_232
    parts = {k: n_params(getattr(theia, k)) for k in ("arith", "order", "set", "logic")}
    assert parts == {"arith": 404_736, "order": 1_179_648, "set": 208_128, "logic": 908_032}
    assert n_params(theia.bridge_order) + n_params(theia.bridge_set) == 33_536
    assert n_params(theia.head.net) == 16_768 and n_params(theia.head.prototypes) == 384
    assert n_params(TheiaStep()) == 1_508_096
    assert n_params(TransitionNet()) == 4_803
    assert n_params(TheiaTransformer()) == 3_582_147


@pytest.mark.parametrize("hidden", [512, 1243])
def test_flat_mlp_count_is_encoders_plus_three_layer_mlp(hidden):
    d = 128
    encoders = 3 * (2 * d + d * d + d + d) + (4 + 6 + 5) * d + (21 * d + d + d * d + d + d)
    head = (900 * hidden + hidden) + 2 * hidden + (hidden * hidden + hidden) + 2 * hidden + (3 * hidden + 3)
    assert n_params(FlatMLP(hidden=hidden)) == encoders + head
    assert round(n_params(FlatMLP(hidden=hidden)) / 1e6, 2) == {512: 0.80, 1243: 2.75}[hidden]


def records(n=16, seed=0, spec=None):
    kw = {} if spec is None else {"spec": spec}
    return torch.from_numpy(sample_records(np.random.default_rng(seed), n, **kw))


def test_unknown_flag_hides_the_number():
    torch.manual_seed(0)
    model = Theia().eval()
    x = records()
    x[:, 27] = 1                      # a is Unknown: its value must not matter
    y = x.clone()
    y[:, 0] = (y[:, 0] % 20) + 1
    assert torch.equal(model(x), model(y))
    x[:, 27] = 0
    assert not torch.equal(model(x), model(y))
    _, cache = model.run_with_cache(records(), names_filter=lambda n: n.endswith("hook_out"))
    assert {"arith.hook_out", "order.hook_out", "set.hook_out", "logic.hook_out"} <= set(cache.keys())


def test_prototype_head_dot_in_training_cosine_at_inference():
    torch.manual_seed(1)
    model = Theia().eval()
    with torch.no_grad():
        model.head.prototypes.weight.mul_(torch.tensor([[1.0], [5.0], [0.2]]))  # unequal norms
        x = records(256)
        out = model.features(x)
        assert torch.allclose(model(x), out @ model.head.prototypes.weight.T)
        cos = F.normalize(out, dim=-1) @ F.normalize(model.head.prototypes.weight, dim=-1).T
        assert torch.equal(model.predict(x), cos.argmax(-1))


@pytest.mark.parametrize("causal", [True, False])
def test_attention_fast_path_equals_reference(causal):
    torch.manual_seed(2)
    cfg = TransformerConfig(vocab_size=1, n_ctx=8, d_model=16, d_head=4, n_heads=[4], d_mlp=[0], attn_out_proj=True,
                            causal=causal)
    attn = Attention(cfg, 0)
    x = torch.randn(3, 8, 16)
    fast = attn(x)
    attn.use_fast = False
    assert torch.allclose(fast, attn(x), atol=1e-5)


def test_transformer_baseline_is_bidirectional():
    torch.manual_seed(3)
    model = TheiaTransformer(d=32, n_heads=4, n_layers=2, d_mlp=64).eval()
    x = records(4)
    _, cache = model.run_with_cache(x, names_filter="blocks.0.hook_resid_post")
    y = x.clone()
    y[:, 27:31] = 1 - y[:, 27:31]            # change only the last token (the flags)
    _, cache2 = model.run_with_cache(y, names_filter="blocks.0.hook_resid_post")
    assert not torch.allclose(cache["blocks.0.hook_resid_post"][:, 0], cache2["blocks.0.hook_resid_post"][:, 0])


class OracleStep(torch.nn.Module):
    """Exact step model: logits 10 * onehot(K3 label) of the chain records."""

    def forward(self, x):
        label = torch.from_numpy(evaluate_records(x.numpy(), CHAIN)["label"])
        return 10.0 * F.one_hot(label, 3).float()


def exact_transition() -> TransitionNet:
    """A TransitionNet whose argmax is (prev + local) mod 3: a one-layer lookup through the MLP
    is not needed, we set the last layer to read a table from a 9-unit first layer."""
    net = TransitionNet(hidden=9)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        first, second, last = net.net[0], net.net[2], net.net[4]
        for i in range(3):
            for j in range(3):
                k = 3 * i + j
                first.weight[k, i] = first.weight[k, 3 + j] = 1.0
                first.bias[k] = -1.0          # unit k fires (GELU(1) > 0) only for the pair (i, j)
        second.weight.copy_(torch.eye(9))
        for i in range(3):
            for j in range(3):
                last.weight[(i + j) % 3, 3 * i + j] = 10.0
    return net


def test_chain_model_hard_decoding_equals_a_manual_loop():
    data = sample_chains(np.random.default_rng(4), 32, 12)
    x, y = torch.from_numpy(data["records"]), torch.from_numpy(data["labels"])
    chain = ChainModel(OracleStep(), exact_transition())
    assert torch.equal(chain(x).argmax(-1), y)
    torch.manual_seed(5)
    model = ChainModel(TheiaStep(d=24)).eval()
    with torch.no_grad():
        logits = model(x[:4])
        prev = model.step(x[:4, 0]).argmax(-1)
        for t in range(1, 12):
            local = model.step(x[:4, t]).argmax(-1)
            step_logits = model.transition(F.one_hot(prev, 3).float(), F.one_hot(local, 3).float())
            assert torch.allclose(step_logits, logits[:, t], atol=1e-5)
            prev = step_logits.argmax(-1)


def test_straight_through_gumbel_is_one_hot_forward_with_soft_gradient():
    logits = torch.randn(64, 3, requires_grad=True)
    g = torch.Generator().manual_seed(0)
    sample = straight_through_gumbel(logits, 0.5, g)
    assert torch.equal(sample.sum(-1), torch.ones(64)) and set(sample.detach().unique().tolist()) <= {0.0, 1.0}
    (sample * torch.randn(64, 3)).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_factory_builds_every_arch():
    x = records(5, spec=CHAIN)
    for arch in ("theia", "theia_step", "flat_mlp", "transformer"):
        model = build_theia_model(TheiaModelConfig(arch=arch, tf_layers=1))
        assert model(x).shape == (5, 3) and model.predict(x).shape == (5,)
    with pytest.raises(ValueError):
        TheiaModelConfig(arch="lstm")


def test_tiled_number_init_puts_every_kink_inside_the_integer_range():
    torch.manual_seed(0)
    tiled = build_theia_model(TheiaModelConfig(number_init="tiled", tile_slope=2.0))
    torch.manual_seed(0)
    plain = build_theia_model(TheiaModelConfig())
    assert n_params(tiled) == n_params(plain) == 2_751_232
    encoders = [tiled.arith.enc.net[0], tiled.order.enc.net[0]]
    for lin in encoders:
        w, b = lin.weight.detach()[:, 0], lin.bias.detach()  # (h,)
        kinks = -b / w * 20  # the integer n where w * n / 20 + b = 0
        assert kinks.min() >= -0.5 and kinks.max() <= 20.5
        assert torch.allclose(w.abs() / 20, torch.full_like(w, 2.0))  # slope 2 per integer step
        assert (w > 0).any() and (w < 0).any()
    # the set encoder reads 21 bits, not a number: left at the default init
    assert torch.equal(tiled.set.enc.net[0].weight, plain.set.enc.net[0].weight)
    # the hidden code of n = 1..20 is far from affine in n (default init: nearly affine)
    def non_affine_fraction(model):
        n = torch.arange(1, 21).float()
        enc = model.arith.enc.net
        h = enc[1](enc[0]((n / 20).unsqueeze(-1))).detach()  # (20, h)
        basis = torch.stack([torch.ones(20), n], 1)  # (20, 2)
        residual = h - basis @ torch.linalg.lstsq(basis, h).solution
        return float(residual.norm() / (h - h.mean(0)).norm())
    assert non_affine_fraction(tiled) > 0.2 > 0.15 > non_affine_fraction(plain)
    with pytest.raises(ValueError, match="model.number_init"):
        TheiaModelConfig(number_init="uniform")
    torch.manual_seed(0)  # the transformer has no scalar encoders: the same network either way
    a = build_theia_model(TheiaModelConfig(arch="transformer", number_init="tiled", tf_layers=1))
    torch.manual_seed(0)
    b = build_theia_model(TheiaModelConfig(arch="transformer", tf_layers=1))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
