"""The 4-domain BigTransformer (seed003-details Sec. 1.5) and the ablated THEIAs (Sec. 1.8): exact
parameter counts, and the post-LN layers equal to PyTorch's TransformerEncoderLayer."""
import numpy as np
import torch
from torch import nn

from tinyscope.models.utils import count_parameters
from tinyscope.studies.theia.big_transformer import BigTransformer
from tinyscope.studies.theia.model import TheiaModelConfig, build_theia_model
from tinyscope.studies.theia.task import sample_records


def test_parameter_counts_are_the_papers():
    assert count_parameters(build_theia_model(TheiaModelConfig(arch="big_transformer"))) == 3_641_859
    assert count_parameters(build_theia_model(TheiaModelConfig(logic_engine="single_mlp"))) == 2_486_400
    assert count_parameters(build_theia_model(TheiaModelConfig(bridges=False))) == 2_717_696
    assert count_parameters(build_theia_model(TheiaModelConfig())) == 2_751_232


def test_post_ln_blocks_equal_torchs_encoder_layer():
    torch.manual_seed(0)
    model = BigTransformer(d=32, n_heads=4, n_layers=2, d_ff=64).eval()
    ref = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, activation="gelu",
                                                           batch_first=True), num_layers=2,
                                enable_nested_tensor=False).eval()
    with torch.no_grad():
        for blk, layer in zip(model.blocks, ref.layers):
            layer.self_attn.in_proj_weight.copy_(blk.attn.qkv.weight)
            layer.self_attn.in_proj_bias.copy_(blk.attn.qkv.bias)
            layer.self_attn.out_proj.weight.copy_(blk.attn.out.weight)
            layer.self_attn.out_proj.bias.copy_(blk.attn.out.bias)
            for mine, theirs in ((blk.ff_in, layer.linear1), (blk.ff_out, layer.linear2), (blk.ln1, layer.norm1),
                                 (blk.ln2, layer.norm2)):
                theirs.weight.copy_(mine.weight)
                theirs.bias.copy_(mine.bias)
        x = torch.from_numpy(sample_records(np.random.default_rng(0), 16))
        h = model.embed(x)  # (B, 11, D)
        ours = h
        for blk in model.blocks:
            ours = blk(ours)
        assert torch.allclose(ours, ref(h), atol=1e-5)


def test_unknown_flags_reach_the_output_only_through_their_tokens():
    torch.manual_seed(0)
    model = BigTransformer(d=32, n_heads=4, n_layers=1, d_ff=64).eval()
    x = sample_records(np.random.default_rng(1), 8)
    x[:, 27:31] = 0
    flagged = x.copy()
    flagged[:, 29] = 1                     # d_unk: only the d_unk token changes
    _, plain = model.run_with_cache(torch.from_numpy(x), names_filter="hook_embed")
    _, cache = model.run_with_cache(torch.from_numpy(flagged), names_filter="hook_embed")
    diff = (plain["hook_embed"] - cache["hook_embed"]).abs().sum(-1)  # (B, 11)
    assert (diff[:, 8] > 0).all() and (diff[:, [i for i in range(11) if i != 8]] == 0).all()
    assert "blocks.0.hook_resid_post" in model.hook_names and "blocks.0.attn.hook_pattern" in model.hook_names


def test_residual_stream_passes_from_block_to_block_and_feeds_the_pool():
    torch.manual_seed(0)
    model = BigTransformer(d=32, n_heads=4, n_layers=3, d_ff=64).eval()
    x = torch.from_numpy(sample_records(np.random.default_rng(2), 8))
    out, cache = model.run_with_cache(x)
    for layer in range(2):
        assert torch.equal(cache[f"blocks.{layer}.hook_resid_post"], cache[f"blocks.{layer + 1}.hook_resid_pre"])
    assert torch.equal(cache["hook_pooled"], cache["blocks.2.hook_resid_post"].mean(1))
    assert torch.equal(out, model.head(cache["hook_pooled"]))
