"""TraceRelay's formal tasks: samplers obey their constraints and match slow direct counts."""
import itertools
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from tinyscope.errors import ConfigError
from tinyscope.studies.tracerelay.task import (
    BoundedDyck,
    DyckConfig,
    EqualRepeats,
    EqualRepeatsConfig,
    MostFreq,
    MostFreqConfig,
    dyck,
    dyck_batch,
    dyck_completion_counts,
    dyck_open_probability,
    dyck_slices,
    equal_repeats,
    equal_repeats_label,
    most_freq_ranking,
    relative_gaps,
    scaled_counts,
    separated_counts,
)


# ----------------------------------------------------------------------------- Equal Repeats
def string_of(a: int, b: int, c: int) -> str:
    return "0" * a + "1" * b + "0" * c


def test_equal_repeats_class_balance_and_majority_baseline():
    _, labels, _ = equal_repeats(np.random.default_rng(20261006), 10_000, 256)
    counts = np.bincount(labels, minlength=3)
    assert counts.tolist() == [3333, 3333, 3334]
    assert counts.max() / counts.sum() == pytest.approx(0.3334)


@pytest.mark.parametrize("T", [2, 3, 9, 32, 257])
def test_equal_repeats_strings_and_labels(T):
    tokens, labels, runs = equal_repeats(np.random.default_rng(T), 300, T)
    assert tokens.shape == (300, T)
    for row, label, r in zip(tokens, labels, runs):
        a, b, c = map(int, r)
        assert "".join(map(str, row)) == string_of(a, b, c) and a + b + c == T and min(a, b, c) >= 0
        relation = {0: a == b, 1: b == c, 2: a == c}
        assert relation[int(label)]
        if a == b == c:
            assert label == 0  # the all-equal case goes to class 0
    # families use the inclusive range [1, T // 2]: empty runs occur at even T
    assert equal_repeats_label(np.array([2]), np.array([2]), np.array([2]))[0] == 0


def test_equal_repeats_all_equal_relabel_happens():
    _, labels, runs = equal_repeats(np.random.default_rng(0), 3000, 3)  # T = 3: a = 1 makes (1, 1, 1)
    all_equal = (runs[:, 0] == runs[:, 1]) & (runs[:, 1] == runs[:, 2])
    assert all_equal.any() and (labels[all_equal] == 0).all()


def test_equal_repeats_batches_target_the_final_position():
    task = EqualRepeats(EqualRepeatsConfig(10, 20))
    b = task.sample(np.random.default_rng(1), 9)
    T = b.tokens.shape[1]
    assert 10 <= T <= 20
    assert b.loss_mask[:, -1].all() and b.loss_mask.sum() == 9
    assert (b.targets[:, -1] == b.meta["label"]).all()
    again = task.eval_set(64, 30, seed=5)
    assert again.fingerprint() == task.eval_set(64, 30, seed=5).fingerprint() != task.eval_set(64, 30, 6).fingerprint()
    with pytest.raises(ConfigError):
        EqualRepeatsConfig(40, 20)


# ----------------------------------------------------------------------------- Dyck
def all_dyck_strings(T: int, k: int, m: int) -> list[tuple[int, ...]]:
    """Every bounded Dyck-(k, m) string of length T, by brute force."""
    out = []
    for seq in itertools.product(range(2 * k), repeat=T):
        stack, ok = [], True
        for tok in seq:
            if tok < k:
                stack.append(tok)
                ok = len(stack) <= m
            else:
                ok = bool(stack) and stack.pop() == tok - k
            if not ok:
                break
        if ok and not stack:
            out.append(seq)
    return out


def test_completion_counts_match_enumeration():
    N = dyck_completion_counts(8, 2)
    for T in (2, 4, 6, 8):
        assert N[T][0] == len(all_dyck_strings(T, 1, 2))
    assert dyck_completion_counts(10, 10)[10][0] == 42  # unbounded depth: Catalan(5)


def test_dyck_sampler_is_uniform_over_bounded_strings():
    T, k, m = 6, 2, 2
    support = all_dyck_strings(T, k, m)
    assert len(support) == dyck_completion_counts(T, m)[T][0] * k ** (T // 2)
    n = 40 * len(support)
    tokens, _, _ = dyck(np.random.default_rng(0), n, T, k, m)
    counts = Counter(map(tuple, tokens))
    assert set(counts) <= set(support)
    observed = [counts[s] for s in support]
    assert chisquare(observed).pvalue > 1e-3


def test_fair_coin_dyck_sampler_is_not_uniform_and_ours_is():
    """The chi-square check has power: opening with probability 1/2 whenever the string can
    still be completed (a common sampler) fails it on the same support."""
    T, k, m = 10, 1, 3
    support = all_dyck_strings(T, k, m)
    n = 200 * len(support)
    ours = Counter(map(tuple, dyck(np.random.default_rng(2), n, T, k, m)[0]))
    assert chisquare([ours[s] for s in support]).pvalue > 1e-3
    rng, coin = np.random.default_rng(1), Counter()
    for _ in range(n):
        seq, depth = [], 0
        for t in range(T):
            can_open, can_close = depth < m and depth + 1 <= T - t - 1, depth > 0
            if can_open and (not can_close or rng.random() < 0.5):
                seq.append(0)
                depth += 1
            else:
                seq.append(1)
                depth -= 1
        coin[tuple(seq)] += 1
    assert set(coin) == set(support)
    assert chisquare([coin[s] for s in support]).pvalue < 1e-3


def slow_dyck_targets(row: np.ndarray, k: int):
    """Per position: (is close, matched type, distance, pre-close depth) by an explicit stack."""
    stack, out = [], []
    for t, tok in enumerate(row):
        if tok < k:
            stack.append((tok, t))
            out.append((False, 0, 0, 0))
        else:
            depth = len(stack)
            typ, pos = stack.pop()
            assert typ == tok - k
            out.append((True, typ, t - pos, depth))
    assert not stack
    return out


def test_dyck_batch_targets_distances_and_depths():
    task = BoundedDyck(DyckConfig(k=3, m=4, min_len=10, max_len=30))
    b = task.sample(np.random.default_rng(3), 20)
    T = b.tokens.shape[1]
    assert T % 2 == 0 and 10 <= T <= 30
    for i, row in enumerate(b.tokens):
        info = slow_dyck_targets(row, 3)
        assert max(len([1 for x in info[:t + 1] if not x[0]]) - len([1 for x in info[:t + 1] if x[0]])
                   for t in range(T)) <= 4
        for t in range(T - 1):
            is_close, typ, dist, depth = info[t + 1]
            assert b.loss_mask[i, t] == is_close
            if is_close:
                assert (b.targets[i, t], b.meta["distance"][i, t], b.meta["depth"][i, t]) == (typ, dist, depth)
        assert not b.loss_mask[i, -1]


def test_dyck_probabilities_stay_finite_at_long_lengths():
    P = dyck_open_probability(4096, 10)
    assert np.isfinite(P).all() and P[4096, 0] == 1.0 and (P[:, 10] == 0).all()
    tokens, _, depth = dyck(np.random.default_rng(0), 3, 4096, 8, 10)
    assert depth.max() <= 10


def test_dyck_slices_count_every_close_once():
    tokens, dist, depth = dyck(np.random.default_rng(4), 30, 64, 2, 5)
    b = dyck_batch(tokens, dist, depth, 2)
    correct = np.random.default_rng(5).random(tokens.shape) < 0.7
    s = dyck_slices(correct, b, 5)
    assert sum(c["count"] for c in s["distance"].values()) == b.loss_mask.sum()
    assert sum(c["count"] for c in s["depth"].values()) == b.loss_mask.sum()
    assert s["distance"][">2048"] == {"count": 0, "acc": None}  # empty bins are missing, not zero
    sel = b.loss_mask & (b.meta["depth"] == 1)
    assert s["depth"]["1"]["acc"] == pytest.approx(correct[sel].mean())


# ----------------------------------------------------------------------------- Most-Freq
@pytest.mark.parametrize("T", [45, 46, 128, 1024])
def test_separated_counts_constraints(T):
    rng = np.random.default_rng(T)
    for _ in range(200):
        c = separated_counts(rng, 5, 4, T)
        assert c.sum() == T and (c >= 1).all() and (np.diff(c) >= 4).all()


def test_separated_counts_rejects_short_sources():
    with pytest.raises(ConfigError, match="45"):
        separated_counts(np.random.default_rng(0), 5, 4, 44)
    with pytest.raises(ConfigError):
        MostFreqConfig(min_len=40)


def test_most_freq_sequences_and_rankings():
    task = MostFreq(MostFreqConfig())
    assert (task.vocab_size, task.n_out) == (8, 6)
    b = task.sample(np.random.default_rng(6), 16)
    T = int(b.meta["source_len"][0])
    assert 128 <= T <= 256 and b.tokens.shape == (16, T + 6)
    for row, tgt, mask, rank in zip(b.tokens, b.targets, b.loss_mask, b.meta["ranking"]):
        src = row[:T]
        counts = np.bincount(src, minlength=5)
        assert (counts >= 1).all() and (np.diff(np.sort(counts)) >= 4).all()
        assert list(rank) == sorted(range(5), key=lambda s: -counts[s])
        assert row[T] == task.SEP and list(row[T + 1:]) == list(rank)
        assert list(tgt[mask]) == list(rank) + [task.EOS_OUT] and mask.sum() == 6 and mask[T:].all()


def test_ranking_breaks_ties_by_first_appearance():
    assert most_freq_ranking(np.array([3, 1, 1, 3, 2]), 5).tolist() == [3, 1, 2]


def test_shortcut_baselines_and_scores_by_hand():
    task = MostFreq(MostFreqConfig())
    E = task.EOS_OUT
    src = np.array([[4, 4, 2, 0, 2, 2] + [1] * 3 + [3] * 2])
    assert task.baseline_fixed_order(src).tolist() == [[0, 1, 2, 3, 4, E]]
    assert task.baseline_first_appearance(src).tolist() == [[4, 2, 0, 1, 3, E]]
    assert task.baseline_suffix_frequency(src, window=5).tolist() == [[1, 3, E, E, E, E]]
    rank = np.array([[2, 1, 4, 3, 0]])
    outputs = np.array([[2, 1, 4, 3, 0, E], [2, 4, 1, 3, 0, E], [2, 1, 4, 3, 0, 0], [1, 2, E, 0, 0, 0]])
    s = task.score(outputs, np.repeat(rank, 4, 0))
    assert s == {"exact": 0.25, "top1": 0.75, "top2": 0.5, "set_exact": 0.5, "termination": 0.75}


def slow_counts(row) -> list[int]:
    """Counts of symbols 0..4 in one source, by a plain loop (independent of np.bincount)."""
    c = Counter(int(x) for x in row)
    return [c.get(s, 0) for s in range(5)]


@pytest.mark.parametrize("T", [512, 1000, 1024])
def test_kept_gap_sets_keep_the_reference_relative_gaps(T):
    ref, n = 256, 64
    plain = MostFreq(MostFreqConfig()).eval_set(T, n, 7)
    kept_task = MostFreq(MostFreqConfig(gaps_from=ref))
    kept = kept_task.eval_set(T, n, 7)
    plain_counts = np.array([slow_counts(r[:T]) for r in plain.tokens])
    kept_counts = np.array([slow_counts(r[:T]) for r in kept.tokens])
    # the same draw at the reference length, rescaled: each count within rounding of T/ref times it
    ref_counts = np.sort(np.array([separated_counts(np.random.default_rng(i), 5, 4, ref) for i in range(n)]), 1)
    for i in range(n):
        c = scaled_counts(np.random.default_rng(i), 5, 4, T, ref)
        assert c.sum() == T and np.abs(c - ref_counts[i] * T / ref).max() < 1
    assert (kept_counts.sum(1) == T).all() and (np.diff(np.sort(kept_counts, 1), axis=1) >= 4 * T // ref - 1).all()
    ref_gaps = relative_gaps(np.array([slow_counts(r[:ref]) for r in MostFreq(MostFreqConfig()).eval_set(ref, n, 7).tokens]))
    # kept-gap sets hold the reference's distribution of relative gaps; the plain sampler's shrink
    assert abs(np.median(relative_gaps(kept_counts)) - np.median(ref_gaps)) < 0.35 * np.median(ref_gaps)
    assert np.median(relative_gaps(plain_counts)) < 0.7 * np.median(relative_gaps(kept_counts))
    for row, rank in zip(kept.tokens, kept.meta["ranking"]):
        assert list(rank) == list(most_freq_ranking(row[:T], 5)) == sorted(range(5), key=lambda s: -slow_counts(row[:T])[s])
    # lengths up to the reference are untouched
    assert np.array_equal(kept_task.eval_set(ref, 8, 7).tokens, MostFreq(MostFreqConfig()).eval_set(ref, 8, 7).tokens)


def test_gaps_from_is_checked():
    with pytest.raises(ConfigError, match="gaps_from"):
        MostFreqConfig(gaps_from=20)
