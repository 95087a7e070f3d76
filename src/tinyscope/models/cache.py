"""The activation cache and TransformerLens's decompositions of the residual stream.

An :class:`ActivationCache` maps hook names to the tensors a run saw. ``cache["pattern", 0]``
expands short names (:func:`~tinyscope.models.hook_names.act_name`) and ``cache["resid_post", -1]``
counts layers from the end. With the model it came from (``run_with_cache`` passes it), it
computes what TransformerLens's ``ActivationCache`` computes, with the same names and arguments
(``layer`` ``None`` or ``-1`` means the unembedding input, ``n_layers``):

* ``accumulated_resid(layer)``: the stream ``x_0, x_1, …`` entering each layer before ``layer``
  (``{l}_pre``, with ``{l}_mid`` when ``incl_mid``), and ``final_post`` when ``layer == n_layers``;
* ``decompose_resid(layer)``: the terms whose sum is the stream entering ``layer``: ``embed``,
  ``pos_embed`` and each earlier layer's ``attn_out``, ``mlp_out`` (and ``quant_out``);
* ``stack_head_results(layer)``: each head's write ``z_h W_O^h`` (``hook_result``, computed from
  ``hook_z`` and the output projection, the identity block when the model has none), so that
  ``attn_out = Σ_h result_h + b_O``;
* ``apply_ln_to_stack(stack, layer)``: each term through the normalisation that reads the stream
  at ``layer``: centred and divided by the scale ``sqrt(Var(x) + eps)`` of the cached stream
  ``x`` it is part of (no weight or bias, as TransformerLens), or, with ``recompute_ln`` at the
  final norm, the final norm module applied to each term on its own (the logit lens);
* ``logit_lens()``: ``accumulated_resid`` through the final norm and the unembedding.

A norm that is the identity (``model.norm="none"``, no final LayerNorm) leaves stacks unchanged.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import torch
from torch import nn

from tinyscope.errors import InputError
from tinyscope.models.hook_names import HookNameError, act_name
from tinyscope.models.lens import logit_lens

_HEAD_AXIS_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_z", "hook_result")


class Slice:
    """TransformerLens's slice of one axis: ``None`` keeps it, an int indexes it (the axis goes),
    a tuple ``(stop,)``, ``(start, stop[, step])`` or a ``slice`` slices it, a list / array /
    tensor of indices gathers those."""

    def __init__(self, sel=None):
        if isinstance(sel, Slice):
            sel = sel.sel
        if isinstance(sel, (np.integer, torch.Tensor)) and np.ndim(sel) == 0:
            sel = int(sel)
        if isinstance(sel, tuple):
            sel = slice(*sel)
        elif isinstance(sel, (list, np.ndarray, torch.Tensor)):
            sel = torch.as_tensor(np.asarray(sel), dtype=torch.long)
        elif not (sel is None or isinstance(sel, (int, slice))):
            raise InputError(f"a slice is None, an int, a tuple, a slice or a list of indices; got {sel!r}")
        self.sel = sel

    def apply(self, t: torch.Tensor, dim: int = 0) -> torch.Tensor:
        if self.sel is None:
            return t
        index = [slice(None)] * t.dim()
        index[dim] = self.sel.to(t.device) if isinstance(self.sel, torch.Tensor) else self.sel
        return t[tuple(index)]


def slice_positions(t: torch.Tensor, name: str, pos_slice) -> torch.Tensor:
    """``t`` (the activation of hook ``name``) with ``pos_slice`` applied to its position axis:
    -3 for the per-head hooks (q, k, v, z, result), -2 for the rest (query axis of patterns)."""
    if pos_slice is None:
        return t
    dim = -3 if name.endswith(_HEAD_AXIS_HOOKS) else -2
    return Slice(pos_slice).apply(t, dim) if t.dim() >= -dim else t


class ActivationCache:
    """Activations by hook name; ``model`` is the model that produced them (for the helpers)."""

    def __init__(self, cache_dict: dict[str, torch.Tensor], model: nn.Module | None = None, has_batch_dim: bool = True):
        self.cache_dict = cache_dict
        self.model = model
        self.has_batch_dim = has_batch_dim

    # -- a mapping of hook names --------------------------------------------------------------
    def _full(self, key) -> str:
        if isinstance(key, tuple):
            if len(key) > 1 and isinstance(key[1], int) and key[1] < 0:
                key = (key[0], self.n_layers + key[1], *key[2:])
            return act_name(*key)
        return act_name(str(key))

    def __getitem__(self, key) -> torch.Tensor:
        if isinstance(key, str) and key in self.cache_dict:
            return self.cache_dict[key]
        full = self._full(key)
        try:
            return self.cache_dict[full]
        except KeyError:
            raise HookNameError(f"no activation {full!r} in the cache; it holds: {', '.join(self.cache_dict)}") from None

    def __contains__(self, key: object) -> bool:
        return self._full(key) in self.cache_dict

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache_dict)

    def __len__(self) -> int:
        return len(self.cache_dict)

    def keys(self):
        return self.cache_dict.keys()

    def values(self):
        return self.cache_dict.values()

    def items(self):
        return self.cache_dict.items()

    def to(self, device: str | torch.device) -> "ActivationCache":
        return ActivationCache({k: v.to(device) for k, v in self.cache_dict.items()}, self.model, self.has_batch_dim)

    def remove_batch_dim(self) -> "ActivationCache":
        """Drop the batch axis of a batch-of-one cache (in place, as TransformerLens)."""
        if self.has_batch_dim:
            sizes = {v.shape[0] for v in self.cache_dict.values() if v.dim()}
            if sizes - {1}:
                raise InputError(f"remove_batch_dim needs a batch of one; the cache holds batches of {sorted(sizes)}")
            self.cache_dict = {k: v[0] if v.dim() else v for k, v in self.cache_dict.items()}
            self.has_batch_dim = False
        return self

    def apply_slice_to_batch_dim(self, batch_slice) -> "ActivationCache":
        if not self.has_batch_dim:
            raise InputError("this cache has no batch axis to slice")
        s = Slice(batch_slice)
        return ActivationCache({k: s.apply(v, 0) for k, v in self.cache_dict.items()}, self.model,
                               has_batch_dim=not isinstance(s.sel, int))

    def __repr__(self) -> str:
        return f"ActivationCache({len(self.cache_dict)} activations)"

    # -- the model behind the cache -----------------------------------------------------------
    def _model(self, what: str) -> nn.Module:
        if self.model is None or not hasattr(self.model, "blocks"):
            raise InputError(f"{what} needs the transformer the cache came from (blocks, norms, W_O, W_U); "
                             f"make the cache with model.run_with_cache(...)")
        return self.model

    @property
    def n_layers(self) -> int:
        cfg = getattr(self.model, "cfg", None)
        if cfg is not None and isinstance(getattr(cfg, "n_layers", None), int):
            return cfg.n_layers
        if self.model is not None and hasattr(self.model, "blocks"):
            return len(self.model.blocks)
        layers = [int(k.split(".")[1]) for k in self.cache_dict if k.startswith("blocks.") and k.split(".")[1].isdigit()]
        if not layers:
            raise InputError("negative layers count from the end, but this cache holds no layer's activations")
        return max(layers) + 1

    def _layer(self, layer: int | None) -> int:
        n = self.n_layers
        layer = n if layer is None or layer == -1 else layer
        if not (isinstance(layer, int) and 0 <= layer <= n):
            raise InputError(f"layer={layer!r}: a layer of this model is 0..{n} (or -1 / None for {n}, the unembedding input)")
        return layer

    def _norm(self, layer: int, mlp_input: bool) -> nn.Module:
        model = self._model("apply_ln_to_stack")
        if layer == self.n_layers:
            if mlp_input:
                raise InputError("mlp_input=True names a layer's second norm; the unembedding input has only the final norm")
            return model.ln_final
        block = model.blocks[layer]
        return block.ln2 if mlp_input else block.ln1

    # -- TransformerLens's helpers ------------------------------------------------------------
    def accumulated_resid(self, layer: int | None = None, incl_mid: bool = False, apply_ln: bool = False,
                          pos_slice=None, mlp_input: bool = False, return_labels: bool = False):
        """The residual stream entering each layer up to ``layer``: (entries, [B,] T, D)."""
        layer, n = self._layer(layer), self.n_layers
        parts, labels = [], []
        for l in range(layer + 1):
            if l == n:
                parts.append(self["resid_post", n - 1])
                labels.append("final_post")
                continue
            parts.append(self["resid_pre", l])
            labels.append(f"{l}_pre")
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                parts.append(self["resid_mid", l])
                labels.append(f"{l}_mid")
        stack = torch.stack([Slice(pos_slice).apply(p, -2) for p in parts])  # (entries, B, T, D)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice,
                                           has_batch_dim=self.has_batch_dim, recompute_ln=layer == n)
        return (stack, labels) if return_labels else stack

    def decompose_resid(self, layer: int | None = None, mlp_input: bool = False, mode: str = "all",
                        apply_ln: bool = False, pos_slice=None, incl_embeds: bool = True, return_labels: bool = False):
        """The terms whose sum is the stream entering ``layer``: (terms, [B,] T, D).

        ``mode``: ``"all"``, ``"attn"`` (embeddings and attention outputs) or ``"mlp"``
        (embeddings and FFN outputs); ``mlp_input`` adds layer ``layer``'s attention output
        (the FFN's input). A layer without an FFN has no ``mlp_out`` term; a layer with a
        quantifier sublayer adds ``quant_out`` (mode ``"all"``).
        """
        if mode not in ("all", "mlp", "attn"):
            raise InputError(f"mode={mode!r}: decompose_resid's mode is 'all', 'mlp' or 'attn'")
        layer = self._layer(layer)
        model = self._model("decompose_resid")
        parts, labels = [], []
        if incl_embeds:
            for name, label in (("hook_embed", "embed"), ("hook_pos_embed", "pos_embed")):
                if name in self.cache_dict:
                    parts.append(self.cache_dict[name])
                    labels.append(label)
        for l in range(layer):
            block = model.blocks[l]
            if mode != "mlp":
                parts.append(self["attn_out", l])
                labels.append(f"{l}_attn_out")
            if mode != "attn" and block.mlp is not None:
                parts.append(self["mlp_out", l])
                labels.append(f"{l}_mlp_out")
            if mode == "all" and getattr(block, "quant", None) is not None:
                parts.append(self[f"blocks.{l}.hook_quant_out"])
                labels.append(f"{l}_quant_out")
        if mlp_input and mode != "mlp":
            parts.append(self["attn_out", layer])
            labels.append(f"{layer}_attn_out")
        if not parts:
            raise InputError("decompose_resid has no terms to stack: cache hook_embed or earlier layers")
        stack = torch.stack([Slice(pos_slice).apply(p, -2) for p in parts])  # (terms, B, T, D)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice,
                                           has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

    def compute_head_results(self) -> None:
        """Cache ``blocks.{l}.attn.hook_result`` ([B,] T, H, D) = ``z_h W_O^h`` for every layer."""
        model = self._model("compute_head_results")
        for l in range(self.n_layers):
            key = f"blocks.{l}.attn.hook_result"
            if key not in self.cache_dict:
                self.cache_dict[key] = head_results(model.blocks[l].attn, self["z", l])

    def stack_head_results(self, layer: int = -1, return_labels: bool = False, incl_remainder: bool = False,
                           pos_slice=None, apply_ln: bool = False):
        """Every head's write to the stream in the layers before ``layer``: (heads, [B,] T, D),
        labels ``L{l}H{h}``; ``incl_remainder`` adds the rest of the stream entering ``layer``."""
        layer = self._layer(layer)
        self.compute_head_results()
        parts, labels = [], []
        for l in range(layer):
            result = Slice(pos_slice).apply(self["result", l], -3)  # ([B,] T, H, D)
            parts.append(result.movedim(-2, 0))  # (H, [B,] T, D)
            labels.extend(f"L{l}H{h}" for h in range(result.shape[-2]))
        template = Slice(pos_slice).apply(self["resid_post", max(layer - 1, 0)] if layer else self["resid_pre", 0], -2)
        stack = torch.cat(parts) if parts else template.new_zeros((0, *template.shape))  # (heads, [B,] T, D)
        if incl_remainder:
            rest = template - stack.sum(0) if layer else template
            stack = torch.cat([stack, rest[None]])
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice, has_batch_dim=self.has_batch_dim)
        return (stack, labels) if return_labels else stack

    def stack_activation(self, activation_name: str, layer: int = -1, sublayer_type: str | None = None) -> torch.Tensor:
        """``activation_name`` of every layer before ``layer``, stacked on a new first axis."""
        layer = self._layer(layer)
        return torch.stack([self[(activation_name, l, sublayer_type)] for l in range(layer)])

    def apply_ln_to_stack(self, residual_stack: torch.Tensor, layer: int | None = None, mlp_input: bool = False,
                          pos_slice=None, batch_slice=None, has_batch_dim: bool = True,
                          recompute_ln: bool = False) -> torch.Tensor:
        """Each term of ``residual_stack`` ((terms, [B,] T, D), already position-sliced) as the
        norm reading the stream at ``layer`` (``ln1``, ``ln2`` with ``mlp_input``, ``ln_final``
        at ``n_layers``) sees it: centred and divided by the cached stream's scale, or, with
        ``recompute_ln`` at the final norm, through the final norm module itself."""
        layer = self._layer(layer)
        if has_batch_dim:
            residual_stack = Slice(batch_slice).apply(residual_stack, 1)
        norm = self._norm(layer, mlp_input)
        if isinstance(norm, nn.Identity):
            return residual_stack
        if not isinstance(norm, nn.LayerNorm):
            raise InputError(f"apply_ln_to_stack knows LayerNorm; layer {layer}'s norm is {type(norm).__name__}")
        if recompute_ln and layer == self.n_layers:
            return norm(residual_stack)
        n = self.n_layers
        stream = (self["resid_post", n - 1] if layer == n else self["resid_mid" if mlp_input else "resid_pre", layer])
        scale = (stream.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()  # ([B,] T, 1)
        scale = Slice(pos_slice).apply(scale, -2)
        if batch_slice is not None and self.has_batch_dim:
            scale = Slice(batch_slice).apply(scale, 0)
        return (residual_stack - residual_stack.mean(-1, keepdim=True)) / scale

    def logit_lens(self, incl_mid: bool = False, pos_slice=None, return_labels: bool = False):
        """Logits ((entries, [B,] T, n_out)) of every accumulated stream entry read through the
        final norm (recomputed per entry) and ``W_U``; the last entry equals the model's logits."""
        model = self._model("logit_lens")
        stack, labels = self.accumulated_resid(None, incl_mid=incl_mid, pos_slice=pos_slice, return_labels=True)
        logits = logit_lens(model, stack)
        return (logits, labels) if return_labels else logits


def head_results(attn: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """Each head's write to the stream, ([B,] T, H, D), from ``z`` ([B,] T, H, Dh): ``z_h W_O^h``
    with ``W_O^h`` the rows ``h·Dh … (h+1)·Dh`` of the output projection, or of the identity
    when the attention has none (the heads' outputs are concatenated into the stream)."""
    H, Dh = z.shape[-2], z.shape[-1]
    if attn.W_O is not None:
        W = attn.W_O.weight.T.reshape(H, Dh, -1)  # (H, Dh, D)
    else:
        W = torch.eye(H * Dh, dtype=z.dtype, device=z.device).reshape(H, Dh, H * Dh)  # (H, Dh, D)
    return torch.einsum("...hd,hdm->...hm", z, W.to(z.dtype))  # ([B,] T, H, D)
