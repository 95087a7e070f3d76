"""The TraceRelay model: Table 5 parameter counts, fast vs reference path, decoding vs parallel
forward, bounded state, causality, padding, validity flags and the no-inheritance ablation."""
import math

import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.models.utils import count_parameters
from tinyscope.studies.tracerelay.model import TraceRelay, TraceRelayConfig
from tinyscope.studies.tracerelay.ops.phase_scan import wrap


def small(inherit=True, **kw) -> TraceRelay:
    torch.manual_seed(0)
    cfg = dict(vocab_size=6, n_out=5, d_model=16, d_trace=[8, 4, 8], n_heads=2, d_ffn=24, left_window=5,
               right_window=2, stride=3, inherit=inherit)
    cfg.update(kw)
    return TraceRelay(TraceRelayConfig(**cfg)).double().eval()


@pytest.mark.parametrize("vocab,n_out,dc,expected", [
    (2, 3, 64, 295_875), (2, 3, 32, 268_227), (2, 3, 16, 256_707),      # Equal Repeats
    (16, 8, 64, 297_096), (16, 8, 32, 269_448), (16, 8, 16, 257_928),   # Dyck
    (8, 6, 64, 296_454), (8, 6, 32, 268_806), (8, 6, 16, 257_286),      # Most-Freq
])
def test_parameter_counts_match_table5(vocab, n_out, dc, expected):
    model = TraceRelay(TraceRelayConfig(vocab_size=vocab, n_out=n_out, d_trace=[64, dc, 64]))
    assert count_parameters(model) == expected


def test_config_rejects_acausal_stride():
    with pytest.raises(ConfigError, match="stride"):
        TraceRelayConfig(right_window=8, stride=8)


def test_embed_init_onehot_linear_is_nn_linear_start_and_leaves_the_layers():
    """"onehot_linear" starts the (V, H) table as nn.Linear(V, H) would, U(+-1/sqrt V), and only
    the table: the same seed gives the same layers as "normal"."""
    def build(init):
        torch.manual_seed(3)
        return TraceRelay(TraceRelayConfig(vocab_size=8, n_out=6, d_trace=[64, 16, 64], embed_init=init))
    normal, linear = build("normal"), build("onehot_linear")
    w = linear.embed.weight
    assert w.abs().max() <= 1 / math.sqrt(8)
    assert abs(w.std().item() - 1 / math.sqrt(3 * 8)) < 0.02  # uniform on +-b has SD b / sqrt 3
    assert normal.embed.weight.std().item() > 0.9
    assert not torch.equal(w, normal.embed.weight)
    for (name, a), (_, b) in zip(normal.named_parameters(), linear.named_parameters()):
        if name != "embed.weight":
            assert torch.equal(a, b), name


def test_init_std_draws_every_weight_normal_and_zeroes_the_bias():
    torch.manual_seed(5)
    model = TraceRelay(TraceRelayConfig(vocab_size=8, n_out=6, d_trace=[64, 16, 64], init_std=0.02))
    weights = torch.cat([m.weight.flatten() for m in model.modules() if isinstance(m, (torch.nn.Linear,
                                                                                         torch.nn.Embedding))])
    assert abs(weights.std().item() - 0.02) < 5e-4 and abs(weights.mean().item()) < 5e-4
    assert torch.equal(model.head.bias, torch.zeros(6))
    assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in model.modules()
               if isinstance(m, torch.nn.RMSNorm))
    with pytest.raises(ConfigError, match="init_std=0.0 must be None or a positive number"):
        TraceRelayConfig(init_std=0.0)
    with pytest.raises(ConfigError, match="leave model.embed_init at 'normal'"):
        TraceRelayConfig(init_std=0.02, embed_init="onehot_linear")


def test_config_rejects_unknown_embed_init():
    with pytest.raises(ConfigError, match="embed_init='xavier' must be one of normal, onehot_linear"):
        TraceRelayConfig(embed_init="xavier")


@pytest.mark.parametrize("inherit", [True, False])
def test_fast_path_matches_reference(inherit):
    model = small(inherit)
    tokens = torch.randint(0, 6, (3, 47), generator=torch.Generator().manual_seed(1))
    valid = torch.ones(3, 47, dtype=torch.bool)
    valid[1, 30:] = False
    fast = model(tokens, valid)
    ref = model.use_reference(True)(tokens, valid)
    assert torch.allclose(fast, ref, atol=1e-12)


def _left_pad(seqs, pad=0):
    T = max(len(s) for s in seqs)
    tokens = torch.full((len(seqs), T), pad, dtype=torch.long)
    valid = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        tokens[i, T - len(s):] = s
        valid[i, T - len(s):] = True
    return tokens, valid


@pytest.mark.parametrize("inherit", [True, False])
def test_prefill_and_steps_reproduce_parallel_forward(inherit):
    """Random lengths, padded: the forward of each padded row equals its own unpadded forward,
    and prefill of a left-padded prompt + one step per token reproduces it at every position."""
    model = small(inherit)
    g = torch.Generator().manual_seed(2)
    lengths = [5, 23, 40, 1]
    seqs = [torch.randint(0, 6, (n,), generator=g) for n in lengths]
    alone = [model(s[None])[0] for s in seqs]  # (n, n_out) each
    # right padding: valid positions are unchanged
    T = max(lengths)
    right = torch.zeros(len(seqs), T, dtype=torch.long)
    rvalid = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        right[i, :len(s)], rvalid[i, :len(s)] = s, True
    padded = model(right, rvalid)
    for i, n in enumerate(lengths):
        assert torch.allclose(padded[i, :n], alone[i], atol=1e-12)
    # prefill the first k tokens of each row (left padded), then step the rest one by one
    prompts = [s[:max(1, len(s) // 3)] for s in seqs]
    tokens, valid = _left_pad(prompts)
    state = model.prefill(tokens, valid)
    for i, p in enumerate(prompts):
        assert torch.allclose(state.last_logits[i], alone[i][len(p) - 1], atol=1e-12)
    steps = max(len(s) - len(p) for s, p in zip(seqs, prompts))
    outs = []
    for j in range(steps):
        tok = torch.stack([s[len(p) + j] if len(p) + j < len(s) else torch.tensor(0) for s, p in zip(seqs, prompts)])
        logits, state = model.step(tok, state)
        outs.append(logits)
    for i, (s, p) in enumerate(zip(seqs, prompts)):
        for j in range(len(s) - len(p)):
            assert torch.allclose(outs[j][i], alone[i][len(p) + j], atol=1e-12)


def test_decoding_from_empty_state_matches_forward_at_paper_geometry():
    torch.manual_seed(3)
    model = TraceRelay(TraceRelayConfig(vocab_size=8, n_out=6, d_trace=[64, 16, 64])).double().eval()
    tokens = torch.randint(0, 8, (2, 40))
    full = model(tokens)
    state = model.empty_state(2, dtype=torch.float64)
    for t in range(40):
        logits, state = model.step(tokens[:, t], state)
        assert torch.allclose(logits, full[:, t], atol=1e-10)


def test_decoding_state_is_bounded():
    model = small().float()
    short = model.prefill(torch.randint(0, 6, (1, 100)))
    long = model.prefill(torch.randint(0, 6, (1, 10_000)))
    assert short.numel() == long.numel() and short.nbytes() == long.nbytes()
    _, stepped = model.step(torch.tensor([1]), long)
    assert stepped.numel() == long.numel()
    assert [t.shape for layer in short.layers for t in layer.tensors()] == \
        [t.shape for layer in long.layers for t in layer.tensors()]


@pytest.mark.parametrize("inherit", [True, False])
def test_causality(inherit):
    model = small(inherit)
    g = torch.Generator().manual_seed(4)
    tokens = torch.randint(0, 6, (1, 30), generator=g)
    base = model(tokens)
    for t in [0, 7, 15, 28]:
        changed = tokens.clone()
        changed[0, t + 1] = (changed[0, t + 1] + 1) % 6
        out = model(changed)
        assert torch.equal(out[0, :t + 1], base[0, :t + 1])
        assert not torch.allclose(out[0, t + 1:], base[0, t + 1:])


def test_readout_is_zero_until_a_lineage_gets_a_valid_update():
    model = small()
    W = model.cfg.stride
    tokens = torch.randint(0, 6, (2, 20), generator=torch.Generator().manual_seed(5))
    valid = torch.ones(2, 20, dtype=torch.bool)
    valid[1, :6] = False  # left padding: sources 0..5 are invalid
    _, cache = model.run_with_cache(tokens, valid, names_filter=lambda n: n.endswith("hook_readout"))
    readout = cache["blocks.0.relay.hook_readout"]  # (B, T, H)
    assert torch.equal(readout[0, :W], torch.zeros_like(readout[0, :W]))
    assert (readout[0, W:].abs().sum(-1) > 0).all()
    assert torch.equal(readout[1, :6 + W], torch.zeros_like(readout[1, :6 + W]))
    assert (readout[1, 6 + W:].abs().sum(-1) > 0).all()


def test_no_inheritance_phase_is_the_wrapped_delivered_increment():
    names = ("blocks.1.relay.hook_increment", "blocks.1.relay.hook_phase")
    tokens = torch.randint(0, 6, (1, 25), generator=torch.Generator().manual_seed(6))
    for inherit in (False, True):
        model = small(inherit)
        W = model.cfg.stride
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
        delta, theta = cache[names[0]], cache[names[1]]  # (1, T, d)
        if not inherit:
            assert torch.allclose(theta[0, W:], wrap(delta[0, :-W]))
        else:
            assert torch.allclose(theta[0, 2 * W:], wrap(theta[0, W:-W] + delta[0, W:-W]))
        assert delta.abs().max() <= math.pi


def test_hooks_cover_the_layer_and_idle_hooks_change_nothing():
    model = small()
    tokens = torch.randint(0, 6, (2, 12))
    plain = model(tokens)
    out, cache = model.run_with_cache(tokens)
    assert torch.equal(out, plain)
    for name in ["hook_embed", "blocks.0.hook_resid_pre", "blocks.0.right.hook_pattern", "blocks.0.relay.hook_phase",
                 "blocks.0.hook_resid_mid", "blocks.2.left.hook_pattern", "blocks.2.hook_attn_out",
                 "blocks.2.mlp.hook_post", "blocks.2.hook_resid_post"]:
        assert name in cache
    assert cache["blocks.0.left.hook_pattern"].shape == (2, 2, 12, model.cfg.left_window + 1)
