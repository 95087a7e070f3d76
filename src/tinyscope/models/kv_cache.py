"""Incremental (KV-cached) decoding for :class:`~tinyscope.models.transformer.Transformer`.

The decoder reads the model's own modules (embeddings, LayerNorms, W_Q/W_K/W_V/W_O, FFNs,
unembedding) and keeps, per layer, the keys and values of every position seen so far in buffers
allocated once for the whole context at ``prefill`` (appending is a copy into the buffer, not a
concatenation, so decoding L tokens costs O(L) copies rather than O(L²)), so one new token costs
one row of attention instead of a full forward pass. ``prefill`` + ``step`` reproduce
``model(tokens)`` exactly (tests compare them); hooks are not run.

Both entry points check their input first (:mod:`tinyscope.models.inputs`): ``prefill`` takes
what ``model.forward`` takes, (B, P) ids with 1 <= P <= n_ctx; ``step`` takes one id per cached
row, (B,) or (B, 1), and refuses to decode past the context. A bad input raises
:class:`~tinyscope.errors.InputError` and leaves the cache as it was.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from tinyscope.errors import InputError, check
from tinyscope.models.inputs import check_tokens


class KVCacheDecoder:
    """Prefill a batch of prompts, then append one token at a time.

    >>> dec = KVCacheDecoder(model)
    >>> logits = dec.prefill(prompt)        # (B, P, n_out), equals model(prompt)
    >>> nxt = dec.step(tokens)              # (B, n_out): logits after appending tokens (B,)
    """

    def __init__(self, model: nn.Module):
        quantified = [i for i, b in enumerate(model.blocks) if b.quant is not None]
        check(not quantified, f"KV-cached decoding does not carry a sequence quantifier's running state; "
                              f"blocks {quantified} have one: decode with the full forward pass instead")
        self.model = model
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.length = 0

    def _positions(self, T: int) -> torch.Tensor | None:
        if self.model.W_pos is None:
            return None
        check(self.length + T <= self.model.cfg.n_ctx,
              f"decoding past the model context of {self.model.cfg.n_ctx} positions")
        return self.model.W_pos.weight[self.length:self.length + T]  # (T, D)

    def _forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Run ``tokens`` (B, T) that follow the cached ones; returns logits (B, T, n_out)."""
        m = self.model
        B, T = tokens.shape
        x = m.W_E(tokens)  # (B, T, D)
        pos = self._positions(T)
        if pos is not None:
            x = x + pos
        first = not self.keys
        for layer, block in enumerate(m.blocks):
            attn = block.attn
            H, Dh = attn.n_heads, attn.d_head
            h = block.ln1(x)  # (B, T, D)
            q = attn.W_Q(h).view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
            k = attn.W_K(h).view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
            v = attn.W_V(h).view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
            if first:
                cap = max(T, m.cfg.n_ctx)
                self.keys.append(k.new_empty(B, H, cap, Dh))  # (B, H, n_ctx, Dh)
                self.values.append(v.new_empty(B, H, cap, Dh))  # (B, H, n_ctx, Dh)
            S = self.length + T
            check(S <= self.keys[layer].shape[2], f"decoding past the model context of {m.cfg.n_ctx} positions")
            self.keys[layer][:, :, self.length:S] = k
            self.values[layer][:, :, self.length:S] = v
            K, Vv = self.keys[layer][:, :, :S], self.values[layer][:, :, :S]  # (B, H, S, Dh)
            scores = q @ K.transpose(-1, -2) / math.sqrt(Dh)  # (B, H, T, S)
            # causal: query i (absolute S - T + i) sees keys j <= S - T + i
            allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)  # (T, S)
            scores = scores.masked_fill(~allowed, float("-inf"))
            z = (torch.softmax(scores, dim=-1) @ Vv).transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, H*Dh)
            x = x + (attn.W_O(z) if attn.W_O is not None else z)  # (B, T, D)
            if block.mlp is not None:
                x = x + block.mlp(block.ln2(x))  # (B, T, D)
        self.length += T
        return m.W_U(m.ln_final(x))  # (B, T, n_out)

    @torch.no_grad()
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Reset the cache and run the prompt (B, P); logits (B, P, n_out)."""
        self.model.check_tokens(tokens)
        self.keys, self.values, self.length = [], [], 0
        return self._forward(tokens)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Append one token per row (B,) and return the logits (B, n_out) at that position."""
        if self.length == 0:
            raise InputError("step was called before prefill: call prefill(prompt) first")
        cfg, B = self.model.cfg, self.keys[0].shape[0]
        if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.shape[1:] == (1,):
            tokens = tokens[:, 0]  # (B, 1) -> (B,)
        check_tokens(tokens, vocab_size=cfg.vocab_size, ndim=1, range_note=f"model.vocab_size={cfg.vocab_size}",
                     device=self.model.W_E.weight.device)
        if tokens.shape[0] != B:
            raise InputError(f"tokens has {tokens.shape[0]} rows but the cache holds {B} (from prefill); "
                             f"step takes one token per prefilled row")
        if self.length >= cfg.n_ctx:
            raise InputError(f"step would decode position {self.length}, past the model context of "
                             f"model.n_ctx={cfg.n_ctx} positions (0 to {cfg.n_ctx - 1})")
        return self._forward(tokens.view(-1, 1))[:, 0]
