"""Autoregressive generation from a :class:`~tinyscope.models.transformer.Transformer`, as
TransformerLens's ``generate`` (token tensors in, token tensors out).

Each step appends to every row the token ``argmax(logits)`` (greedy: ``do_sample=False`` or
``temperature=0``) or a draw from ``softmax(logits / temperature)`` restricted to the ``top_k``
largest logits when given, where ``logits`` are those of the row's last position. Draws come
from an explicit ``torch.Generator`` (``generator=`` or ``seed=``), never torch's global state, so
a seed fixes the output. With ``use_past_kv_cache`` the logits come from the
:class:`~tinyscope.models.kv_cache.KVCacheDecoder` (one row of attention per new token); without
it, from a full forward pass over the sequence so far. Both give the same tokens (tested). Hooks
run only on full forward passes, so a model with a hook attached is decoded without the cache.
"""
from __future__ import annotations

import torch
from torch import nn

from tinyscope.errors import InputError
from tinyscope.models.kv_cache import KVCacheDecoder


def _generator(seed: int | None, generator: torch.Generator | None, device: torch.device) -> torch.Generator:
    if generator is not None:
        return generator
    if seed is None:
        raise InputError("sampling needs its randomness given: pass seed=... or generator=torch.Generator(); or "
                         "do_sample=False (or temperature=0) for greedy decoding")
    return torch.Generator(device=device).manual_seed(int(seed))


def next_tokens(logits: torch.Tensor, greedy: bool, temperature: float, top_k: int | None,
                generator: torch.Generator | None) -> torch.Tensor:
    """One token per row (B,) from the last-position logits (B, V)."""
    if greedy:
        return logits.argmax(-1)  # (B,)
    logits = logits.float() / temperature  # (B, V)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]  # (B,)


@torch.no_grad()
def generate(model: nn.Module, input: torch.Tensor, max_new_tokens: int = 10, *, do_sample: bool = True,
             temperature: float = 1.0, top_k: int | None = None, seed: int | None = None,
             generator: torch.Generator | None = None, use_past_kv_cache: bool = True, stop_at_eos: bool = True,
             eos_token_id: int | None = None) -> torch.Tensor:
    """``input`` (B, P) (or (P,)) followed by up to ``max_new_tokens`` generated tokens: (B, P + N).

    ``eos_token_id`` with ``stop_at_eos``: a row that produced it keeps producing it, and the loop
    ends once every row has. The sequence may not outgrow the model's context (``model.n_ctx``).
    """
    tokens = input[None] if isinstance(input, torch.Tensor) and input.dim() == 1 else input
    model.check_tokens(tokens, name="input")
    if not (isinstance(max_new_tokens, int) and max_new_tokens >= 0):
        raise InputError(f"max_new_tokens={max_new_tokens!r} must be an integer >= 0")
    if not (isinstance(temperature, (int, float)) and temperature >= 0):
        raise InputError(f"temperature={temperature!r} must be >= 0 (0 = greedy)")
    if top_k is not None and not (isinstance(top_k, int) and top_k >= 1):
        raise InputError(f"top_k={top_k!r} must be an integer >= 1 (or None for every token)")
    cfg = model.cfg
    if tokens.shape[1] + max_new_tokens > cfg.n_ctx:
        raise InputError(f"input has {tokens.shape[1]} positions and max_new_tokens={max_new_tokens}: "
                         f"{tokens.shape[1] + max_new_tokens} exceeds the context of model.n_ctx={cfg.n_ctx}")
    if not cfg.causal:
        raise InputError("generate decodes left to right, but this model attends to every position (model.causal=false)")
    if cfg.n_out != cfg.vocab_size:
        raise InputError(f"generate feeds predictions back as tokens, but this model predicts {cfg.n_out} classes "
                         f"(model.d_vocab_out) over {cfg.vocab_size} tokens")
    greedy = not do_sample or temperature == 0
    gen = None if greedy else _generator(seed, generator, tokens.device)
    watched = any(hp.has_hooks for hp in model.hook_dict.values())
    decoder = KVCacheDecoder(model) if use_past_kv_cache and not watched and max_new_tokens else None
    done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)  # (B,)
    out = [tokens]
    for step in range(max_new_tokens):
        if decoder is None:
            logits = model(torch.cat(out, 1), check=False)[:, -1]  # (B, V)
        else:
            logits = decoder.prefill(tokens)[:, -1] if step == 0 else decoder.step(out[-1][:, 0])  # (B, V)
        nxt = next_tokens(logits, greedy, temperature, top_k, gen)  # (B,)
        if eos_token_id is not None and stop_at_eos:
            nxt = nxt.masked_fill(done, eos_token_id)
            done = done | (nxt == eos_token_id)
        out.append(nxt[:, None])
        if eos_token_id is not None and stop_at_eos and bool(done.all()):
            break
    return torch.cat(out, 1)  # (B, P + N)
