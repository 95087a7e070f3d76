"""One decoder-only transformer for every paper: from the 250-parameter minimal model to the
spatial-induction 2-layer models.

Residual stream (per layer l, pre-LN when ``norm="pre"``, plain when ``norm="none"``)::

    x_0      = W_E[t] + W_pos[i]                                   hook_embed + hook_pos_embed
    x_mid    = x + Attn(LN(x))                                     blocks.l.hook_resid_mid
    x_post   = x_mid + FFN(LN(x_mid))                              blocks.l.hook_resid_post
    logits   = W_U LN_f(x_L) + b_U

and ``blocks.l.hook_resid_post == blocks.l+1.hook_resid_pre``. A block may declare one more
sublayer after its FFN, a causal sequence quantifier ``Q`` (the NC-FFN paper's self-forgetting
quantifiers, attached by that study), which then sits inside the block, before its
``hook_resid_post``::

    x_post   = x_ffn + Q(LN(x_ffn))                                blocks.l.hook_quant_out, blocks.l.quant.hook_*

Attention is scaled dot product, ``softmax(q k^T / sqrt(d_head))`` with a causal mask. Without
an output projection (``attn_out_proj=False``, the minimal model of Mahajne & Moldwin, Sec. 2.2)
the heads' outputs are concatenated straight into the residual, so ``n_heads * d_head == d_model``.

Attention has two paths that must agree: the reference path computes scores and pattern
explicitly (and exposes ``hook_attn_scores``, the masked scores before the softmax, and
``hook_pattern``); the fast path calls ``scaled_dot_product_attention`` and is taken only when
nothing watches the scores or pattern (no tinyscope, PyTorch or nnsight hook on them,
:attr:`~tinyscope.models.hooks.HookPoint.has_hooks`).

Padded batches (``attention_mask`` (B, T), 1 = real token, padding on either side): a query
attends only to real keys (and, causally, earlier ones); a query with no real key to attend to
(left padding) gets a zero pattern, so its ``z`` is 0; real tokens are numbered from 0 in their
row (position ``cumsum(mask) - 1``), so a left-padded row computes what the unpadded row does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.errors import InputError, check, check_choice
from tinyscope.models.ffn import ACTIVATIONS, FFN_KINDS, build_ffn
from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.models.inputs import check_mask, check_tokens
from tinyscope.models.loss import lm_cross_entropy_loss


@dataclass
class TransformerConfig:
    """Shape and switches of :class:`Transformer`; per-layer lists have one entry per layer."""

    vocab_size: int = 12
    n_ctx: int = 8
    d_model: int = 2
    d_head: int | None = None  # None: d_model // heads of the layer
    n_heads: list[int] = field(default_factory=lambda: [1])
    d_mlp: list[int] = field(default_factory=lambda: [32])  # 0 = no FFN in that layer
    act: str = "relu"
    ffn: str | list[str] = "mlp"  # one kind for every layer, or a list (or "a,b") with one per layer
    norm: Literal["pre", "none"] = "none"
    final_norm: bool = False
    attn_out_proj: bool = False
    qkv_bias: bool = False
    attn_out_bias: bool = False
    mlp_bias: bool = True
    unembed_bias: bool = True
    d_vocab_out: int | None = None  # output classes; None = vocab_size
    positions: Literal["learned", "none"] = "learned"
    init: Literal["torch", "gpt2"] = "torch"
    init_std: float = 0.02
    causal: bool = True  # False: every position attends to all (encoder-style, e.g. mean-pooled classifiers)

    def __post_init__(self):
        if isinstance(self.n_heads, int):
            self.n_heads = [self.n_heads]
        if isinstance(self.d_mlp, int):
            self.d_mlp = [self.d_mlp] * len(self.n_heads)
        check(self.vocab_size >= 1, f"model.vocab_size={self.vocab_size} must be >= 1")
        check(self.n_ctx >= 1, f"model.n_ctx={self.n_ctx} must be >= 1")
        check(self.d_model >= 1, f"model.d_model={self.d_model} must be >= 1")
        check(self.d_head is None or self.d_head >= 1, f"model.d_head={self.d_head} must be >= 1 (or none)")
        check(len(self.n_heads) >= 1, "model.n_heads must list at least one layer")
        check(all(h >= 1 for h in self.n_heads), f"model.n_heads={self.n_heads}: every layer needs >= 1 head")
        if self.d_head is None:
            for h in self.n_heads:
                check(self.d_model % h == 0, f"model.d_model={self.d_model} is not divisible by {h} heads; set model.d_head")
        check(len(self.d_mlp) == len(self.n_heads),
              f"model.d_mlp={self.d_mlp} must have one entry per layer ({len(self.n_heads)} layers from model.n_heads)")
        check(all(w >= 0 for w in self.d_mlp), f"model.d_mlp={self.d_mlp}: widths must be >= 0")
        check_choice("model.act", self.act, ACTIVATIONS)
        if isinstance(self.ffn, str) and "," in self.ffn:
            self.ffn = [k.strip() for k in self.ffn.split(",")]
        if isinstance(self.ffn, (list, tuple)):
            self.ffn = list(self.ffn)
            check(len(self.ffn) == len(self.n_heads),
                  f"model.ffn={self.ffn} must have one kind per layer ({len(self.n_heads)} layers)")
        for kind in ([self.ffn] if isinstance(self.ffn, str) else self.ffn):
            check_choice("model.ffn", kind, FFN_KINDS)
        check_choice("model.norm", self.norm, ("pre", "none"))
        check_choice("model.positions", self.positions, ("learned", "none"))
        check_choice("model.init", self.init, ("torch", "gpt2"))
        if not self.attn_out_proj:
            for layer, h in enumerate(self.n_heads):
                check(h * self.head_dim(layer) == self.d_model,
                      f"without model.attn_out_proj, heads x d_head must equal d_model "
                      f"({h} x {self.head_dim(layer)} != {self.d_model}); set model.attn_out_proj=true or change the widths")
        if self.d_vocab_out is not None:
            check(self.d_vocab_out >= 1, f"model.d_vocab_out={self.d_vocab_out} must be >= 1")

    def head_dim(self, layer: int = 0) -> int:
        """Width of each head of ``layer``: ``d_head``, or ``d_model // n_heads[layer]`` when unset."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads[layer]

    @property
    def n_layers(self) -> int:
        return len(self.n_heads)

    def ffn_kind(self, layer: int) -> str:
        return self.ffn if isinstance(self.ffn, str) else self.ffn[layer]

    @property
    def n_out(self) -> int:
        return self.d_vocab_out or self.vocab_size


class Attention(nn.Module):
    """Multi-head causal self-attention with TransformerLens hook names."""

    def __init__(self, cfg: TransformerConfig, layer: int):
        super().__init__()
        self.n_heads, self.d_head = cfg.n_heads[layer], cfg.head_dim(layer)
        n_heads = self.n_heads
        inner = n_heads * self.d_head
        self.W_Q = nn.Linear(cfg.d_model, inner, bias=cfg.qkv_bias)
        self.W_K = nn.Linear(cfg.d_model, inner, bias=cfg.qkv_bias)
        self.W_V = nn.Linear(cfg.d_model, inner, bias=cfg.qkv_bias)
        self.W_O = nn.Linear(inner, cfg.d_model, bias=cfg.attn_out_bias) if cfg.attn_out_proj else None
        self.register_buffer("causal", torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool).tril(), persistent=False)
        self.use_fast = True
        self.is_causal = cfg.causal
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_pattern, self.hook_z = HookPoint(), HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (B, T, D) -> (B, T, D); ``attention_mask`` (B, T) bool, True = real key."""
        B, T, _ = x.shape
        H, Dh = self.n_heads, self.d_head
        q = self.hook_q(self.W_Q(x).view(B, T, H, Dh))  # (B, T, H, Dh)
        k = self.hook_k(self.W_K(x).view(B, T, H, Dh))  # (B, T, H, Dh)
        v = self.hook_v(self.W_V(x).view(B, T, H, Dh))  # (B, T, H, Dh)
        allowed = None if attention_mask is None else self.allowed(attention_mask)  # (B, 1, T, T)
        if self.use_fast and not (self.hook_attn_scores.has_hooks or self.hook_pattern.has_hooks):
            qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, Dh)
            if allowed is None:
                z = F.scaled_dot_product_attention(qh, kh, vh, is_causal=self.is_causal)  # (B, H, T, Dh)
            else:
                live = allowed.any(-1, keepdim=True)  # (B, 1, T, 1): queries with a key to attend to
                z = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allowed | ~live)  # (B, H, T, Dh)
                z = z * live  # a query with no real key gets z = 0, as the reference path's zero pattern
            z = z.transpose(1, 2)  # (B, T, H, Dh)
        else:
            z = self.reference(q, k, v, allowed)
        z = self.hook_z(z)  # (B, T, H, Dh)
        out = z.reshape(B, T, H * Dh)  # (B, T, H*Dh)
        return self.W_O(out) if self.W_O is not None else out

    def allowed(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """Which key each query may attend to, (B, 1, T, T): a real key, and no later one when causal."""
        T = attention_mask.shape[1]
        allowed = attention_mask[:, None, None, :].expand(-1, 1, T, -1)  # (B, 1, T, T)
        return allowed & self.causal[:T, :T] if self.is_causal else allowed

    def reference(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  allowed: torch.Tensor | None = None) -> torch.Tensor:
        """Plain attention: explicit scores, mask and softmax (the path hooks see)."""
        T = q.shape[1]
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_head)  # (B, H, T, T)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        elif self.is_causal:
            scores = scores.masked_fill(~self.causal[:T, :T], float("-inf"))
        scores = self.hook_attn_scores(scores)  # (B, H, T, T)
        if allowed is None:
            pattern = torch.softmax(scores, dim=-1)  # (B, H, T, T)
        else:  # a row with no key to attend to: pattern 0, and finite gradients (a softmax of -inf is NaN)
            dead = ~allowed.any(-1, keepdim=True)  # (B, 1, T, 1)
            pattern = torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)  # (B, H, T, T)
        pattern = self.hook_pattern(pattern)  # (B, H, T, T)
        return torch.einsum("bhqk,bkhd->bqhd", pattern, v)  # (B, T, H, Dh)


class Block(nn.Module):
    """One residual layer: attention, an FFN (when ``d_mlp > 0``) and an optional quantifier.

    ``x -> x_mid = x + Attn(LN_1 x) -> x_ffn = x_mid + FFN(LN_2 x_mid) -> x_post = x_ffn + Q(LN_q x_ffn)``;
    the last step exists only when a quantifier ``Q`` (any causal ``(B, T, D) -> (B, T, D)``
    module) is declared, by ``quant=`` or :meth:`add_quant`; without one the block does no extra
    work and has no ``hook_quant_out``. ``LN_q`` is a LayerNorm under ``norm="pre"``, else the
    identity.
    """

    def __init__(self, cfg: TransformerConfig, layer: int, quant: nn.Module | None = None):
        super().__init__()
        pre = cfg.norm == "pre"
        d_mlp = cfg.d_mlp[layer]
        self.ln1 = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.attn = Attention(cfg, layer)
        self.ln2 = nn.LayerNorm(cfg.d_model) if pre and d_mlp else nn.Identity()
        self.mlp = build_ffn(cfg.ffn_kind(layer), cfg.d_model, d_mlp, cfg.act, cfg.mlp_bias) if d_mlp else None
        self.hook_resid_pre, self.hook_resid_mid, self.hook_resid_post = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_out, self.hook_mlp_out = HookPoint(), HookPoint()
        self.pre_norm, self.d_model = pre, cfg.d_model
        self.quant: nn.Module | None = None  # the declared slot; a plain attribute while empty
        if quant is not None:
            self.add_quant(quant)

    def add_quant(self, quant: nn.Module) -> None:
        """Declare ``quant`` as this block's quantifier sublayer, applied after the FFN.

        Registers ``ln_quant`` then ``quant`` (parameter names ``blocks.l.ln_quant.*``,
        ``blocks.l.quant.*``) and the hook point ``hook_quant_out``. A model that adds one after
        construction calls its ``setup_hooks()`` again to name the new hook points.
        """
        if self.quant is not None:
            raise ValueError("this block already has a quantifier sublayer")
        self.ln_quant = nn.LayerNorm(self.d_model) if self.pre_norm else nn.Identity()
        self.quant = quant
        self.hook_quant_out = HookPoint()

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.hook_resid_pre(x)  # (B, T, D)
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(self.ln1(x), attention_mask)))  # (B, T, D)
        if self.mlp is not None:
            x = x + self.hook_mlp_out(self.mlp(self.ln2(x)))  # (B, T, D)
        if self.quant is not None:
            x = x + self.hook_quant_out(self.quant(self.ln_quant(x)))  # (B, T, D)
        return self.hook_resid_post(x)  # (B, T, D)


class Transformer(HookedModule):
    """Decoder-only transformer; ``forward(tokens) -> logits`` of shape (B, T, n_out)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.W_E = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.W_pos = nn.Embedding(cfg.n_ctx, cfg.d_model) if cfg.positions == "learned" else None
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(cfg.d_model) if cfg.final_norm else nn.Identity()
        self.W_U = nn.Linear(cfg.d_model, cfg.n_out, bias=cfg.unembed_bias)
        self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()
        if cfg.init == "gpt2":
            self._init_gpt2()
        self.setup_hooks()

    def _init_gpt2(self) -> None:
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if p.dim() == 1:
                if "ln" in name and name.endswith("weight"):
                    nn.init.ones_(p)
                else:
                    nn.init.zeros_(p)
            elif name.endswith("W_O.weight") or name.endswith("W_out.weight"):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * self.cfg.n_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def check_tokens(self, tokens: torch.Tensor, name: str = "tokens") -> torch.Tensor:
        """Raise :class:`~tinyscope.errors.InputError` unless ``tokens`` is an integer (B, T) tensor
        with 1 <= T <= n_ctx and ids in [0, vocab_size - 1] on the model's device; returns it."""
        cfg = self.cfg
        return check_tokens(tokens, vocab_size=cfg.vocab_size, name=name, max_len=cfg.n_ctx,
                            range_note=f"model.vocab_size={cfg.vocab_size}", context_note=f"model.n_ctx={cfg.n_ctx}",
                            device=self.W_E.weight.device)

    def embed(self, tokens: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``W_E[t] + W_pos[i]`` (B, T, D); with ``attention_mask`` the position ``i`` of a token is
        the number of real tokens before it in its row."""
        x = self.hook_embed(self.W_E(tokens))  # (B, T, D)
        if self.W_pos is not None:
            if attention_mask is None:
                T = tokens.shape[1]
                pos = self.W_pos.weight[:T].unsqueeze(0).expand_as(x)  # (B, T, D)
            else:
                pos = self.W_pos.weight[(attention_mask.long().cumsum(-1) - 1).clamp_min(0)]  # (B, T, D)
            x = x + self.hook_pos_embed(pos)
        return x

    def forward(self, tokens: torch.Tensor, return_type: str | None = "logits", loss_per_token: bool = False, *,
                attention_mask: torch.Tensor | None = None, stop_at_layer: int | None = None,
                check: bool = True):
        """The model on ``tokens`` (B, T), or (T,) for one sequence, as TransformerLens's forward.

        ``return_type``: ``"logits"`` (B, T, n_out), ``"loss"`` (the mean next-token
        cross-entropy, :func:`~tinyscope.models.loss.lm_cross_entropy_loss`; per position,
        (B, T - 1), with ``loss_per_token``), ``"both"`` (logits, loss) or ``None`` (nothing).
        ``attention_mask`` (B, T): 1 for real tokens, 0 for padding on either side; the loss
        counts only pairs of real tokens. ``stop_at_layer``: run the blocks before it (negative
        counts from the end) and return the residual stream (B, T, D) that enters it.
        The input is checked once, here, before any layer runs (:meth:`check_tokens`);
        ``check=False`` skips it for callers that already did.
        """
        if isinstance(tokens, torch.Tensor) and tokens.dim() == 1:
            tokens = tokens[None]  # (T,) -> (1, T)
            if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 1:
                attention_mask = attention_mask[None]
        if check:
            self.check_tokens(tokens)
        if return_type not in ("logits", "loss", "both", None):
            raise InputError(f"return_type={return_type!r}; the model returns 'logits', 'loss', 'both' or None")
        n_layers = self.cfg.n_layers
        if stop_at_layer is not None:
            if not (isinstance(stop_at_layer, int) and -n_layers <= stop_at_layer <= n_layers):
                raise InputError(f"stop_at_layer={stop_at_layer!r}; this model has {n_layers} layers: "
                                 f"{-n_layers} to {n_layers}")
            n_layers = stop_at_layer if stop_at_layer >= 0 else n_layers + stop_at_layer
        mask = self._attention_mask(attention_mask, tokens)
        x = self.embed(tokens, mask)  # (B, T, D)
        for layer, block in enumerate(self.blocks):
            if layer == n_layers:
                break
            x = block(x, mask)  # (B, T, D)
        if stop_at_layer is not None:
            return x  # (B, T, D)
        if return_type is None:
            return None
        logits = self.W_U(self.ln_final(x))  # (B, T, n_out)
        if return_type == "logits":
            return logits
        if self.cfg.n_out != self.cfg.vocab_size:
            raise InputError(f"return_type={return_type!r} is the next-token loss of a language model; this model "
                             f"predicts {self.cfg.n_out} classes (model.d_vocab_out), not its {self.cfg.vocab_size} "
                             f"tokens: ask for return_type='logits'")
        loss = lm_cross_entropy_loss(logits, tokens, mask, loss_per_token)
        return loss if return_type == "loss" else (logits, loss)

    def _attention_mask(self, attention_mask, tokens: torch.Tensor) -> torch.Tensor | None:
        """The checked mask as bool (B, T), or None when there is none or it marks every token real."""
        if attention_mask is None:
            return None
        mask = check_mask(attention_mask, like=tokens, name="attention_mask")
        if bool(mask.all()):
            return None
        if any(block.quant is not None for block in self.blocks) and bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            raise InputError("attention_mask pads before a real token, but a sequence quantifier reads every earlier "
                             "position: pad on the right (after the real tokens) for this model")
        return mask

    def generate(self, input: torch.Tensor, max_new_tokens: int = 10, **kwargs) -> torch.Tensor:
        """Continue ``input`` (B, P) by ``max_new_tokens``; see :func:`tinyscope.models.generate.generate`."""
        from tinyscope.models.generate import generate

        return generate(self, input, max_new_tokens, **kwargs)

    def use_fast_attention(self, on: bool = True) -> None:
        for block in self.blocks:
            block.attn.use_fast = on
