"""tinyscope's :class:`~tinyscope.models.transformer.Transformer` in TransformerLens's classic
``HookedTransformer`` state-dict layout, and back. Pure torch: TransformerLens is not imported.

The classic layout (the keys and shapes ``HookedTransformer.state_dict()`` had before
TransformerLens 4.0, which ``transformer_lens.utilities.tl_checkpoint_conversion`` still reads),
for layer ``l`` with ``H`` heads of width ``Dh``, model width ``D`` and MLP width ``M``::

    embed.W_E (V, D)            pos_embed.W_pos (n_ctx, D)
    blocks.l.ln1.w, .b (D,)     blocks.l.ln2.w, .b (D,)       (normalization_type "LN" only)
    blocks.l.attn.W_Q, W_K, W_V (H, D, Dh)   b_Q, b_K, b_V (H, Dh)
    blocks.l.attn.W_O (H, Dh, D)             b_O (D,)
    blocks.l.mlp.W_in (D, M)  b_in (M,)      W_out (M, D)  b_out (D,)   (not when attn_only)
    ln_final.w, .b (D,)                                       (when the model has a final norm)
    unembed.W_U (D, V_out)      b_U (V_out,)

tinyscope keeps each projection as one ``nn.Linear`` of shape (out, in): ``W_Q`` is (H*Dh, D)
with row ``h*Dh + d`` = head ``h``, coordinate ``d``; so ``W_Q[h, :, d] = weight[h*Dh + d]``.
A bias tinyscope does not have is a zero tensor; the minimal model's missing output projection
(``attn_out_proj=False``, the heads concatenated into the residual, ``H*Dh == D``) is the
identity ``W_O``. A final norm whose presence differs from the blocks' (TransformerLens has one
``normalization_type`` for both) shows in the state dict: ``ln_final.*`` present or absent.

:func:`representable` states exactly which configs the layout (and TransformerLens's native
model) can hold; :func:`check_representable` raises :class:`NotRepresentable` otherwise.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from tinyscope.errors import TinyscopeError
from tinyscope.models.transformer import Transformer, TransformerConfig

TL_ACTIVATIONS = ("relu", "gelu", "silu")  # act_fn values whose TransformerLens function is ours exactly
TL_FFN_KINDS = ("mlp", "gelu")  # the two-matrix FFN; "gelu" is the same module with act="gelu"
EPS = 1e-5  # nn.LayerNorm's default, which every tinyscope LayerNorm uses


class NotRepresentable(TinyscopeError):
    """A model or config TransformerLens cannot represent (or tinyscope cannot take back);
    the message names the layer and the field."""


def _act_fn(cfg: TransformerConfig, layer: int) -> str:
    return "gelu" if cfg.ffn_kind(layer) == "gelu" else cfg.act


def problems(cfg: TransformerConfig, model: torch.nn.Module | None = None) -> list[str]:
    """Every reason TransformerLens cannot represent ``cfg`` (and ``model``), each naming the
    layer and the field; empty when it can.

    TransformerLens (classic layout and 4.x native model) has one head count, head width, MLP
    width and activation for every layer, the two-matrix MLP or none in every layer (``attn_only``),
    learned absolute positions, LayerNorm or no norm before each sublayer, and nothing after the
    MLP. So, layer by layer against layer 0: the same ``n_heads``, ``head_dim``, ``d_mlp``
    (0 in every layer or in none), FFN kind in {mlp, gelu} and activation in {relu, gelu, silu};
    ``positions="learned"``; and no quantifier sublayer. A model must be a plain
    :class:`Transformer` (a subclass with another forward cannot be checked).
    """
    out: list[str] = []
    if model is not None and type(model).forward is not Transformer.forward:
        out.append(f"{type(model).__name__} overrides Transformer.forward; only tinyscope's Transformer converts")
    h0, dh0, m0 = cfg.n_heads[0], cfg.head_dim(0), cfg.d_mlp[0]
    for layer in range(cfg.n_layers):
        where = f"layer {layer}"
        if cfg.n_heads[layer] != h0:
            out.append(f"{where}: model.n_heads={cfg.n_heads[layer]} differs from layer 0's {h0} "
                       f"(TransformerLens has one n_heads for every layer)")
        elif cfg.head_dim(layer) != dh0:
            out.append(f"{where}: d_head={cfg.head_dim(layer)} differs from layer 0's {dh0} "
                       f"(TransformerLens has one d_head for every layer)")
        if cfg.d_mlp[layer] != m0:
            what = "0 (no MLP)" if cfg.d_mlp[layer] == 0 else str(cfg.d_mlp[layer])
            out.append(f"{where}: model.d_mlp={what} differs from layer 0's {m0} (TransformerLens has one "
                       f"d_mlp for every layer, or attn_only: no MLP in any layer)")
        same_as_0 = layer > 0 and (cfg.ffn_kind(layer), _act_fn(cfg, layer)) == (cfg.ffn_kind(0), _act_fn(cfg, 0))
        if cfg.d_mlp[layer] and not same_as_0:  # a problem shared with layer 0 is named once, there
            kind = cfg.ffn_kind(layer)
            if kind not in TL_FFN_KINDS:
                out.append(f"{where}: model.ffn={kind!r} has no TransformerLens counterpart (allowed: "
                           f"{', '.join(TL_FFN_KINDS)})")
            elif _act_fn(cfg, layer) not in TL_ACTIVATIONS:
                out.append(f"{where}: model.act={cfg.act!r} has no TransformerLens act_fn (allowed: "
                           f"{', '.join(TL_ACTIVATIONS)})")
            elif _act_fn(cfg, layer) != _act_fn(cfg, 0) and cfg.d_mlp[0]:
                out.append(f"{where}: FFN activation {_act_fn(cfg, layer)!r} differs from layer 0's "
                           f"{_act_fn(cfg, 0)!r} (TransformerLens has one act_fn)")
        if model is not None and getattr(model.blocks[layer], "quant", None) is not None:
            out.append(f"{where}: blocks.{layer}.quant (a quantifier sublayer) has no TransformerLens counterpart")
    if cfg.positions != "learned":
        out.append(f"model.positions={cfg.positions!r}: TransformerLens's positional_embedding_type is "
                   f"'standard' (learned) or 'rotary', never none")
    return out


def representable(cfg: TransformerConfig, model: torch.nn.Module | None = None) -> bool:
    return not problems(cfg, model)


def check_representable(cfg: TransformerConfig, model: torch.nn.Module | None = None) -> None:
    """Raise :class:`NotRepresentable` (one line, every problem) unless :func:`representable`."""
    found = problems(cfg, model)
    if found:
        raise NotRepresentable("TransformerLens cannot represent this model: " + "; ".join(found))


def tl_config(cfg: TransformerConfig, model_name: str = "tinyscope") -> dict[str, Any]:
    """The ``HookedTransformerConfig`` fields of ``cfg`` (also what ``TransformerBridgeConfig``
    takes for TransformerLens 4.x's native model). ``normalization_type`` is the blocks' norm:
    "LN" for ``norm="pre"``, None for ``norm="none"``; a final norm that differs from it is
    carried by the state dict (see the module docstring)."""
    check_representable(cfg)
    attn_only = cfg.d_mlp[0] == 0
    return {
        "model_name": model_name,
        "n_layers": cfg.n_layers,
        "d_model": cfg.d_model,
        "n_ctx": cfg.n_ctx,
        "d_head": cfg.head_dim(0),
        "n_heads": cfg.n_heads[0],
        "d_mlp": None if attn_only else cfg.d_mlp[0],
        "d_vocab": cfg.vocab_size,
        "d_vocab_out": cfg.n_out,
        "act_fn": "relu" if attn_only else _act_fn(cfg, 0),
        "attn_only": attn_only,
        "normalization_type": "LN" if cfg.norm == "pre" else None,
        "final_rms": False,
        "eps": EPS,
        "attention_dir": "causal" if cfg.causal else "bidirectional",
        "positional_embedding_type": "standard",
        "use_attn_scale": True,
        "gated_mlp": False,
        "parallel_attn_mlp": False,
        "default_prepend_bos": False,
        "original_architecture": "tinyscope.Transformer",
    }


def _zeros_if_none(t: torch.Tensor | None, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    return torch.zeros(shape, dtype=like.dtype, device=like.device) if t is None else t


def to_tl_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """``model``'s weights in the classic HookedTransformer layout (detached copies)."""
    cfg = model.cfg
    check_representable(cfg, model)
    D = cfg.d_model
    w = model.W_E.weight
    sd: dict[str, torch.Tensor] = {"embed.W_E": w, "pos_embed.W_pos": model.W_pos.weight}  # (V, D), (n_ctx, D)
    for layer, block in enumerate(model.blocks):
        p, attn = f"blocks.{layer}.", block.attn
        H, Dh = attn.n_heads, attn.d_head
        if cfg.norm == "pre":
            sd[p + "ln1.w"], sd[p + "ln1.b"] = block.ln1.weight, block.ln1.bias
        for n in "QKV":
            lin = getattr(attn, f"W_{n}")
            sd[p + f"attn.W_{n}"] = lin.weight.view(H, Dh, D).transpose(1, 2)  # (H, D, Dh)
            sd[p + f"attn.b_{n}"] = _zeros_if_none(lin.bias, (H * Dh,), w).view(H, Dh)  # (H, Dh)
        if attn.W_O is not None:
            sd[p + "attn.W_O"] = attn.W_O.weight.T.reshape(H, Dh, D)  # (H, Dh, D)
            sd[p + "attn.b_O"] = _zeros_if_none(attn.W_O.bias, (D,), w)
        else:  # heads concatenated into the residual: the identity, H*Dh == D
            sd[p + "attn.W_O"] = torch.eye(D, dtype=w.dtype, device=w.device).view(H, Dh, D)  # (H, Dh, D)
            sd[p + "attn.b_O"] = torch.zeros(D, dtype=w.dtype, device=w.device)
        if block.mlp is not None:
            if cfg.norm == "pre":
                sd[p + "ln2.w"], sd[p + "ln2.b"] = block.ln2.weight, block.ln2.bias
            M = block.mlp.W_in.out_features
            sd[p + "mlp.W_in"] = block.mlp.W_in.weight.T  # (D, M)
            sd[p + "mlp.b_in"] = _zeros_if_none(block.mlp.W_in.bias, (M,), w)
            sd[p + "mlp.W_out"] = block.mlp.W_out.weight.T  # (M, D)
            sd[p + "mlp.b_out"] = _zeros_if_none(block.mlp.W_out.bias, (D,), w)
    if cfg.final_norm:
        sd["ln_final.w"], sd["ln_final.b"] = model.ln_final.weight, model.ln_final.bias
    sd["unembed.W_U"] = model.W_U.weight.T  # (D, V_out)
    sd["unembed.b_U"] = _zeros_if_none(model.W_U.bias, (cfg.n_out,), w)
    return {k: v.detach().clone().contiguous() for k, v in sd.items()}


# Buffers the classic HookedTransformer kept in its state dict; they hold no weights.
_CLASSIC_BUFFERS = (".mask", ".IGNORE")
_MUST_BE = {  # TransformerLens config fields tinyscope's Transformer has no counterpart for, and the values it takes
    "final_rms": (False,), "gated_mlp": (False,), "parallel_attn_mlp": (False,), "post_embedding_ln": (False,),
    "positional_embedding_type": ("standard",), "use_attn_scale": (True,), "use_local_attn": (False,),
    "use_qk_norm": (False,), "scale_attn_by_inverse_layer_idx": (False,), "num_experts": (None,),
}


def config_problems(tl: dict[str, Any]) -> list[str]:
    """Every field of a TransformerLens config (as a dict) tinyscope's Transformer cannot take."""
    out = []
    norm = tl.get("normalization_type", "LN")
    if norm not in ("LN", None):
        out.append(f"normalization_type={norm!r} (tinyscope has LayerNorm 'LN' or none)")
    elif norm is not None and not math.isclose(float(tl.get("eps", EPS)), EPS, rel_tol=1e-9):
        out.append(f"eps={tl['eps']} (tinyscope's LayerNorm uses {EPS})")
    if not tl.get("attn_only", False) and tl.get("act_fn") not in TL_ACTIVATIONS:
        out.append(f"act_fn={tl.get('act_fn')!r} (allowed: {', '.join(TL_ACTIVATIONS)})")
    if tl.get("attention_dir", "causal") not in ("causal", "bidirectional"):
        out.append(f"attention_dir={tl.get('attention_dir')!r} (allowed: 'causal', 'bidirectional')")
    for key, allowed in _MUST_BE.items():
        if key in tl and tl[key] not in allowed:
            out.append(f"{key}={tl[key]!r} (tinyscope takes {' or '.join(map(repr, allowed))})")
    if tl.get("n_key_value_heads") not in (None, tl.get("n_heads")):
        out.append(f"n_key_value_heads={tl['n_key_value_heads']} (grouped-query attention; tinyscope has one "
                   f"key and value per head)")
    for key in ("attn_scores_soft_cap", "output_logits_soft_cap"):
        if (tl.get(key) or -1.0) > 0:
            out.append(f"{key}={tl[key]} (tinyscope has no soft cap)")
    scale = tl.get("attn_scale", -1.0)
    if scale is not None and scale > 0 and not math.isclose(float(scale), math.sqrt(tl["d_head"]), rel_tol=1e-9):
        out.append(f"attn_scale={scale} (tinyscope divides the scores by sqrt(d_head))")
    return out


def _expected_shapes(tl: dict[str, Any], final_norm: bool) -> dict[str, tuple[int, ...]]:
    L, D, H, Dh = tl["n_layers"], tl["d_model"], tl["n_heads"], tl["d_head"]
    V = tl["d_vocab"]
    V_out = tl.get("d_vocab_out") or -1
    V_out = V if V_out <= 0 else V_out
    shapes: dict[str, tuple[int, ...]] = {"embed.W_E": (V, D), "pos_embed.W_pos": (tl["n_ctx"], D)}
    ln = tl.get("normalization_type", "LN") == "LN"
    for layer in range(L):
        p = f"blocks.{layer}."
        if ln:
            shapes[p + "ln1.w"] = shapes[p + "ln1.b"] = (D,)
        for n in "QKV":
            shapes[p + f"attn.W_{n}"], shapes[p + f"attn.b_{n}"] = (H, D, Dh), (H, Dh)
        shapes[p + "attn.W_O"], shapes[p + "attn.b_O"] = (H, Dh, D), (D,)
        if not tl.get("attn_only", False):
            M = tl["d_mlp"]
            if ln:
                shapes[p + "ln2.w"] = shapes[p + "ln2.b"] = (D,)
            shapes[p + "mlp.W_in"], shapes[p + "mlp.b_in"] = (D, M), (M,)
            shapes[p + "mlp.W_out"], shapes[p + "mlp.b_out"] = (M, D), (D,)
    if final_norm:
        shapes["ln_final.w"] = shapes["ln_final.b"] = (D,)
    shapes["unembed.W_U"], shapes["unembed.b_U"] = (D, V_out), (V_out,)
    return shapes


def _all_zero(*ts: torch.Tensor) -> bool:
    return all(not bool(t.any()) for t in ts)


def from_tl_state_dict(state_dict: dict[str, torch.Tensor], tl: dict[str, Any],
                       hint: TransformerConfig | dict | None = None) -> Transformer:
    """A :class:`Transformer` holding a classic-layout ``state_dict`` under TransformerLens config
    ``tl`` (a dict of HookedTransformerConfig fields).

    Every TransformerLens parameter is kept: biases, ``W_O`` and ``b_U`` become parameters. With
    ``hint`` (the config the model was exported from) the switches come back as they were — a
    bias the hint lacks is dropped, the identity ``W_O`` of ``attn_out_proj=False`` removed —
    but only where the tensors still are exactly zero / the identity (else the switch turns on,
    so the function is kept); the hint's initialisation fields return too. Whether the model has
    a final norm is read from the ``ln_final.*`` keys. Raises :class:`NotRepresentable` naming the
    field for a config tinyscope cannot take, and for a missing, unexpected or misshaped tensor.
    """
    bad = config_problems(tl)
    if bad:
        raise NotRepresentable("tinyscope cannot take this TransformerLens model: " + "; ".join(bad))
    sd = {k: v for k, v in state_dict.items() if not k.endswith(_CLASSIC_BUFFERS)}
    final_norm = "ln_final.w" in sd
    shapes = _expected_shapes(tl, final_norm)
    missing = [k for k in shapes if k not in sd]
    extra = [k for k in sd if k not in shapes]
    if missing or extra:
        raise NotRepresentable(f"the state dict does not match its TransformerLens config: missing "
                               f"{missing[:4] or 'nothing'}, unexpected {extra[:4] or 'nothing'}")
    for k, shape in shapes.items():
        if tuple(sd[k].shape) != shape:
            raise NotRepresentable(f"{k} has shape {tuple(sd[k].shape)}, expected {shape} from the config")
    if isinstance(hint, dict):
        hint = TransformerConfig(**hint)
    L, D, H, Dh = tl["n_layers"], tl["d_model"], tl["n_heads"], tl["d_head"]
    attn_only = bool(tl.get("attn_only", False))

    def keep(field: str, *tensors: torch.Tensor) -> bool:  # the hint's switch, unless the tensors say otherwise
        return hint is None or getattr(hint, field) or not _all_zero(*tensors)

    blocks = [f"blocks.{layer}." for layer in range(L)]
    eye = torch.eye(D, dtype=sd["embed.W_E"].dtype).view(H, Dh, D) if H * Dh == D else None  # (H, Dh, D)
    identity_o = eye is not None and all(torch.equal(sd[p + "attn.W_O"], eye) for p in blocks)
    out_proj = hint is None or hint.attn_out_proj or not (identity_o and _all_zero(*(sd[p + "attn.b_O"] for p in blocks)))
    fields = dict(
        vocab_size=tl["d_vocab"], n_ctx=tl["n_ctx"], d_model=D, n_heads=[H] * L,
        d_head=None if D % H == 0 and D // H == Dh else Dh,
        d_mlp=[0 if attn_only else tl["d_mlp"]] * L,
        act=tl.get("act_fn") if not attn_only else "relu", ffn="mlp",
        norm="pre" if tl.get("normalization_type", "LN") == "LN" else "none", final_norm=final_norm,
        attn_out_proj=out_proj,
        qkv_bias=keep("qkv_bias", *(sd[p + f"attn.b_{n}"] for p in blocks for n in "QKV")),
        attn_out_bias=out_proj and keep("attn_out_bias", *(sd[p + "attn.b_O"] for p in blocks)),
        mlp_bias=attn_only or keep("mlp_bias", *(sd[p + f"mlp.b_{n}"] for p in blocks for n in ("in", "out"))),
        unembed_bias=keep("unembed_bias", sd["unembed.b_U"]),
        d_vocab_out=None if shapes["unembed.b_U"][0] == tl["d_vocab"] else shapes["unembed.b_U"][0],
        causal=tl.get("attention_dir", "causal") == "causal",
    )
    if hint is not None:
        fields.update(init=hint.init, init_std=hint.init_std, d_head=hint.d_head if hint.head_dim(0) == Dh else Dh)
        if attn_only:
            fields.update(act=hint.act, mlp_bias=hint.mlp_bias)
        elif hint.ffn_kind(0) == "gelu" and fields["act"] == "gelu":
            fields.update(ffn="gelu", act=hint.act)
        if hint.d_vocab_out is None and fields["d_vocab_out"] == hint.vocab_size:
            fields["d_vocab_out"] = None
    cfg = TransformerConfig(**fields)
    dtype = sd["embed.W_E"].dtype
    model = Transformer(cfg).to(dtype)
    ours = _ours_from_classic(sd, cfg, H, Dh, D)
    target = model.state_dict()
    for k in target:
        if k not in ours:
            raise NotRepresentable(f"no TransformerLens tensor for tinyscope's {k}")  # a bug in the mapping
    model.load_state_dict(ours, strict=True)
    return model


def _ours_from_classic(sd: dict[str, torch.Tensor], cfg: TransformerConfig, H: int, Dh: int, D: int
                       ) -> dict[str, torch.Tensor]:
    ours = {"W_E.weight": sd["embed.W_E"], "W_pos.weight": sd["pos_embed.W_pos"]}
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        if cfg.norm == "pre":
            ours[p + "ln1.weight"], ours[p + "ln1.bias"] = sd[p + "ln1.w"], sd[p + "ln1.b"]
        for n in "QKV":
            ours[p + f"attn.W_{n}.weight"] = sd[p + f"attn.W_{n}"].transpose(1, 2).reshape(H * Dh, D)  # (H*Dh, D)
            if cfg.qkv_bias:
                ours[p + f"attn.W_{n}.bias"] = sd[p + f"attn.b_{n}"].reshape(H * Dh)
        if cfg.attn_out_proj:
            ours[p + "attn.W_O.weight"] = sd[p + "attn.W_O"].reshape(H * Dh, D).T  # (D, H*Dh)
            if cfg.attn_out_bias:
                ours[p + "attn.W_O.bias"] = sd[p + "attn.b_O"]
        if cfg.d_mlp[layer]:
            if cfg.norm == "pre":
                ours[p + "ln2.weight"], ours[p + "ln2.bias"] = sd[p + "ln2.w"], sd[p + "ln2.b"]
            ours[p + "mlp.W_in.weight"] = sd[p + "mlp.W_in"].T  # (M, D)
            ours[p + "mlp.W_out.weight"] = sd[p + "mlp.W_out"].T  # (D, M)
            if cfg.mlp_bias:
                ours[p + "mlp.W_in.bias"], ours[p + "mlp.W_out.bias"] = sd[p + "mlp.b_in"], sd[p + "mlp.b_out"]
    if cfg.final_norm:
        ours["ln_final.weight"], ours["ln_final.bias"] = sd["ln_final.w"], sd["ln_final.b"]
    ours["W_U.weight"] = sd["unembed.W_U"].T  # (V_out, D)
    if cfg.unembed_bias:
        ours["W_U.bias"] = sd["unembed.b_U"]
    return {k: v.detach().clone().contiguous() for k, v in ours.items()}


def config_dict(cfg: TransformerConfig) -> dict[str, Any]:
    """``cfg`` as plain JSON values (what an export records so the model comes back the same)."""
    return dataclasses.asdict(cfg)
