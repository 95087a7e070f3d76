"""A bigram language model with a given logit table, and a small tokenizer, for the evaluator tests."""
from __future__ import annotations

import functools

import torch
from torch import nn

from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.corpus import builtin_text


class Bigram(nn.Module):
    """logits[b, t] = table[tokens[b, t]]: the next token depends on the current one only."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = nn.Parameter(table.clone())  # (V, V)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.table[tokens]  # (B, T, V)


@functools.lru_cache(maxsize=1)
def tokenizer():
    return bpe.train_bpe([builtin_text(300, seed=4)], 300)


def logprob(table: torch.Tensor, ids: list[int]) -> float:
    """The plain loop: sum_t log softmax(table[ids[t-1]])[ids[t]]."""
    logp = torch.log_softmax(table, dim=-1)
    return float(sum(logp[a, b] for a, b in zip(ids[:-1], ids[1:])))
