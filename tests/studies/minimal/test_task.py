import numpy as np

from tinyscope.studies.minimal.task import PLUS, PlusLastEven, PlusLastEvenConfig, generate_sequence, rule_targets


def slow_last_even(prefix):
    for tok in reversed(list(prefix)):
        if tok != PLUS and tok % 2 == 0:
            return int(tok)
    return None


def test_generated_sequences_obey_the_rule_by_direct_count():
    rng = np.random.default_rng(0)
    for _ in range(200):
        seq = generate_sequence(rng, 40)
        for t in range(1, len(seq)):
            if seq[t - 1] == PLUS:
                expected = slow_last_even(seq[: t - 1])
                if expected is not None:
                    assert seq[t] == expected
                else:  # the public code's fallback: a random even digit
                    assert seq[t] != PLUS and seq[t] % 2 == 0


def test_rule_targets_match_a_direct_scan():
    rng = np.random.default_rng(1)
    seq = generate_sequence(rng, 300)
    rt = rule_targets(seq)
    for t, tok in enumerate(seq):
        expected = slow_last_even(seq[:t]) if tok == PLUS else None
        assert rt[t] == (-1 if expected is None else expected)


def test_token_frequencies_match_the_process():
    seq = generate_sequence(np.random.default_rng(2), 200_000)
    # '+' is drawn with p=0.3 at unconstrained positions, which are a fraction 1/(1+0.3) of all.
    assert abs(np.mean(seq == PLUS) - 0.3 / 1.3) < 0.005


def test_same_seed_same_bytes_and_windows_are_corpus_slices():
    task = PlusLastEven(PlusLastEvenConfig(n_sequences=50, n_eval_sequences=20))
    a = task.sample(np.random.default_rng(5), 16)
    b = task.sample(np.random.default_rng(5), 16)
    assert a.tokens.tobytes() == b.tokens.tobytes()
    np.testing.assert_array_equal(a.tokens[:, 1:], a.targets[:, :-1])
    joined = [" ".join(map(str, s)) for s in task.corpus]
    for row in np.concatenate([a.tokens, a.targets[:, -1:]], axis=1):
        assert any(" ".join(map(str, row)) in s for s in joined)


def test_eval_set_rows_point_at_constrained_positions_with_their_targets():
    task = PlusLastEven(PlusLastEvenConfig(n_sequences=10, n_eval_sequences=30))
    ev = task.eval_set()
    q, target = ev.meta["query"], ev.meta["target"]
    assert (ev.tokens[np.arange(len(ev)), q] == PLUS).all()
    assert (ev.targets[np.arange(len(ev)), q] == target).all()
    n_constrained = sum(int((rule_targets(s)[:-1] >= 0).sum()) for s in task.heldout)
    assert len(ev) == n_constrained
    assert task.eval_fingerprint() == PlusLastEven(task.cfg).eval_fingerprint()
