"""Plus-last-even (Mahajne & Moldwin, Sec. 2.1).

Vocabulary: digits 0..10 (ids 0..10) and ``+`` (id 11). Each next token is ``+`` with
probability ``p_plus``, else a digit uniform in 0..10, except right after ``+``, where it is the
most recent even digit of the prefix (the rule target). When the prefix holds no even digit the
paper allows any token; ``no_even="random_even"`` (default, as the public code) draws an even
digit uniformly, ``no_even="any"`` draws from the unconstrained distribution.

Training follows the paper: a fixed corpus of ``n_sequences`` sequences with lengths uniform in
``[min_len, max_len]``; each batch is ``batch_size`` random windows of ``block_size + 1`` tokens.

Rule error (the paper's metric, Fig. 3): the fraction of *constrained* positions (the input is
``+`` and the prefix holds an even digit) whose argmax prediction differs from the rule target.
Held-out evaluation reads every position of held-out sequences with a sliding context of the
last ``block_size`` tokens, the way the model is used to generate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.tasks.base import Batch, fingerprint

PLUS = 11
VOCAB = [str(d) for d in range(11)] + ["+"]


@dataclass
class PlusLastEvenConfig:
    n_sequences: int = 2000
    min_len: int = 20
    max_len: int = 50
    p_plus: float = 0.3
    block_size: int = 8
    no_even: Literal["random_even", "any"] = "random_even"
    data_seed: int = 0          # corpus seed; the held-out corpus uses data_seed + 1
    n_eval_sequences: int = 500
    eval_seed: int | None = None  # None: the held-out corpus of data_seed; S: a fresh one drawn from S

    def __post_init__(self):
        check(self.n_sequences >= 1, f"task.n_sequences={self.n_sequences} must be >= 1")
        check(2 <= self.min_len <= self.max_len, f"task.min_len={self.min_len} and task.max_len={self.max_len} need 2 <= min_len <= max_len")
        check(0.0 <= self.p_plus < 1.0, f"task.p_plus={self.p_plus} must lie in [0, 1)")
        check(1 <= self.block_size < self.min_len, f"task.block_size={self.block_size} must lie in [1, min_len)")
        check_choice("task.no_even", self.no_even, ("random_even", "any"))
        check(self.n_eval_sequences >= 1, f"task.n_eval_sequences={self.n_eval_sequences} must be >= 1")


def generate_sequence(rng: np.random.Generator, length: int, p_plus: float = 0.3,
                      no_even: str = "random_even") -> np.ndarray:
    """One sequence of the plus-last-even process (int64 ids)."""
    seq = np.empty(length, dtype=np.int64)
    last_even = -1
    for i in range(length):
        if i > 0 and seq[i - 1] == PLUS:
            if last_even >= 0:
                tok = last_even
            elif no_even == "random_even":
                tok = 2 * int(rng.integers(0, 6))
            else:
                tok = PLUS if rng.random() < p_plus else int(rng.integers(0, 11))
        else:
            tok = PLUS if rng.random() < p_plus else int(rng.integers(0, 11))
        seq[i] = tok
        if tok != PLUS and tok % 2 == 0:
            last_even = tok
    return seq


def generate_corpus(rng: np.random.Generator, cfg: PlusLastEvenConfig, n: int) -> list[np.ndarray]:
    lengths = rng.integers(cfg.min_len, cfg.max_len + 1, size=n)
    return [generate_sequence(rng, int(L), cfg.p_plus, cfg.no_even) for L in lengths]


def rule_targets(seq: np.ndarray) -> np.ndarray:
    """For each position t: the rule target of token t+1 if t is constrained, else -1.

    Position t is constrained when ``seq[t] == +`` and ``seq[:t]`` holds an even digit.
    """
    out = np.full(len(seq), -1, dtype=np.int64)
    last_even = -1
    for t, tok in enumerate(seq):
        if tok == PLUS and last_even >= 0:
            out[t] = last_even
        if tok != PLUS and tok % 2 == 0:
            last_even = int(tok)
    return out


class PlusLastEven:
    """The task: training windows from a fixed corpus, and a fixed held-out evaluation set."""

    vocab_size = len(VOCAB)
    vocab = VOCAB

    def __init__(self, cfg: PlusLastEvenConfig | None = None):
        self.cfg = cfg = cfg or PlusLastEvenConfig()
        self.corpus = generate_corpus(np.random.default_rng([cfg.data_seed, 0]), cfg, cfg.n_sequences)
        heldout_seed = [cfg.data_seed, 1] if cfg.eval_seed is None else [cfg.eval_seed, 1, 1]
        self.heldout = generate_corpus(np.random.default_rng(heldout_seed), cfg, cfg.n_eval_sequences)
        self._train = _Packed(self.corpus)
        self._heldout = _Packed(self.heldout)
        self._eval = None
        self._val = None

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """``batch_size`` random windows of ``block_size + 1`` tokens from the training corpus."""
        return self._windows(self._train, rng, batch_size)

    def val_windows(self, n: int = 1024) -> Batch:
        """A fixed set of ``n`` random windows of the held-out corpus (for the validation loss)."""
        if self._val is None or len(self._val) != n:
            self._val = self._windows(self._heldout, np.random.default_rng([self.cfg.data_seed, 2]), n)
        return self._val

    def _windows(self, packed: "_Packed", rng: np.random.Generator, batch_size: int) -> Batch:
        W = self.cfg.block_size
        which = rng.integers(0, len(packed.lengths), size=batch_size)  # (B,)
        starts = rng.integers(0, packed.lengths[which] - W)  # (B,) in [0, len - W - 1]
        idx = (packed.offsets[which] + starts)[:, None] + np.arange(W + 1)  # (B, W+1)
        window = packed.flat[idx]
        tokens, targets = window[:, :-1], window[:, 1:]
        constrained = tokens == PLUS
        return Batch(tokens.copy(), targets.copy(), np.ones_like(tokens, dtype=bool), {"constrained": constrained})

    def eval_set(self) -> Batch:
        """Every constrained position of the held-out corpus as a sliding window (fixed by data_seed).

        Row r is the context window of one constrained position; ``meta["query"]`` is the index of
        that position inside the window and ``meta["target"]`` the rule target.
        """
        if self._eval is None:
            W = self.cfg.block_size
            rows, query, target = [], [], []
            for seq in self.heldout:
                rt = rule_targets(seq)
                for t in np.flatnonzero(rt[:-1] >= 0):  # the last token has no successor
                    s = max(0, t - W + 1)
                    s = min(s, len(seq) - W - 1)
                    rows.append(seq[s:s + W + 1])
                    query.append(t - s)
                    target.append(rt[t])
            win = np.stack(rows)  # (N, W+1)
            tokens, targets = win[:, :-1], win[:, 1:]
            self._eval = Batch(tokens, targets, np.ones_like(tokens, dtype=bool),
                               {"query": np.array(query), "target": np.array(target)})
        return self._eval

    def eval_fingerprint(self) -> str:
        b = self.eval_set()
        return fingerprint(b.tokens, b.meta["query"], b.meta["target"])

    @staticmethod
    def rule_error(pred_at_query: np.ndarray, target: np.ndarray) -> float:
        """Fraction of constrained positions whose argmax prediction is not the rule target."""
        return float(np.mean(pred_at_query != target)) if len(target) else 0.0


class _Packed:
    """Sequences of different lengths packed into one array, with offsets for fast windowing."""

    def __init__(self, seqs: list[np.ndarray]):
        self.lengths = np.array([len(s) for s in seqs])
        self.flat = np.concatenate(seqs)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]])
