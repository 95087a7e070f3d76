"""A user's corpus as BPE tokens (:mod:`tinyscope.studies.ncffn.corpus`): the ids are the files'
encoding, cached once and reused, windows are next-token pairs, fresh held-out windows differ,
and a given tokenizer.json is used as it is."""
from __future__ import annotations

import numpy as np
import pytest

from tinyscope.errors import ConfigError
from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.corpus import BPECorpus, CorpusConfig, builtin_text


@pytest.fixture()
def corpus(tmp_path):
    (tmp_path / "a.txt").write_text(builtin_text(300, seed=1))
    (tmp_path / "b.txt").write_text(builtin_text(200, seed=2))
    return [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]


def _cfg(paths, tmp_path, **kw):
    return CorpusConfig(paths=paths, vocab_size=300, val_fraction=0.1, max_eval_windows=8,
                        cache_dir=str(tmp_path / "cache"), **kw)


def test_ids_are_the_files_encoding_and_the_cache_is_reused(corpus, tmp_path):
    task = BPECorpus(_cfg(corpus, tmp_path), 16)
    tok = task.tokenizer
    want = []
    for path in corpus:
        want += bpe.encode(tok, open(path).read() + bpe.EOT)
    assert np.array_equal(np.concatenate([task.train_ids, task.val_ids]), want)
    assert task.vocab_size == tok.get_vocab_size() <= 300
    stamp = (task.cache / "tokens.bin").stat().st_mtime_ns
    again = BPECorpus(_cfg(corpus, tmp_path), 16)
    assert again.cache == task.cache and (again.cache / "tokens.bin").stat().st_mtime_ns == stamp
    assert again.tokenizer.to_str() == tok.to_str()
    other = BPECorpus(_cfg(corpus[:1], tmp_path), 16)  # other files, another cache entry
    assert other.cache != task.cache


def test_windows_and_fresh_held_out_windows(corpus, tmp_path):
    task = BPECorpus(_cfg(corpus, tmp_path), 16)
    b = task.sample(np.random.default_rng(0), 4)
    assert b.tokens.dtype == np.int64 and b.tokens.shape == (4, 16)
    assert np.array_equal(b.tokens[:, 1:], b.targets[:, :-1])
    own = task.eval_fingerprint()
    fresh = [BPECorpus(_cfg(corpus, tmp_path), 16, eval_seed=s).eval_fingerprint() for s in (1, 1, 2)]
    assert fresh[0] == fresh[1] and len({own, fresh[0], fresh[2]}) == 3


def test_a_given_tokenizer_is_used(corpus, tmp_path):
    tok = bpe.train_bpe([builtin_text(50, seed=3)], 270)
    bpe.save_tokenizer(tok, tmp_path / "tok.json")
    task = BPECorpus(_cfg(corpus, tmp_path, tokenizer=str(tmp_path / "tok.json")), 16)
    assert task.tokenizer.to_str() == tok.to_str() and task.vocab_size == tok.get_vocab_size()
    with pytest.raises(ConfigError, match="does not exist"):
        BPECorpus(_cfg(corpus, tmp_path, tokenizer=str(tmp_path / "none.json")), 16)


def test_builtin_corpus_and_errors(tmp_path):
    task = BPECorpus(CorpusConfig(vocab_size=300, val_fraction=0.05), 16)
    assert task.cache is None and task.vocab_size <= 300 and "than" in task.decode(task.train_ids[:400])
    with pytest.raises(ConfigError, match="does not exist"):
        BPECorpus(_cfg([str(tmp_path / "none.txt")], tmp_path), 16)
    (tmp_path / "short.txt").write_text("a few words only\n")
    with pytest.raises(ConfigError, match="too short"):
        BPECorpus(_cfg([str(tmp_path / "short.txt")], tmp_path), 16)
    with pytest.raises(ConfigError, match="data.val_fraction"):
        CorpusConfig(val_fraction=0.7)
