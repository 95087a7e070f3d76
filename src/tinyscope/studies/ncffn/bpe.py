"""Byte-level BPE tokenizers (GPT-2's scheme) trained on a user's corpus with Hugging Face ``tokenizers``.

The tokenizer is GPT-2's construction: text is split by the byte-level pre-tokenizer (a space
belongs to the word after it, ``" cat"`` -> ``Ġcat``), every byte is in the initial alphabet (so
any text encodes, no unknown token), merges are learned by BPE up to ``vocab_size`` entries, and
one special token ``<|endoftext|>`` separates documents (the literal string in a corpus is that
token). GPT-2's own vocabulary has 50,257 entries: 256 bytes, 50,000 merges and ``<|endoftext|>``.

A tokenizer is saved and loaded as Hugging Face's single ``tokenizer.json`` (any such file works,
GPT-2's included). Training is deterministic: the same text and settings give the same file.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator

from tinyscope.errors import ConfigError
from tinyscope.train.checkpoint import atomic_write_bytes

EOT = "<|endoftext|>"
MIN_VOCAB = 257  # the 256 bytes and <|endoftext|>


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise ConfigError("BPE corpora need the Hugging Face 'tokenizers' package: pip install tokenizers") from None
    return tokenizers


def new_tokenizer():
    """An untrained byte-level BPE tokenizer (pre-tokenizer and decoder set, no merges)."""
    tk = _tokenizers()
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2):
    """A byte-level BPE tokenizer of at most ``vocab_size`` entries learned from ``texts``.

    Fewer entries when the text has fewer pairs seen ``min_frequency`` times."""
    if vocab_size < MIN_VOCAB:
        raise ConfigError(f"data.vocab_size={vocab_size} must be >= {MIN_VOCAB} (256 bytes and {EOT})")
    tk = _tokenizers()
    tok = new_tokenizer()
    trainer = tk.trainers.BpeTrainer(vocab_size=int(vocab_size), min_frequency=int(min_frequency),
                                     special_tokens=[EOT], initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
                                     show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def save_tokenizer(tok, path: str | Path) -> None:
    """Write ``tok`` as Hugging Face's ``tokenizer.json``, atomically."""
    atomic_write_bytes(path, tok.to_str().encode("utf-8"))


def load_tokenizer(path: str | Path):
    """A tokenizer from a ``tokenizer.json``; it must know ``<|endoftext|>``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"tokenizer {str(path)!r} does not exist (or is not a file); give a tokenizer.json")
    tk = _tokenizers()
    try:
        tok = tk.Tokenizer.from_file(str(p))
    except Exception as exc:  # tokenizers raises its own exception types for malformed files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"tokenizer {str(path)!r} is not a Hugging Face tokenizer.json: {first}") from None
    if tok.token_to_id(EOT) is None:
        raise ConfigError(f"tokenizer {str(path)!r} has no {EOT} token; BLiMP, LAMBADA and document breaks need it")
    return tok


def eot_id(tok) -> int:
    return int(tok.token_to_id(EOT))


def encode(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def encode_many(tok, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def decode(tok, ids) -> str:
    return tok.decode([int(i) for i in ids], skip_special_tokens=False)


def read_lines(paths: Iterable[str | Path], max_bytes: int = 0, chunk_lines: int = 4096) -> Iterator[str]:
    """The files' text in blocks of ``chunk_lines`` whole lines (newlines kept), each file ending
    in ``<|endoftext|>``; at most about ``max_bytes`` bytes in all (0: everything)."""
    seen = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            block: list[str] = []
            for line in f:
                block.append(line)
                seen += len(line)
                if len(block) >= chunk_lines or (max_bytes and seen >= max_bytes):
                    yield "".join(block)
                    block = []
                if max_bytes and seen >= max_bytes:
                    return
            yield "".join(block) + EOT


def check_corpus_files(paths: Iterable[str]) -> list[Path]:
    """The corpus files, each an existing, non-empty, UTF-8 file; else one-line errors."""
    out = []
    for path in paths:
        p = Path(path).expanduser()
        if not p.exists():
            raise ConfigError(f"corpus file {path!r} does not exist; give --set data.paths=FILE[,FILE...]")
        if p.is_dir():
            raise ConfigError(f"corpus path {path!r} is a directory; list its files: --set data.paths=a.txt,b.txt")
        if os.path.getsize(p) == 0:
            raise ConfigError(f"corpus file {path!r} is empty")
        with open(p, "rb") as f:
            head = f.read(1 << 16)
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 4:  # not just a character cut by the 64 KiB read
                raise ConfigError(f"corpus file {path!r} is not UTF-8 text (byte {exc.start}); "
                                  f"convert it first (iconv -t utf-8)") from None
        out.append(p)
    return out
