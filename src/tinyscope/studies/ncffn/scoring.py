"""Scoring token sequences of different lengths with a causal language model, in padded batches.

Sequences are sorted by length and right-padded, so a batch wastes little and padding, which
comes after every real token, changes no real position's logits under causal attention.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import torch

from tinyscope.errors import InputError


def check_lengths(seqs: Sequence[Sequence[int]], n_ctx: int, what: str, where: Sequence[str]) -> None:
    """Each sequence is scored as input ``seq[:-1]``: it needs 2..n_ctx+1 tokens."""
    for seq, place in zip(seqs, where):
        if len(seq) < 2:
            raise InputError(f"{place}: {what} has no token to score")
        if len(seq) - 1 > n_ctx:
            raise InputError(f"{place}: {what} is {len(seq)} tokens, longer than the model's context "
                             f"({n_ctx} + 1); shorten it or drop it from the file")


@torch.no_grad()
def batched_logits(model: torch.nn.Module, seqs: Sequence[Sequence[int]],
                   batch_size: int = 64) -> Iterator[tuple[int, torch.Tensor]]:
    """``(i, logits)`` for every sequence ``i``: float32 log-softmax of the model on ``seq[:-1]``,
    shape (len(seq) - 1, V), position t predicting ``seq[t + 1]``."""
    device = next(model.parameters()).device
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        width = max(len(seqs[i]) for i in idx) - 1
        tokens = torch.zeros((len(idx), width), dtype=torch.long)  # (b, T), right-padded with id 0
        for row, i in enumerate(idx):
            tokens[row, :len(seqs[i]) - 1] = torch.as_tensor(seqs[i][:-1], dtype=torch.long)
        logp = torch.log_softmax(model(tokens.to(device)).float(), dim=-1).cpu()  # (b, T, V)
        for row, i in enumerate(idx):
            yield i, logp[row, :len(seqs[i]) - 1]


def total_logprobs(model: torch.nn.Module, seqs: Sequence[Sequence[int]], batch_size: int = 64) -> list[float]:
    """``sum_t log p(seq[t] | seq[:t])`` over t >= 1 for every sequence (its first token is the context)."""
    out = [0.0] * len(seqs)
    for i, logp in batched_logits(model, seqs, batch_size):
        target = torch.as_tensor(seqs[i][1:], dtype=torch.long)  # (T,)
        out[i] = float(logp.gather(1, target[:, None]).sum())
    return out
