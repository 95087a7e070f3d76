"""Language modelling on a user's text file, byte- or character-level.

``level="byte"``: the file's raw bytes, vocabulary 256 (any file works, any language).
``level="char"``: the file decoded as UTF-8, vocabulary = the sorted distinct characters of the
file (so the vocabulary, and the model's shape, depend on the file).

The last ``val_fraction`` of the file is held out; training batches are random windows of the
first part, evaluation uses fixed non-overlapping windows of the held-out part. Every problem
with the file (missing, a directory, empty, not UTF-8 at char level, too short for the context)
raises a :class:`ConfigError` that says what to do.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from tinyscope.errors import ConfigError, check, check_choice
from tinyscope.tasks.base import Batch, fingerprint


@dataclass
class TextConfig:
    path: str = ""                         # empty = no text file (the experiment's synthetic task)
    level: Literal["byte", "char"] = "byte"
    val_fraction: float = 0.05
    max_eval_windows: int = 256

    def __post_init__(self):
        check_choice("data.level", self.level, ("byte", "char"))
        check(0.0 < self.val_fraction < 0.5, f"data.val_fraction={self.val_fraction} must lie in (0, 0.5)")
        check(self.max_eval_windows >= 1, f"data.max_eval_windows={self.max_eval_windows} must be >= 1")


def read_text(path: str | Path, level: str) -> tuple[np.ndarray, list[str]]:
    """Token ids (int64) and the vocabulary (byte values as strings at byte level)."""
    p = Path(path).expanduser()
    if not str(path):
        raise ConfigError("no text file given: pass --set data.path=PATH/TO/FILE.txt")
    if not p.exists():
        raise ConfigError(f"data.path={str(path)!r} does not exist; give the path of a text file")
    if p.is_dir():
        raise ConfigError(f"data.path={str(path)!r} is a directory; give one text file (concatenate a corpus first)")
    raw = p.read_bytes()
    if not raw:
        raise ConfigError(f"data.path={str(path)!r} is empty")
    if level == "byte":
        return np.frombuffer(raw, dtype=np.uint8).astype(np.int64), [repr(bytes([b]))[2:-1] for b in range(256)]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"data.path={str(path)!r} is not UTF-8 (byte {exc.start}); "
                          f"use --set data.level=byte for arbitrary files") from None
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text)), chars


def held_out_split(ids: np.ndarray, val_fraction: float, block_size: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` without and with its last ``val_fraction`` (training, held out); each part must hold
    two windows of ``block_size + 1`` tokens, else a :class:`ConfigError` naming ``what``."""
    n_val = int(len(ids) * val_fraction)
    need = 2 * (block_size + 1)
    if n_val < need or len(ids) - n_val < need:
        raise ConfigError(f"{what} has {len(ids)} tokens: too short for windows of {block_size + 1} with "
                          f"data.val_fraction={val_fraction}; use a longer file, a larger val_fraction or a "
                          f"smaller model.n_ctx")
    return ids[:-n_val], ids[-n_val:]


class TextTask:
    """Next-token prediction on a text file."""

    def __init__(self, cfg: TextConfig, block_size: int):
        self.cfg, self.block_size = cfg, int(block_size)
        ids, self.vocab = read_text(cfg.path, cfg.level)  # ids may be any integer array (a memmap too)
        self.vocab_size = len(self.vocab)
        self.train_ids, self.val_ids = held_out_split(ids, cfg.val_fraction, self.block_size,
                                                      f"data.path={cfg.path!r} at {cfg.level} level")
        self._eval: Batch | None = None

    def _window(self, ids: np.ndarray, starts: np.ndarray) -> Batch:
        win = np.asarray(ids[starts[:, None] + np.arange(self.block_size + 1)], dtype=np.int64)  # (B, W+1)
        return Batch(win[:, :-1].copy(), win[:, 1:].copy(), np.ones((len(starts), self.block_size), dtype=bool))

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        return self._window(self.train_ids, rng.integers(0, len(self.train_ids) - self.block_size - 1, size=batch_size))

    def eval_set(self) -> Batch:
        """Non-overlapping windows of the held-out part (at most ``max_eval_windows``)."""
        if self._eval is None:
            W = self.block_size
            starts = np.arange(0, len(self.val_ids) - W - 1, W)[: self.cfg.max_eval_windows]
            self._eval = self._window(self.val_ids, starts)
        return self._eval

    def eval_fingerprint(self) -> str:
        b = self.eval_set()
        return fingerprint(b.tokens, b.targets)

    def decode(self, ids) -> str:
        if self.cfg.level == "byte":
            return bytes(int(i) for i in ids).decode("utf-8", errors="replace")
        return "".join(self.vocab[int(i)] for i in ids)
