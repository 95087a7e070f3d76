import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.models.utils import count_parameters
from tinyscope.studies.minimal.experiment import minimal_model


def test_minimal_preset_has_the_papers_250_parameters():
    # tokens 12x2 + positions 8x2 + Q,K,V 3x(2x2) + FFN (2x32+32)+(32x2+2) + head (2x12+12)
    assert count_parameters(Transformer(minimal_model())) == 250


@pytest.mark.parametrize("cfg", [
    dict(vocab_size=9, n_ctx=12, d_model=16, d_head=4, n_heads=[4, 1], d_mlp=[0, 64], attn_out_proj=True, norm="pre"),
    dict(vocab_size=5, n_ctx=6, d_model=8, d_head=4, n_heads=[2], d_mlp=[16], attn_out_proj=False, qkv_bias=True),
])
def test_fast_attention_equals_the_reference_path(cfg):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**cfg))
    x = torch.randint(0, cfg["vocab_size"], (4, cfg["n_ctx"]))
    fast = model(x)
    model.use_fast_attention(False)
    torch.testing.assert_close(model(x), fast, atol=1e-5, rtol=1e-5)


def test_causality_future_tokens_do_not_change_past_logits():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=6, n_ctx=9, d_model=8, d_head=4, n_heads=[2, 2],
                                          d_mlp=[16, 16], attn_out_proj=True))
    x = torch.randint(0, 6, (2, 9))
    y = x.clone()
    y[:, 5:] = (y[:, 5:] + 1) % 6
    torch.testing.assert_close(model(x)[:, :5], model(y)[:, :5])


def test_bad_configs_name_the_field():
    with pytest.raises(ConfigError, match="model.d_mlp"):
        TransformerConfig(n_heads=[1, 1], d_mlp=[32])
    with pytest.raises(ConfigError, match="d_model"):
        TransformerConfig(d_model=4, d_head=2, n_heads=[1])
    with pytest.raises(ConfigError, match="model.act"):
        TransformerConfig(act="swish2")


def test_check_tokens_rejects_out_of_range_ids_and_long_inputs():
    model = Transformer(minimal_model())
    with pytest.raises(ValueError, match=r"\[0, 11\]"):
        model(torch.tensor([[0, 12]]), check=True)
    with pytest.raises(ValueError, match="exceeds the context"):
        model(torch.zeros(1, 9, dtype=torch.long), check=True)
