"""LAMBADA-style last-word accuracy (:mod:`tinyscope.studies.ncffn.lambada`): greedy over the
word's BPE pieces, contexts cut from the left to the window, and bad files are one error."""
from __future__ import annotations

import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.lambada import LambadaEvaluator, read_passages

from ._toy import Bigram, logprob, tokenizer

PASSAGES = ["the bird is taller than the tree", "neither the cat nor the dog", "the fox was seen by the cat"]


def _chain(tok, text: str) -> torch.Tensor:
    """A bigram table whose argmax after each token of ``text`` (after <|endoftext|>) is the next one."""
    V = tok.get_vocab_size()
    table = torch.zeros((V, V))
    ids = [bpe.eot_id(tok)] + bpe.encode(tok, text)
    for a, b in zip(ids[:-1], ids[1:]):
        table[a, b] = 4.0
    return table


def test_greedy_last_word(tmp_path):
    tok = tokenizer()
    (tmp_path / "l.txt").write_text("\n".join(PASSAGES) + "\n\n")
    ev = LambadaEvaluator(tmp_path / "l.txt", tok, n_ctx=32)
    assert [(p.context, p.word) for p in ev.passages][1] == ("neither the cat nor the", "dog")
    table = _chain(tok, PASSAGES[0])  # follows the first passage: its last word "tree" is predicted
    got = ev(Bigram(table))
    assert got["lambada_passages"] == 3
    eot = bpe.eot_id(tok)
    want = []
    for p in ev.passages:
        ctx, word = [eot] + bpe.encode(tok, p.context), bpe.encode(tok, " " + p.word)
        want.append(logprob(table, ctx + word) - logprob(table, ctx))
        greedy = all(int(table[a].argmax()) == b for a, b in zip((ctx + word)[len(ctx) - 1:-1], word))
        assert greedy == (p.word == "tree")
    assert got["lambada_acc"] == pytest.approx(1 / 3)
    assert got["lambada_logprob"] == pytest.approx(sum(want) / 3, rel=1e-5)
    assert LambadaEvaluator(tmp_path / "l.txt", tok, n_ctx=32)(Bigram(_chain(tok, PASSAGES[2])))["lambada_acc"] == \
        pytest.approx(1 / 3)


def test_long_context_keeps_its_last_tokens(tmp_path):
    tok = tokenizer()
    (tmp_path / "l.txt").write_text("the cat ran . " * 30 + PASSAGES[0] + "\n")
    ev = LambadaEvaluator(tmp_path / "l.txt", tok, n_ctx=16)
    ids, k = ev.items[0]
    assert len(ids) == 17 and ids[-k:] == bpe.encode(tok, " tree")
    assert ev(Bigram(_chain(tok, PASSAGES[0])))["lambada_acc"] == 1.0


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_passages(tmp_path / "none.txt")
    (tmp_path / "blank.txt").write_text("\n \n")
    with pytest.raises(ConfigError, match="holds no passages"):
        read_passages(tmp_path / "blank.txt")
    (tmp_path / "one.txt").write_text("a whole passage\nalone\n")
    with pytest.raises(ConfigError, match=r"one.txt:2: a passage needs a context and a last word"):
        read_passages(tmp_path / "one.txt")
