"""Minimal-pair accuracy on BLiMP's JSONL format (Warstadt et al. 2020), for any phenomena files given.

A BLiMP file is one paradigm: one JSON object per line with ``sentence_good`` and
``sentence_bad`` (required) and, as BLiMP writes them, ``UID`` (the paradigm, e.g.
``npi_present_1``) and ``linguistics_term`` (its phenomenon, e.g. ``npi_licensing``,
``quantifiers``); a file without them is its own paradigm and phenomenon (the file's stem).

A pair counts as correct when the model gives the good sentence the higher total log-probability,
``sum_t log p(w_t | <|endoftext|> w_<t)`` over the sentence's BPE tokens (a tie is wrong). Metrics,
each the share of correct pairs:

* ``blimp_acc`` over every pair; ``blimp_acc@<UID>`` per paradigm;
* ``blimp_phenomenon_acc@<linguistics_term>`` per phenomenon;
* ``blimp_licensing_acc`` over the pairs whose phenomenon (or paradigm) is one of ``licensing``
  (default ``npi_licensing`` and ``quantifiers``: the NC-FFN paper's deficit), absent when none is.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from tinyscope.errors import ConfigError
from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.scoring import check_lengths, total_logprobs

LICENSING = ("npi_licensing", "quantifiers")


@dataclass(frozen=True)
class MinimalPair:
    good: str
    bad: str
    paradigm: str   # UID
    phenomenon: str  # linguistics_term
    where: str      # "file:line"


def blimp_files(path: str | Path) -> list[Path]:
    """The ``*.jsonl`` files of a folder (sorted), or the one file given."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"BLiMP path {str(path)!r} does not exist; give a folder of .jsonl files or one file")
    if p.is_file():
        return [p]
    files = sorted(p.glob("*.jsonl"))
    if not files:
        raise ConfigError(f"BLiMP folder {str(path)!r} holds no .jsonl files")
    return files


def _field(rec: dict, key: str, where: str, default: str | None = None) -> str:
    value = rec.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key!r} is missing or not a non-empty string"
                          if default is None else f"{where}: {key!r} must be a non-empty string")
    return value.strip()


def read_pairs(path: str | Path) -> list[MinimalPair]:
    """Every minimal pair of the BLiMP files at ``path``; a malformed line is a one-line error."""
    pairs = []
    for f in blimp_files(path):
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"BLiMP file {f} is not UTF-8 (byte {exc.start})") from None
        before = len(pairs)
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{f}:{n}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{where}: not a JSON object ({exc.msg} at column {exc.colno})") from None
            if not isinstance(rec, dict):
                raise ConfigError(f"{where}: not a JSON object (a {type(rec).__name__})")
            uid = _field(rec, "UID", where, f.stem)
            pairs.append(MinimalPair(_field(rec, "sentence_good", where), _field(rec, "sentence_bad", where), uid,
                                     _field(rec, "linguistics_term", where, uid), where))
        if len(pairs) == before:
            raise ConfigError(f"BLiMP file {f} holds no minimal pairs")
    return pairs


def pair_sequences(tok, pairs: Sequence[MinimalPair], n_ctx: int) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of the good and bad sentences, each after ``<|endoftext|>``; a sentence longer
    than the context is an error naming its line."""
    eot = bpe.eot_id(tok)
    good = [[eot] + ids for ids in bpe.encode_many(tok, [p.good for p in pairs])]
    bad = [[eot] + ids for ids in bpe.encode_many(tok, [p.bad for p in pairs])]
    where = [p.where for p in pairs]
    check_lengths(good, n_ctx, "sentence_good", where)
    check_lengths(bad, n_ctx, "sentence_bad", where)
    return good, bad


def pair_correct(model: torch.nn.Module, good: list[list[int]], bad: list[list[int]]) -> list[bool]:
    """Per pair: the good sentence's total log-probability beats the bad one's."""
    lp = total_logprobs(model, good + bad)
    return [g > b for g, b in zip(lp[:len(good)], lp[len(good):])]


def blimp_metrics(pairs: Sequence[MinimalPair], correct: Sequence[bool], licensing: Sequence[str] = LICENSING) -> dict:
    """The accuracies of the module docstring from each pair's outcome."""
    def share(sel):
        hits = [c for p, c in zip(pairs, correct) if sel(p)]
        return sum(hits) / len(hits)

    out = {"blimp_acc": share(lambda p: True), "blimp_pairs": float(len(pairs))}
    for uid in sorted({p.paradigm for p in pairs}):
        out[f"blimp_acc@{uid}"] = share(lambda p, uid=uid: p.paradigm == uid)
    for term in sorted({p.phenomenon for p in pairs}):
        out[f"blimp_phenomenon_acc@{term}"] = share(lambda p, term=term: p.phenomenon == term)
    chosen = lambda p: p.phenomenon in licensing or p.paradigm in licensing
    if any(chosen(p) for p in pairs):
        out["blimp_licensing_acc"] = share(chosen)
    return out


class BlimpEvaluator:
    """The BLiMP files read and tokenized once; ``evaluator(model)`` returns :func:`blimp_metrics`."""

    def __init__(self, path: str | Path, tok, n_ctx: int, licensing: Sequence[str] = LICENSING):
        self.pairs = read_pairs(path)
        self.good, self.bad = pair_sequences(tok, self.pairs, n_ctx)
        self.licensing = tuple(licensing)

    def __call__(self, model: torch.nn.Module) -> dict:
        return blimp_metrics(self.pairs, pair_correct(model, self.good, self.bad), self.licensing)
