"""The npi licensing language: sampler against exact probabilities and a slow parse, ceilings
against Monte-Carlo counts, minimal pairs, config errors, and a tiny training run."""
import collections
import math

import numpy as np
import pytest

from tinyscope.cli import main
from tinyscope.errors import ConfigError
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.ncffn import licensing_npi as npi
from tinyscope.studies.ncffn.licensing import Licensing, LicensingConfig

GRAMMAR = npi.NPIGrammar(min_gap=0, max_gap=1, distractor_rate=0.3, max_depth=3, p_licensor=0.4, p_npi=0.7,
                         p_noise=0.1, mix=(1.0, 2.0, 3.0, 1.0))


def _slow_licensed(words: list[str]) -> bool:
    """Negators in scope, counted without the parser: ``not`` in prefixes, the head determiner
    (the word before the first noun), and nothing inside ``that ... ,``."""
    count, inside = 0, False
    first_noun = next(i for i, w in enumerate(words) if w in npi.NOUNS)
    for i, w in enumerate(words[:words.index("has")]):
        inside = (inside or w == "that" and i > first_noun) and w != ","
        if inside:
            continue
        count += w == "not" or (i == first_noun - 1 and w in npi.DE_QUANTIFIERS)
    return count % 2 == 1


def _skeleton(words):
    return tuple("N" if w in npi.NOUNS else "V" if w in npi.VERBS else "F" if w in npi.FILLERS else w for w in words)


def test_sampler_matches_exact_sentence_probabilities():
    rng, n = np.random.default_rng(0), 30_000
    counts, example = collections.Counter(), {}
    for _ in range(n):
        s = npi.sample_sentence(rng, GRAMMAR)
        counts[_skeleton(s.words)] += 1
        example[_skeleton(s.words)] = s.words
    total = 0.0
    for sk, c in counts.items():
        lexical = len(npi.NOUNS) ** sk.count("N") * len(npi.VERBS) ** sk.count("V") * len(npi.FILLERS) ** sk.count("F")
        p = math.exp(npi.sentence_logprob(example[sk], GRAMMAR)) * lexical  # every filling is equally likely
        total += p
        assert abs(c / n - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-4, (sk, c / n, p)
    assert abs(total - 1) < 1e-9  # the sample saw every skeleton: the exact probabilities sum to 1
    assert npi.sentence_logprob("the dog has ever ran quite .".split(), GRAMMAR) == -math.inf
    assert npi.sentence_logprob("it is not true that few dog has ever ran .".split(), GRAMMAR) == -math.inf


def test_licensing_matches_a_slow_parse_and_the_corpus_layout():
    g = npi.NPIGrammar(max_gap=4, max_depth=3)
    corpus = npi.generate_corpus(np.random.default_rng(1), 20_000, g)
    words = [npi.VOCAB[t] for t in corpus["tokens"]]
    starts = list(corpus["starts"]) + [len(words)]
    for a, b in zip(starts[:-1], starts[1:]):
        sent = words[a:b]
        parsed = npi.parse(sent)
        assert parsed is not None and sent[-1] == "."
        slot = np.flatnonzero(corpus["slot"][a:b])
        assert list(slot) == [parsed.slot] and corpus["licensor"][a + parsed.slot] == a
        assert parsed.licensed == _slow_licensed(sent)
        if not parsed.licensed:
            assert sent[parsed.slot] == "once"
        assert 0 <= parsed.gap <= 4 and parsed.n_prefix <= 3
    assert set(corpus["slot"][corpus["slot"] > 0]) == {1, 2, 3, 4}


@pytest.mark.parametrize("phenomenon", range(len(npi.PHENOMENA)))
def test_ceilings_match_a_monte_carlo_count(phenomenon):
    rng, n = np.random.default_rng(2 + phenomenon), 8_000
    hits = lic = 0
    for _ in range(n):
        s = npi.sample_sentence(rng, GRAMMAR, phenomenon)
        licensed = _slow_licensed(s.words)
        bayes = "ever" if (GRAMMAR.p_npi if licensed else GRAMMAR.p_noise) > 0.5 else "once"
        hits += bayes == s.words[s.slot]
        lic += licensed
    se = 4 * math.sqrt(0.25 / n)
    assert abs(lic / n - npi.licensed_probability(GRAMMAR, phenomenon)) < se
    assert abs(hits / n - npi.slot_ceiling(GRAMMAR, phenomenon)) < se
    assert npi.slot_ceiling(GRAMMAR, phenomenon) < 1


def test_minimal_pairs_flip_licensing_by_a_minimal_edit():
    rng = np.random.default_rng(3)
    sets = npi.phenomenon_sets(rng, npi.NPIGrammar(max_gap=3), 30)
    assert np.all(sets["bayes_pair_correct"] == 1.0)  # p_noise = 0: ungrammatical members have probability 0
    for ph, name in enumerate(npi.PHENOMENA):
        for _ in range(30):
            good, bad = npi.minimal_pair(rng, GRAMMAR, ph)
            assert npi.parse(good).licensed and not npi.parse(bad).licensed
            assert good[-3] == bad[-3] == "ever" and len(good) == len(bad)
            changed = [i for i, (a, b) in enumerate(zip(good, bad)) if a != b]
            assert 1 <= len(changed) <= (2 if name == "distractor" else 1)
            if name == "distractor":
                assert bad[:4:3] == ["the", "no"]  # the licensor sits out of scope
            assert npi.parse(good).phenomenon in ((0, 3) if good[0] == "no" and ph in (0, 3) else (ph,))
    rows = sets["pair_good"]
    assert np.all(sets["role"][rows] == 1) and np.all(sets["role"][rows + 1] == 2)
    tok = sets["tokens"]
    assert np.all(tok[np.arange(len(tok)), sets["length"] - 1] == npi.ID["."])
    assert np.all(np.isin(tok[np.arange(len(tok)), sets["slot"]], [npi.ID["ever"], npi.ID["once"]]))
    # with speaker errors the grammar itself can rank a pair wrong: distance pairs at p_licensor 0.1
    noisy = npi.NPIGrammar(p_licensor=0.1, p_npi=0.6, p_noise=0.4)
    good, bad = npi.minimal_pair(rng, noisy, 0)
    assert npi.sentence_logprob(good, noisy) < npi.sentence_logprob(bad, noisy)


def test_config_errors_name_the_field_and_print_one_line(capsys):
    for kw, needle in [({"language": "blimp"}, "task.language='blimp'"), ({"mix": [1, 1]}, "task.mix=[1, 1]"),
                       ({"min_gap": 5, "max_gap": 3}, "task.min_gap=5"), ({"p_npi": 1.5}, "task.p_npi=1.5"),
                       ({"max_depth": 0}, "task.max_depth=0"),
                       ({"language": "npi", "max_depth": 8, "block_size": 32}, "task.block_size=32")]:
        with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
            LicensingConfig(**kw)
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["run", "ncffn-lm", "--preset", "smoke", "--set", "task.language=npi",
                               "--set", "task.max_depth=9", "--dry-run"]))
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and "task.max_depth=9" in err


def test_task_uses_its_own_vocabulary_and_held_out_streams():
    cfg = LicensingConfig(language="npi", n_train_tokens=3000, n_val_tokens=1000, block_size=32, max_gap=3,
                          n_eval_pairs=5)
    task = Licensing(cfg)
    assert task.vocab is npi.VOCAB and task.vocab_size == len(npi.VOCAB)
    b = task.sample(np.random.default_rng(0), 4)
    assert b.tokens.max() < task.vocab_size and np.array_equal(b.tokens[:, 1:], b.targets[:, :-1])
    assert task.eval_fingerprint() == Licensing(cfg).eval_fingerprint()
    assert task.eval_fingerprint() != Licensing(cfg, eval_seed=5).eval_fingerprint()
    assert Licensing(LicensingConfig(n_train_tokens=3000, n_val_tokens=1000, block_size=32)).vocab_size == \
        Licensing.vocab_size


def test_tiny_training_run_writes_per_phenomenon_metrics(tmp_path):
    res = run_experiment("ncffn-lm", "smoke", overrides=["task.language=npi", "task.n_eval_pairs=20",
                                                         "train.steps=20", "model.ffn=nc", "quant.layers=0"],
                         out=tmp_path / "r", progress=False)
    m = res["metrics"]
    for name in npi.PHENOMENA:
        assert 0 <= m[f"slot_acc_{name}"] <= 1 and 0 <= m[f"pair_acc_{name}"] <= 1
        assert m[f"slot_acc_bayes_{name}"] == npi.slot_ceiling(npi.NPIGrammar(max_gap=3), npi.PHENOMENA.index(name))
        assert m[f"pair_acc_bayes_{name}"] == 1.0
    assert "detector_npi" not in m and math.isfinite(m["val_loss"]) and m["n_quantifier_units"] == 8
