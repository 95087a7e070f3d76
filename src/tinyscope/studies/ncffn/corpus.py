"""A user's text corpus as BPE tokens: next-token windows for the paper-scale NC-FFN language model.

The corpus is one or more UTF-8 files (``data.paths``), read in order, each file ending in
``<|endoftext|>``. Its tokenizer is ``data.tokenizer`` (a ``tokenizer.json``) or a byte-level BPE
of ``data.vocab_size`` entries learned from the corpus (its first ``data.bpe_sample_bytes`` bytes,
0 = all; :mod:`~tinyscope.studies.ncffn.bpe`). The token ids are written once into a cache folder,
``data.cache_dir/<key>/`` (``tokenizer.json``, ``tokens.bin``, ``meta.json``), whose key hashes the
files (path, size, modification time) and the tokenizer settings; later runs, ``torchrun`` ranks
and ``load_run`` map that file instead of tokenizing again (one process builds it, the others wait
on its lock). The last ``data.val_fraction`` of the tokens is held out: training windows are drawn
at random from the rest, evaluation uses non-overlapping windows of the held-out tail (or, with
``eval_seed``, random windows of it).

With no ``data.paths`` the corpus is built in: sentences of the licensing language written out as
text, a few hundred kilobytes tokenized in memory (the smoke preset trains on it, nothing is cached).
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinyscope.errors import ConfigError, check
from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.licensing import generate_sentence
from tinyscope.tasks.base import Batch
from tinyscope.tasks.text import TextTask, held_out_split
from tinyscope.train.checkpoint import atomic_write_json

CACHE_VERSION = 1


@dataclass
class CorpusConfig:
    paths: list[str] = field(default_factory=list)  # corpus text files; empty: the built-in licensing text
    tokenizer: str = ""            # a tokenizer.json to use (e.g. RUN/tokenizer.json); empty: learn BPE here
    vocab_size: int = 50_257       # BPE entries learned (GPT-2's count); ignored with data.tokenizer
    min_frequency: int = 2         # a merge needs a pair seen this often
    bpe_sample_bytes: int = 0      # learn BPE on the corpus' first this many bytes (0: all of it)
    val_fraction: float = 0.005    # held-out tail of the token stream
    max_eval_windows: int = 200    # held-out windows per evaluation
    cache_dir: str = ""            # empty: $TINYSCOPE_CACHE/corpora, else ~/.cache/tinyscope/corpora
    builtin_sentences: int = 2000  # sentences of the built-in corpus (no data.paths)

    def __post_init__(self):
        check(self.vocab_size >= bpe.MIN_VOCAB, f"data.vocab_size={self.vocab_size} must be >= {bpe.MIN_VOCAB}")
        check(self.min_frequency >= 1, f"data.min_frequency={self.min_frequency} must be >= 1")
        check(self.bpe_sample_bytes >= 0, f"data.bpe_sample_bytes={self.bpe_sample_bytes} must be >= 0 (0: all)")
        check(0.0 < self.val_fraction < 0.5, f"data.val_fraction={self.val_fraction} must lie in (0, 0.5)")
        check(self.max_eval_windows >= 1, f"data.max_eval_windows={self.max_eval_windows} must be >= 1")
        check(self.builtin_sentences >= 100, f"data.builtin_sentences={self.builtin_sentences} must be >= 100")


def builtin_text(n_sentences: int, seed: int = 0) -> str:
    """``n_sentences`` sentences of the licensing language, one per line."""
    rng = np.random.default_rng([seed, 11])
    return "".join(" ".join(generate_sentence(rng, 4, 0.5)[0]) + "\n" for _ in range(n_sentences))


def cache_root(cfg: CorpusConfig) -> Path:
    if cfg.cache_dir:
        return Path(cfg.cache_dir).expanduser()
    env = os.environ.get("TINYSCOPE_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "tinyscope") / "corpora"


def cache_key(cfg: CorpusConfig, files: list[Path]) -> str:
    """Hash of the files (resolved path, size, mtime) and of what decides the tokens."""
    tok = Path(cfg.tokenizer).expanduser()
    if cfg.tokenizer and not tok.is_file():
        raise ConfigError(f"data.tokenizer={cfg.tokenizer!r} does not exist (or is not a file); give a tokenizer.json")
    record = {"version": CACHE_VERSION,
              "files": [[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in files],
              "tokenizer": hashlib.sha256(tok.read_bytes()).hexdigest() if cfg.tokenizer else None,
              "bpe": None if cfg.tokenizer else [cfg.vocab_size, cfg.min_frequency, cfg.bpe_sample_bytes]}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def _write_tokens(tok, files: list[Path], out: Path, dtype: np.dtype, batch: int = 16) -> int:
    """Encode the files block by block into ``out`` (raw ``dtype``); returns the token count."""
    n, pending = 0, []
    with open(out, "wb") as f:
        def flush():
            nonlocal n
            for ids in bpe.encode_many(tok, pending):
                np.asarray(ids, dtype=dtype).tofile(f)
                n += len(ids)
            pending.clear()

        for block in bpe.read_lines(files):
            pending.append(block)
            if len(pending) >= batch:
                flush()
        flush()
        f.flush()
        os.fsync(f.fileno())
    return n


def prepare_cache(cfg: CorpusConfig, files: list[Path]) -> Path:
    """The corpus' cache folder, built under its lock if it is not complete yet."""
    folder = cache_root(cfg) / cache_key(cfg, files)
    if (folder / "meta.json").exists():
        return folder
    with _locked(folder.with_suffix(".lock")):
        if (folder / "meta.json").exists():  # another process built it while this one waited
            return folder
        folder.mkdir(parents=True, exist_ok=True)
        if cfg.tokenizer:
            tok = bpe.load_tokenizer(cfg.tokenizer)
        else:
            tok = bpe.train_bpe(bpe.read_lines(files, cfg.bpe_sample_bytes), cfg.vocab_size, cfg.min_frequency)
        bpe.save_tokenizer(tok, folder / "tokenizer.json")
        dtype = _token_dtype(tok.get_vocab_size())
        n = _write_tokens(tok, files, folder / "tokens.bin.tmp", dtype)
        os.replace(folder / "tokens.bin.tmp", folder / "tokens.bin")
        atomic_write_json(folder / "meta.json", {"n_tokens": n, "dtype": dtype.name, "files": [str(p) for p in files],
                                                 "vocab_size": tok.get_vocab_size()})
    return folder


def _read_cache(folder: Path):
    meta = json.loads((folder / "meta.json").read_text())
    ids = np.memmap(folder / "tokens.bin", dtype=np.dtype(meta["dtype"]), mode="r", shape=(int(meta["n_tokens"]),))
    return bpe.load_tokenizer(folder / "tokenizer.json"), ids


@functools.lru_cache(maxsize=4)
def _builtin(n_sentences: int, tokenizer: str, vocab_size: int, min_frequency: int):
    """Tokenizer and ids of the built-in corpus (kept per process: tests build it often)."""
    text = builtin_text(n_sentences)
    tok = bpe.load_tokenizer(tokenizer) if tokenizer else bpe.train_bpe([text], vocab_size, min_frequency)
    ids = np.asarray(bpe.encode(tok, text), dtype=np.int64)
    ids.flags.writeable = False
    return tok, ids


class BPECorpus(TextTask):
    """Next-token windows of ``block_size`` BPE tokens of the corpus (a :class:`TextTask` on ids).

    ``tokenizer`` is the Hugging Face tokenizer; ``cache`` the folder holding it and the ids
    (None for the built-in corpus)."""

    def __init__(self, cfg: CorpusConfig, block_size: int, eval_seed: int | None = None):
        self.cfg, self.block_size, self.eval_seed = cfg, int(block_size), eval_seed
        if cfg.paths:
            self.cache = prepare_cache(cfg, bpe.check_corpus_files(cfg.paths))
            self.tokenizer, ids = _read_cache(self.cache)
        else:
            self.cache = None
            self.tokenizer, ids = _builtin(cfg.builtin_sentences, cfg.tokenizer, cfg.vocab_size, cfg.min_frequency)
        self.vocab_size = self.tokenizer.get_vocab_size()
        self.vocab: list[str] = []  # the tokenizer holds the vocabulary
        self.train_ids, self.val_ids = held_out_split(ids, cfg.val_fraction, self.block_size, "the BPE corpus")
        self._eval: Batch | None = None

    def eval_set(self) -> Batch:
        """The held-out windows: non-overlapping ones, or random ones drawn from ``eval_seed``."""
        if self._eval is None and self.eval_seed is not None:
            rng = np.random.default_rng([self.eval_seed, 7])
            starts = rng.integers(0, len(self.val_ids) - self.block_size - 1, size=self.cfg.max_eval_windows)
            self._eval = self._window(self.val_ids, np.sort(starts))
        return super().eval_set()

    def decode(self, ids) -> str:
        return bpe.decode(self.tokenizer, ids)
