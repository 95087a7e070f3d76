"""tinyscope's ActivationCache helpers against TransformerLens 4.3's own ActivationCache on the
converted model: accumulated_resid, decompose_resid, stack_head_results, apply_ln_to_stack and the
logit lens, with their labels, on plus-last-even (no norm), a Shared-head spatial-induction model
(pre-LN, no final norm) and a GPT-style model (pre-LN and a final LN), to 1e-5.

Cases TransformerLens cannot compute are not generated: a LayerNorm at the unembedding of a model
with pre-LN blocks and no final norm (TransformerLens reads ``ln_final.hook_scale``, which such a
model lacks), and ``stack_head_results(0, incl_remainder=True)`` (TransformerLens takes the
remainder from ``resid_post`` of layer ``0 - 1``, i.e. the last layer)."""
import pytest
import torch

pytest.importorskip("transformer_lens", reason="the interop extra (pip install 'tinyscope[interop]')")

from tests.core.interop.test_layout import experiment_model, perturbed  # noqa: E402
from tinyscope.interop import to_transformer_lens  # noqa: E402
from tinyscope.models.transformer import Transformer, TransformerConfig  # noqa: E402


def gpt_style() -> Transformer:
    torch.manual_seed(0)
    return perturbed(Transformer(TransformerConfig(vocab_size=7, n_ctx=9, d_model=12, n_heads=[3, 3], d_mlp=[20, 20],
                                                   norm="pre", final_norm=True, attn_out_proj=True, qkv_bias=True,
                                                   attn_out_bias=True)))


MODELS = {"plus-last-even": lambda: experiment_model("plus-last-even"),
          "sih-eca-shared-det": lambda: experiment_model("sih-eca-shared-det"),
          "gpt-style": gpt_style}
FINAL_LN_UNKNOWN_TO_TL = {"sih-eca-shared-det"}  # LayerNorm blocks, no final norm


@pytest.fixture(scope="module")
def caches():
    out = {}
    for name, make in MODELS.items():
        model = make()
        bridge = to_transformer_lens(model)
        tokens = torch.randint(0, model.cfg.vocab_size, (2, model.cfg.n_ctx), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            logits, ours = model.run_with_cache(tokens)
            _, theirs = bridge.run_with_cache(tokens)
        out[name] = (model, bridge, logits, ours, theirs)
    return out


def cases():
    """(model name, case id, fn(cache) -> (stack, labels)) for what TransformerLens computes."""
    for name in MODELS:
        n = 1 if name == "plus-last-even" else 2
        at_end = (None, n)
        for layer in (*at_end, 1):
            final = layer in at_end
            for apply_ln in (False, True):
                if apply_ln and final and name in FINAL_LN_UNKNOWN_TO_TL:
                    continue
                for incl_mid in (False, True):
                    yield name, f"accumulated_resid({layer}, incl_mid={incl_mid}, apply_ln={apply_ln})", (
                        lambda c, a=(layer, incl_mid, apply_ln): c.accumulated_resid(
                            a[0], incl_mid=a[1], apply_ln=a[2], return_labels=True))
                for mode in ("all", "attn", "mlp"):
                    for mlp_input in ((False,) if final else (False, True)):
                        yield name, f"decompose_resid({layer}, {mode}, mlp_input={mlp_input}, apply_ln={apply_ln})", (
                            lambda c, a=(layer, mode, mlp_input, apply_ln): c.decompose_resid(
                                a[0], mode=a[1], mlp_input=a[2], apply_ln=a[3], return_labels=True))
                for rem in (False, True):
                    head_layer = -1 if layer is None else layer
                    yield name, f"stack_head_results({head_layer}, incl_remainder={rem}, apply_ln={apply_ln})", (
                        lambda c, a=(head_layer, rem, apply_ln): c.stack_head_results(
                            a[0], incl_remainder=a[1], apply_ln=a[2], return_labels=True))
        yield name, "accumulated_resid(pos_slice=-1)", (
            lambda c: c.accumulated_resid(1, incl_mid=True, pos_slice=-1, return_labels=True))
        yield name, "apply_ln_to_stack(decompose_resid(0, mlp_input), 0, mlp_input)", (
            lambda c: (c.apply_ln_to_stack(c.decompose_resid(0, mlp_input=True), 0, mlp_input=True), []))
        yield name, "stack_head_results(0)", lambda c: c.stack_head_results(0, return_labels=True)


CASES = list(cases())


@pytest.mark.parametrize("name, case, fn", CASES, ids=[f"{n}-{c}" for n, c, _ in CASES])
def test_cache_helper_matches_transformer_lens(caches, name, case, fn):
    _, _, _, ours, theirs = caches[name]
    (a, labels_a), (b, labels_b) = fn(ours), fn(theirs)
    assert list(labels_a) == list(labels_b)
    assert a.shape == b.shape
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", MODELS)
def test_logit_lens_is_transformer_lens_accumulated_resid_through_the_unembedding(caches, name):
    model, bridge, logits, ours, theirs = caches[name]
    lens, labels = ours.logit_lens(return_labels=True)
    stack, tl_labels = theirs.accumulated_resid(apply_ln=True, return_labels=True)  # (entries, B, T, D)
    assert labels == tl_labels
    torch.testing.assert_close(lens, stack @ bridge.W_U + bridge.b_U, atol=1e-5, rtol=0)
    torch.testing.assert_close(lens[-1], logits, atol=1e-5, rtol=0)
