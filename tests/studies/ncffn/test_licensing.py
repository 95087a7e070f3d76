"""The licensing language (checked against a slow sentence-by-sentence parse) and text files."""
import numpy as np
import pytest

from tinyscope.errors import ConfigError
from tinyscope.studies.ncffn.licensing import (
    COMPARATIVES,
    FILLERS,
    ID,
    PARTICIPLES,
    VOCAB,
    Licensing,
    LicensingConfig,
    generate_corpus,
)
from tinyscope.tasks.text import TextConfig, TextTask

EXPECTED = {"than": 1, "by": 2, "nor": 3, "or": 4, "and": 5}


def _sentences(tokens):
    words = [VOCAB[t] for t in tokens]
    out, cur = [], []
    for i, w in enumerate(words):
        cur.append((i, w))
        if w == ".":
            out.append(cur)
            cur = []
    return out


def test_corpus_matches_a_slow_parse():
    corpus = generate_corpus(np.random.default_rng(0), 20_000, max_gap=5, p_licensed=0.5)
    slots = np.flatnonzero(corpus["slot"])
    sentences = _sentences(corpus["tokens"])
    assert len(sentences) == len(corpus["starts"]) == len(slots)
    n_lic = 0
    for sent, s in zip(sentences, slots):
        words = [w for _, w in sent]
        idx = [i for i, _ in sent]
        # the licensed word is fixed by the licensor alone (slow rule, read off the words)
        if any(w in COMPARATIVES for w in words):
            want, lic = "than", next(i for i, w in sent if w in COMPARATIVES)
        elif any(w in PARTICIPLES for w in words):
            want, lic = "by", next(i for i, w in sent if w in PARTICIPLES)
        elif words[0] == "neither":
            want, lic = "nor", idx[0]
        elif words[0] == "either":
            want, lic = "or", idx[0]
        else:
            want, lic = "and", None
        assert VOCAB[corpus["tokens"][s]] == want and corpus["slot"][s] == EXPECTED[want]
        assert s in idx and corpus["licensor"][s] >= idx[0]
        if lic is not None:
            assert corpus["licensor"][s] == lic
        n_lic += want in ("than", "by", "nor")
        # exactly one slot word per sentence, and the gap is fillers between commas
        assert sum(w in EXPECTED for w in words) == 1
        gap = words[words.index(",") + 1: len(words) - 1 - words[::-1].index(",")] if "," in words else []
        assert len(gap) <= 5 and all(w in FILLERS for w in gap)
    assert abs(n_lic / len(slots) - 0.5) < 0.05


def test_windows_and_eval_set_meta():
    task = Licensing(LicensingConfig(n_train_tokens=5000, n_val_tokens=2000, block_size=24, max_gap=4))
    b = task.sample(np.random.default_rng(1), 8)
    assert b.tokens.shape == (8, 24) and np.array_equal(b.tokens[:, 1:], b.targets[:, :-1])
    ev = task.eval_set()
    assert (ev.tokens[:, 0] == ID["the"]).sum() + np.isin(ev.tokens[:, 0], [ID[w] for w in ("neither", "either", "both")]).sum() == len(ev)
    rows, cols = np.nonzero(ev.meta["slot"])
    assert len(rows) > 0
    lic = ev.meta["licensor_pos"][rows, cols]
    assert (lic >= 0).all() and (lic <= cols).all()
    for r, c, k in zip(rows, cols, ev.meta["slot"][rows, cols]):
        assert ID[["than", "by", "nor", "or", "and"][k - 1]] == ev.targets[r, c]
    again = Licensing(LicensingConfig(n_train_tokens=5000, n_val_tokens=2000, block_size=24, max_gap=4))
    assert again.eval_fingerprint() == task.eval_fingerprint()
    with pytest.raises(ConfigError):
        LicensingConfig(block_size=10, max_gap=6)


def test_text_task_levels_and_errors(tmp_path):
    text = "héllo wörld, " * 200
    f = tmp_path / "t.txt"
    f.write_text(text, encoding="utf-8")
    char = TextTask(TextConfig(path=str(f), level="char", val_fraction=0.1), block_size=16)
    assert char.vocab_size == len(set(text))
    assert char.decode(char.train_ids[:13]) == text[:13]
    byte = TextTask(TextConfig(path=str(f), level="byte"), block_size=16)
    assert byte.vocab_size == 256 and byte.decode(byte.train_ids[:13]) == "héllo wörld"
    b = byte.sample(np.random.default_rng(0), 4)
    assert b.tokens.shape == (4, 16) and np.array_equal(b.tokens[:, 1:], b.targets[:, :-1])
    assert len(byte.eval_set()) >= 1
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\xff\xfe" * 500)
    (tmp_path / "empty.txt").write_text("")
    cases = [("", "char", "no text file"), (str(tmp_path / "nope.txt"), "byte", "does not exist"),
             (str(tmp_path), "byte", "directory"), (str(tmp_path / "empty.txt"), "byte", "empty"),
             (str(bad), "char", "not UTF-8")]
    for path, level, msg in cases:
        with pytest.raises(ConfigError, match=msg):
            TextTask(TextConfig(path=path, level=level), block_size=16)
    with pytest.raises(ConfigError, match="too short"):
        TextTask(TextConfig(path=str(f)), block_size=512)
