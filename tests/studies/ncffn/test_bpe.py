"""Byte-level BPE (:mod:`tinyscope.studies.ncffn.bpe`): deterministic training, a saved
tokenizer.json that loads to the same encoding, any text round-trips, and bad input is one error."""
from __future__ import annotations

import pytest

from tinyscope.errors import ConfigError
from tinyscope.studies.ncffn import bpe

TEXT = ["the cat is taller than the dog .\n", "neither the cat nor the dog ran .\n",
        "the dog was seen by the cat .\n"] * 40


def test_training_is_deterministic_and_learns_merges():
    a, b = bpe.train_bpe(TEXT, 300), bpe.train_bpe(TEXT, 300)
    assert a.to_str() == b.to_str()
    assert bpe.MIN_VOCAB < a.get_vocab_size() <= 300
    assert len(bpe.encode(a, " taller")) == 1  # a frequent word became one piece
    assert bpe.eot_id(a) == a.token_to_id(bpe.EOT)


def test_saved_tokenizer_loads_and_round_trips_any_text(tmp_path):
    tok = bpe.train_bpe(TEXT, 300)
    bpe.save_tokenizer(tok, tmp_path / "tokenizer.json")
    back = bpe.load_tokenizer(tmp_path / "tokenizer.json")
    text = "Über naïve café — 猫 taller than\tthe dog!\n"
    assert bpe.encode(back, text) == bpe.encode(tok, text)
    assert bpe.decode(back, bpe.encode(back, text)) == text
    assert bpe.encode(tok, "a" + bpe.EOT + "b")[1] == bpe.eot_id(tok)  # the literal string is the special token


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="must be >= 257"):
        bpe.train_bpe(TEXT, 100)
    with pytest.raises(ConfigError, match="does not exist"):
        bpe.load_tokenizer(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a Hugging Face tokenizer.json"):
        bpe.load_tokenizer(tmp_path / "bad.json")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 10)
    for path, why in [(tmp_path / "none.txt", "does not exist"), (tmp_path, "is a directory"),
                      (tmp_path / "empty.txt", "is empty"), (tmp_path / "latin1.txt", "not UTF-8")]:
        with pytest.raises(ConfigError, match=why):
            bpe.check_corpus_files([str(path)])


def test_read_lines_keeps_every_line_and_ends_each_file(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "b.txt").write_text("four")
    blocks = list(bpe.read_lines([tmp_path / "a.txt", tmp_path / "b.txt"], chunk_lines=2))
    assert "".join(blocks) == "one\ntwo\nthree\n" + bpe.EOT + "four" + bpe.EOT
    assert "".join(bpe.read_lines([tmp_path / "a.txt"], max_bytes=5)) == "one\ntwo\n"
