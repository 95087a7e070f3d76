"""tinyscope's Transformer as a TransformerLens 4.x ``TransformerBridge`` over TransformerLens's
native model, and back.

TransformerLens 4.0 removed ``HookedTransformer`` and ``HookedTransformerConfig``; its native
bridge (``TransformerBridge.boot_native``: a ``NativeModel`` with no Hugging Face counterpart,
wrapped by the same bridge as every HF model) is what 4.x offers for a model built from a config,
and its ``convert_tl_checkpoint`` reads the classic HookedTransformer state-dict layout. So a
model goes ours -> classic layout (:mod:`tinyscope.interop.layout`) -> ``convert_tl_checkpoint``
-> a native bridge, built exactly as ``boot_native`` builds one (``build_bridge_from_module``
with the ``TransformerLensNative`` adapter).

One extension, through the adapter hook TransformerLens provides for it (``post_adapter_hook``):
TransformerLens has one ``normalization_type`` for the blocks and the final norm, tinyscope an
independent ``final_norm``. When they differ, the native model's final norm is replaced (an
identity for pre-LN blocks without a final norm, as the spatial-induction models have; a
LayerNorm after norm-free blocks) and the bridge's ``ln_final`` slot wraps it as TransformerLens
wraps an absent norm (a pass-through component) or a LayerNorm (``NormalizationBridge``).

TransformerLens is imported here only, lazily; without it every entry point raises one
:class:`~tinyscope.errors.TinyscopeError` saying how to install the ``interop`` extra.
"""
from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tinyscope.errors import TinyscopeError
from tinyscope.interop.files import read_export
from tinyscope.interop.layout import (
    EPS,
    NotRepresentable,
    config_dict,
    config_problems,
    from_tl_state_dict,
    tl_config,
    to_tl_state_dict,
)
from tinyscope.models.transformer import Transformer

MIN_VERSION = (4, 3)
NATIVE = "TransformerLensNative"
HINT = "tinyscope_config"  # the bridge attribute holding the tinyscope config a bridge was made from


def require_transformer_lens() -> str:
    """The installed TransformerLens version; :class:`TinyscopeError` unless it is >= 4.3."""
    try:
        version = importlib.metadata.version("transformer-lens")
    except importlib.metadata.PackageNotFoundError:
        raise TinyscopeError("TransformerLens is not installed: pip install 'tinyscope[interop]' "
                             "(TransformerLens >= 4.3)") from None
    found = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    if found < MIN_VERSION:
        raise TinyscopeError(f"TransformerLens {version} is installed; tinyscope.interop needs >= 4.3 (its native "
                             f"bridge): pip install 'tinyscope[interop]'. The exported classic state dict and "
                             f"config.json load into older HookedTransformer by hand (docs/interop.md)")
    return version


def _bridge_config(tl: dict[str, Any]):
    from transformer_lens.config import TransformerBridgeConfig

    fields = {k: v for k, v in tl.items() if k not in ("original_architecture",)}
    cfg = TransformerBridgeConfig.from_dict({**fields, "architecture": NATIVE, "init_weights": False})
    cfg.original_architecture = tl.get("original_architecture")
    return cfg


def build_bridge(state_dict: dict[str, torch.Tensor], tl: dict[str, Any], model_name: str = "tinyscope",
                 device: str | torch.device = "cpu"):
    """A native ``TransformerBridge`` on ``device`` holding a classic-layout ``state_dict`` under
    config ``tl`` (HookedTransformerConfig fields); a final norm that differs from the blocks'
    norm is read from the ``ln_final.*`` keys, as everywhere in :mod:`tinyscope.interop`."""
    require_transformer_lens()
    import transformer_lens.model_bridge.sources.native  # noqa: F401  (attaches boot_native)
    from transformer_lens.model_bridge.generalized_components import NormalizationBridge
    from transformer_lens.model_bridge.generalized_components.base import GeneralizedComponent
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module
    from transformer_lens.model_bridge.sources.native.model import NativeModel
    from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

    cfg = _bridge_config(tl)
    blocks_norm = cfg.normalization_type is not None
    final_norm = "ln_final.w" in state_dict
    dtype = state_dict["embed.W_E"].dtype
    native = NativeModel(cfg)
    hook = None
    if blocks_norm != final_norm:
        native.ln_out = nn.LayerNorm(cfg.d_model, eps=cfg.eps) if final_norm else nn.Identity()

        def hook(adapter) -> None:
            slot = NormalizationBridge if final_norm else GeneralizedComponent
            adapter.component_mapping["ln_final"] = slot(name="ln_out", config=adapter.cfg)

    native.to(device=device, dtype=dtype)  # before the bridge: its .to() prints
    bridge = build_bridge_from_module(native, NATIVE, tl_config=cfg, model_name=model_name, dtype=dtype,
                                      post_adapter_hook=hook)
    bridge.load_state_dict(convert_tl_checkpoint(state_dict, cfg), strict=True)
    bridge.eval()
    return bridge


def to_transformer_lens(model: Transformer, model_name: str = "tinyscope"):
    """``model`` as a TransformerLens ``TransformerBridge`` (native model, no processing of the
    weights: no LN folding or centring), on ``model``'s device and dtype.

    Raises :class:`~tinyscope.interop.layout.NotRepresentable` naming the layer and the field
    when TransformerLens cannot represent the model (:func:`~tinyscope.interop.layout.problems`)."""
    if not isinstance(model, Transformer):
        raise NotRepresentable(f"to_transformer_lens takes tinyscope's Transformer; got {type(model).__name__}")
    bridge = build_bridge(to_tl_state_dict(model), tl_config(model.cfg, model_name), model_name,
                          device=model.W_E.weight.device)
    setattr(bridge, HINT, config_dict(model.cfg))
    return bridge


def _from_bridge_state(state: dict[str, torch.Tensor], n_heads: int, d_head: int) -> dict[str, torch.Tensor]:
    """The inverse of ``convert_tl_checkpoint``: bridge keys and ``nn.Linear`` shapes -> classic."""
    H, Dh = n_heads, d_head
    same = lambda t: t  # noqa: E731
    flip = lambda t: t.T  # noqa: E731
    table = [  # bridge suffix, classic suffix, tensor conversion; the first match wins
        ("unembed.weight", "unembed.W_U", flip),  # (V_out, D) -> (D, V_out)
        ("unembed.bias", "unembed.b_U", same),
        ("pos_embed.weight", "pos_embed.W_pos", same),
        ("embed.weight", "embed.W_E", same),
        *((f".attn.{n.lower()}.weight", f".attn.W_{n}", lambda t: t.view(H, Dh, -1).transpose(1, 2))  # (H, D, Dh)
          for n in "QKV"),
        *((f".attn.{n.lower()}.bias", f".attn.b_{n}", lambda t: t.view(H, Dh)) for n in "QKV"),
        (".attn.o.weight", ".attn.W_O", lambda t: t.T.reshape(H, Dh, -1)),  # (D, H*Dh) -> (H, Dh, D)
        (".attn.o.bias", ".attn.b_O", same),
        (".mlp.in.weight", ".mlp.W_in", flip), (".mlp.in.bias", ".mlp.b_in", same),
        (".mlp.out.weight", ".mlp.W_out", flip), (".mlp.out.bias", ".mlp.b_out", same),
    ]
    out: dict[str, torch.Tensor] = {}
    for key, t in state.items():
        for suffix, classic, convert in table:
            if key.endswith(suffix):
                out[key[: len(key) - len(suffix)] + classic] = convert(t.detach())
                break
        else:
            module, _, leaf = key.rpartition(".")
            if not (module.rpartition(".")[2] in ("ln1", "ln2", "ln_final") and leaf in ("weight", "bias")):
                raise NotRepresentable(f"the bridge's {key} has no counterpart in tinyscope's Transformer")
            out[f"{module}.{leaf[0]}"] = t.detach()  # LayerNorm weight/bias -> w/b
    return {k: v.contiguous() for k, v in out.items()}


_TL_FIELDS = ("model_name", "n_layers", "d_model", "n_ctx", "d_head", "n_heads", "d_mlp", "d_vocab", "d_vocab_out",
              "act_fn", "attn_only", "normalization_type", "final_rms", "eps", "attention_dir",
              "positional_embedding_type", "use_attn_scale", "attn_scale", "gated_mlp", "parallel_attn_mlp",
              "n_key_value_heads", "attn_scores_soft_cap", "output_logits_soft_cap", "post_embedding_ln",
              "use_local_attn", "use_qk_norm", "scale_attn_by_inverse_layer_idx", "num_experts",
              "default_prepend_bos", "original_architecture")


def bridge_config_dict(bridge) -> dict[str, Any]:
    """The HookedTransformerConfig-style fields of a bridge's config that the conversion reads."""
    cfg = bridge.cfg
    return {k: getattr(cfg, k) for k in _TL_FIELDS if hasattr(cfg, k)}


def to_classic(bridge) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A native bridge's weights in the classic layout, and its config fields."""
    arch = getattr(bridge.cfg, "architecture", None)
    if arch != NATIVE:
        raise NotRepresentable(f"from_transformer_lens takes a bridge over TransformerLens's native model "
                               f"(architecture {NATIVE!r}, what boot_native, to_transformer_lens and "
                               f"load_transformer_lens make); this one wraps {arch!r}")
    if getattr(bridge, "compatibility_mode", False):
        raise NotRepresentable("this bridge is in compatibility mode (its weights may be folded or centred); "
                               "convert a bridge before enable_compatibility_mode()")
    tl = bridge_config_dict(bridge)
    tl.setdefault("eps", EPS)
    bad = config_problems(tl)  # before the tensors: their shapes follow from a config tinyscope can take
    if bad:
        raise NotRepresentable("tinyscope cannot take this TransformerLens model: " + "; ".join(bad))
    state = _from_bridge_state(bridge.state_dict(), tl["n_heads"], tl["d_head"])
    return {k: v.cpu() for k, v in state.items()}, tl


def from_transformer_lens(source, hint=None) -> Transformer:
    """A tinyscope :class:`Transformer` from a TransformerLens model: a native ``TransformerBridge``
    (what :func:`to_transformer_lens`, :func:`~tinyscope.interop.files.load_transformer_lens` or
    ``TransformerBridge.boot_native`` give) or the folder ``tinyscope export`` wrote.

    ``hint`` (a TransformerConfig or its dict) defaults to the config the bridge or folder was
    made from, when it was made by tinyscope; see :func:`~tinyscope.interop.layout.from_tl_state_dict`
    for what it restores. The model is on the bridge's device, in eval mode."""
    if isinstance(source, (str, Path)):
        state, tl, meta = read_export(source)
        model = from_tl_state_dict(state, tl, hint if hint is not None else meta.get(HINT))
        return model.eval()
    require_transformer_lens()
    from transformer_lens.model_bridge.bridge import TransformerBridge

    if not isinstance(source, TransformerBridge):
        raise NotRepresentable(f"from_transformer_lens takes a TransformerBridge or an export folder; "
                               f"got {type(source).__name__}")
    state, tl = to_classic(source)
    device = next(iter(source.state_dict().values())).device
    model = from_tl_state_dict(state, tl, hint if hint is not None else getattr(source, HINT, None))
    return model.to(device).eval()


def load_transformer_lens(out: str | Path):
    """The folder ``tinyscope export`` wrote as a TransformerLens 4.x ``TransformerBridge`` (native
    model); :func:`from_transformer_lens` takes the bridge back, or the folder itself."""
    state, tl, meta = read_export(out)
    bridge = build_bridge(state, tl, tl.get("model_name", "tinyscope"))
    if meta.get(HINT) is not None:
        setattr(bridge, HINT, meta[HINT])
    return bridge
