"""BLiMP minimal pairs (:mod:`tinyscope.studies.ncffn.blimp`) on JSONL files the test writes: the
accuracies equal a plain loop over each pair's log-probabilities, paradigms and phenomena are
grouped as BLiMP's fields say, and every malformed file or line is one error naming it."""
from __future__ import annotations

import json

import pytest
import torch

from tinyscope.errors import ConfigError, InputError
from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.blimp import BlimpEvaluator, read_pairs

from ._toy import Bigram, logprob, tokenizer

# each bad sentence has a word whose letters (z, q, j) no good sentence has
NPI = [("neither the cat nor the dog ran .", "neither the cat zzq the dog ran ."),
       ("the bird is taller than the tree .", "the bird is taller qqz the tree ."),
       ("the dog was seen by the cat .", "the dog was seen zqz the cat .")]
QUANT = [("both the bird and the fox sang .", "both the bird jjz the fox sang ."),
         ("either the cat or the dog ran .", "either the cat zjq the dog ran .")]


def _write(path, pairs, uid=None, term=None):
    with open(path, "w") as f:
        for good, bad in pairs:
            rec = {"sentence_good": good, "sentence_bad": bad, "field": "semantics"}
            rec.update({"UID": uid} if uid else {})
            rec.update({"linguistics_term": term} if term else {})
            f.write(json.dumps(rec) + "\n")


@pytest.fixture()
def blimp_dir(tmp_path):
    _write(tmp_path / "npi_present_1.jsonl", NPI, "npi_present_1", "npi_licensing")
    _write(tmp_path / "existential_there_quantifiers_1.jsonl", QUANT, "existential_there_quantifiers_1", "quantifiers")
    _write(tmp_path / "plain.jsonl", NPI[:2] + QUANT)
    return tmp_path


def test_accuracies_equal_the_plain_loop(blimp_dir):
    tok = tokenizer()
    V = tok.get_vocab_size()
    table = torch.randn((V, V), generator=torch.Generator().manual_seed(0)) * 3
    ev = BlimpEvaluator(blimp_dir, tok, n_ctx=32)
    got = ev(Bigram(table))
    eot = bpe.eot_id(tok)
    ok = [logprob(table, [eot] + bpe.encode(tok, p.good)) > logprob(table, [eot] + bpe.encode(tok, p.bad))
          for p in ev.pairs]
    by = lambda sel: sum(o for p, o in zip(ev.pairs, ok) if sel(p)) / sum(1 for p in ev.pairs if sel(p))
    assert len(ev.pairs) == 9 and got["blimp_pairs"] == 9
    assert got["blimp_acc"] == pytest.approx(sum(ok) / 9)
    assert got["blimp_acc@npi_present_1"] == pytest.approx(by(lambda p: p.paradigm == "npi_present_1"))
    assert got["blimp_acc@plain"] == pytest.approx(by(lambda p: p.paradigm == "plain"))  # no UID: the file's stem
    assert got["blimp_phenomenon_acc@quantifiers"] == pytest.approx(by(lambda p: p.phenomenon == "quantifiers"))
    assert got["blimp_licensing_acc"] == pytest.approx(by(lambda p: p.phenomenon in ("npi_licensing", "quantifiers")))
    assert 0 < sum(ok) < 9  # the random table gets some pairs right and some wrong


def test_a_model_that_prefers_the_good_words_scores_one(blimp_dir):
    tok = tokenizer()
    V = tok.get_vocab_size()
    table = torch.zeros((V, V))
    good = {t for g, _ in NPI + QUANT for t in bpe.encode(tok, g)}
    bad_only = {t for _, b in NPI + QUANT for t in bpe.encode(tok, b)} - good
    table[:, sorted(bad_only)] = -20.0  # every token only bad sentences have is unlikely (a unigram model)
    got = BlimpEvaluator(blimp_dir, tok, n_ctx=32)(Bigram(table))
    assert got["blimp_acc"] == got["blimp_licensing_acc"] == 1.0


def test_licensing_phenomena_are_chosen(blimp_dir):
    tok = tokenizer()
    model = Bigram(torch.zeros((tok.get_vocab_size(),) * 2))
    got = BlimpEvaluator(blimp_dir / "plain.jsonl", tok, 32)(model)
    assert "blimp_licensing_acc" not in got  # no licensing phenomenon in the file
    assert "blimp_licensing_acc" in BlimpEvaluator(blimp_dir / "plain.jsonl", tok, 32, licensing=("plain",))(model)


@pytest.mark.parametrize("line, why", [
    ("{not json", r"bad.jsonl:2: not a JSON object"),
    ("[1, 2]", r"bad.jsonl:2: not a JSON object \(a list\)"),
    (json.dumps({"sentence_bad": "a b ."}), r"bad.jsonl:2: 'sentence_good' is missing"),
    (json.dumps({"sentence_good": "a b .", "sentence_bad": 3}), r"bad.jsonl:2: 'sentence_bad' is missing or not"),
    (json.dumps({"sentence_good": "a .", "sentence_bad": "b .", "UID": ""}), r"bad.jsonl:2: 'UID' must be"),
])
def test_a_malformed_line_is_one_error_naming_it(tmp_path, line, why):
    good = json.dumps({"sentence_good": "the cat ran .", "sentence_bad": "the cat than ."})
    (tmp_path / "bad.jsonl").write_text(good + "\n" + line + "\n")
    with pytest.raises(ConfigError, match=why):
        read_pairs(tmp_path)


def test_missing_or_empty_files_and_long_sentences(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_pairs(tmp_path / "none")
    with pytest.raises(ConfigError, match="holds no .jsonl files"):
        read_pairs(tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ConfigError, match="holds no minimal pairs"):
        read_pairs(tmp_path)
    _write(tmp_path / "empty.jsonl", [("the cat ran . " * 20, "the cat than .")])
    with pytest.raises(InputError, match=r"empty.jsonl:1: sentence_good is \d+ tokens, longer than"):
        BlimpEvaluator(tmp_path, tokenizer(), n_ctx=16)
