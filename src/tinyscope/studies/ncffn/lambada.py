"""LAMBADA-style last-word accuracy (Paperno et al. 2016) on any text file, one passage per line.

A passage's target is its last whitespace-separated word, its context everything before it. The
model sees ``<|endoftext|>``, the context's BPE tokens and then predicts the word's pieces (the
tokens of ``" " + word``) greedily: the passage counts as correct when the argmax at every piece's
position is that piece, given the pieces before it (what greedy decoding of that many tokens
would write). A context longer than the model's window keeps its last tokens.

Metrics: ``lambada_acc`` (share of passages correct), ``lambada_logprob`` (mean total
log-probability of the word's pieces), ``lambada_passages``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tinyscope.errors import ConfigError
from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.scoring import batched_logits


@dataclass(frozen=True)
class Passage:
    context: str
    word: str
    where: str  # "file:line"


def read_passages(path: str | Path) -> list[Passage]:
    """The passages of a text file, one per non-blank line; a line of one word is an error."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"LAMBADA file {str(path)!r} does not exist (or is not a file); give a text file, "
                          f"one passage per line")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"LAMBADA file {str(path)!r} is not UTF-8 (byte {exc.start})") from None
    out = []
    for n, line in enumerate(lines, 1):
        words = line.strip().rsplit(None, 1)
        if not words:
            continue
        if len(words) < 2:
            raise ConfigError(f"{p}:{n}: a passage needs a context and a last word, got {line.strip()!r}")
        out.append(Passage(words[0], words[1], f"{p}:{n}"))
    if not out:
        raise ConfigError(f"LAMBADA file {str(path)!r} holds no passages")
    return out


def passage_tokens(tok, passages: list[Passage], n_ctx: int) -> list[tuple[list[int], int]]:
    """Per passage ``(ids, n_pieces)``: ``<|endoftext|>``, the context, then the word's pieces,
    cut from the left to ``n_ctx + 1`` tokens; a word of more than ``n_ctx`` pieces is an error."""
    eot = bpe.eot_id(tok)
    contexts = bpe.encode_many(tok, [p.context for p in passages])
    words = bpe.encode_many(tok, [" " + p.word for p in passages])
    out = []
    for p, ctx, word in zip(passages, contexts, words):
        if len(word) > n_ctx:
            raise ConfigError(f"{p.where}: the last word {p.word!r} is {len(word)} tokens, more than the "
                              f"model's context ({n_ctx})")
        ids = [eot] + ctx + word
        out.append((ids[-(n_ctx + 1):], len(word)))
    return out


def lambada_metrics(model: torch.nn.Module, items: list[tuple[list[int], int]], batch_size: int = 64) -> dict:
    """``lambada_acc``, ``lambada_logprob`` and ``lambada_passages`` over ``items`` (:func:`passage_tokens`)."""
    correct, logprob = 0, 0.0
    for i, logp in batched_logits(model, [ids for ids, _ in items], batch_size):
        ids, k = items[i]
        target = torch.as_tensor(ids[-k:], dtype=torch.long)  # (k,)
        at = logp[-k:]  # (k, V): the positions that predict the word's pieces
        correct += int(bool((at.argmax(-1) == target).all()))
        logprob += float(at.gather(1, target[:, None]).sum())
    return {"lambada_acc": correct / len(items), "lambada_logprob": logprob / len(items),
            "lambada_passages": float(len(items))}


class LambadaEvaluator:
    """The passages read and tokenized once; ``evaluator(model)`` returns :func:`lambada_metrics`."""

    def __init__(self, path: str | Path, tok, n_ctx: int):
        self.passages = read_passages(path)
        self.items = passage_tokens(tok, self.passages, n_ctx)

    def __call__(self, model: torch.nn.Module) -> dict:
        return lambada_metrics(model, self.items)
