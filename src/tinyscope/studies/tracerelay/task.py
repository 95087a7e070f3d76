"""TraceRelay's formal tasks (paper 001, Sec. 3 and App. A): Equal Repeats, bounded Dyck-(k, m)
and Most-Freq, with exact samplers, fixed evaluation sets, diagnostics and shortcut baselines.

Every sampler takes an explicit ``numpy.random.Generator``; a training batch shares one
sampled length (App. A: "Each online batch shares one sampled source length"). Evaluation sets
are drawn from ``default_rng([seed, length])`` so they are fixed by (seed, length) and shared
across models; :func:`tinyscope.tasks.base.fingerprint` identifies them.

**Equal Repeats** (historical generator of Deletang et al.): a third of each batch per family,
``0^a 1^a 0^(T-2a)`` (class 0, a = b), ``0^(T-2a) 1^a 0^a`` (class 1, b = c),
``0^n 1^(T-2n) 0^n`` (class 2, a = c), with ``a, n`` uniform in ``[1, T // 2]``; empty runs are
kept and an all-equal string is relabelled class 0. A batch of n rows has n//3, n//3 and the
rest in classes 0, 1, 2 (10,000 examples: 3333, 3333, 3334). Target: the class at the final
position (``loss_mask`` marks only that position).

**Bounded Dyck-(k, m)**: tokens ``0..k-1`` open type i, ``k..2k-1`` close type i. Uniform over
all bounded strings of length T: open/close is drawn with probability proportional to the
completion counts ``N[i][d]`` (ways to finish from depth d with i tokens left, depth in
[0, m], ending at 0), and opening types are uniform (every string of length T has T/2 opens, so
this is uniform over strings). Targets: at t, the closing type of token t+1, only where t+1
closes. Meta: ``distance`` (close position - matching opener position) and ``depth`` (stack
depth just before the close) at the target position.

**Most-Freq** (after Weiss et al.'s sort_by_most_freq): V source symbols with separated counts
(all positive, adjacent gap >= g, requiring T >= V + g V (V-1) / 2), built as minimum counts
``1 + g j`` plus sorted random extras (each remaining token assigned to a uniform symbol), random symbol
labels and a random order. Sequence: source, SEP, ranking (descending count, ties by first
appearance); the targets are the ranking then EOS (V + 1 output tokens). Input ids: symbols
``0..V-1``, ``SEP = V``, ``EOS = V + 1`` (reserved: the model never reads it back) and
``PAD = V + 2`` (V + 3 = 8 input ids for V = 5). Output ids: symbols ``0..V-1`` and
``EOS_OUT = V`` (V + 1 = 6 classes). This matches Table 5's counts (8 in, 6 out).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tinyscope.errors import check
from tinyscope.tasks.base import Batch, fingerprint


def _lengths(rng: np.random.Generator, lo: int, hi: int, even: bool = False) -> int:
    if even:
        return 2 * int(rng.integers(-(-lo // 2), hi // 2 + 1))
    return int(rng.integers(lo, hi + 1))


def eval_rng(seed: int, length: int, stream: int | None = None) -> np.random.Generator:
    """The generator of a fixed evaluation set at ``length``: ``default_rng([seed, length])``, or
    ``default_rng([seed, length, stream])`` for a separate family of sets (the fresh sets of
    `tinyscope eval RUN --seed S`), which no plain seed reproduces."""
    return np.random.default_rng([int(seed), int(length)] + ([] if stream is None else [int(stream)]))


# ----------------------------------------------------------------------------- Equal Repeats
def equal_repeats_label(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Class of ``0^a 1^b 0^c``: 0 if a == b (all-equal included), 1 if b == c, 2 if a == c, else -1."""
    return np.where(a == b, 0, np.where(b == c, 1, np.where(a == c, 2, -1)))


def equal_repeats(rng: np.random.Generator, n: int, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` strings of ``length``: tokens (n, T) int64, labels (n,), runs (n, 3) = (a, b, c)."""
    T = int(length)
    check(T >= 2, f"Equal Repeats needs length >= 2, got {T}")
    n0 = n1 = n // 3
    n2 = n - n0 - n1
    r0 = rng.integers(1, T // 2 + 1, size=n0)
    r1 = rng.integers(1, T // 2 + 1, size=n1)
    r2 = rng.integers(1, T // 2 + 1, size=n2)
    runs = np.concatenate([np.stack([r0, r0, T - 2 * r0], 1),
                           np.stack([T - 2 * r1, r1, r1], 1),
                           np.stack([r2, T - 2 * r2, r2], 1)]).astype(np.int64)  # (n, 3)
    pos = np.arange(T)[None, :]
    a, b = runs[:, :1], runs[:, 1:2]
    tokens = ((pos >= a) & (pos < a + b)).astype(np.int64)  # (n, T)
    family = np.repeat(np.arange(3), [n0, n1, n2])
    labels = np.where((runs[:, 0] == runs[:, 1]) & (runs[:, 1] == runs[:, 2]), 0, family).astype(np.int64)
    return tokens, labels, runs


def final_position_batch(tokens: np.ndarray, labels: np.ndarray, meta: dict | None = None) -> Batch:
    """Classification at the final position: target and loss mask only at t = T - 1."""
    n, T = tokens.shape
    targets = np.zeros((n, T), np.int64)
    targets[:, -1] = labels
    mask = np.zeros((n, T), bool)
    mask[:, -1] = True
    meta = dict(meta or {})
    meta.setdefault("label", labels)
    meta.setdefault("length", np.full(n, T, np.int64))
    return Batch(tokens, targets, mask, meta)


@dataclass
class EqualRepeatsConfig:
    min_len: int = 32
    max_len: int = 256

    def __post_init__(self):
        check(2 <= self.min_len <= self.max_len,
              f"task.min_len={self.min_len}, task.max_len={self.max_len}: need 2 <= min_len <= max_len")


class EqualRepeats:
    vocab_size = 2
    n_out = 3

    def __init__(self, cfg: EqualRepeatsConfig):
        self.cfg = cfg

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        T = _lengths(rng, self.cfg.min_len, self.cfg.max_len)
        tokens, labels, runs = equal_repeats(rng, batch_size, T)
        return final_position_batch(tokens, labels, {"runs": runs})

    def eval_set(self, length: int, n: int, seed: int, stream: int | None = None) -> Batch:
        tokens, labels, runs = equal_repeats(eval_rng(seed, length, stream), n, length)
        return final_position_batch(tokens, labels, {"runs": runs})


# ----------------------------------------------------------------------------- bounded Dyck
def dyck_completion_counts(n: int, m: int) -> list[list[int]]:
    """Exact ``N[i][d]`` for i = 0..n, d = 0..m (Python ints; for tests and small cases)."""
    N = [[0] * (m + 1) for _ in range(n + 1)]
    N[0][0] = 1
    for i in range(1, n + 1):
        for d in range(m + 1):
            N[i][d] = (N[i - 1][d + 1] if d + 1 <= m else 0) + (N[i - 1][d - 1] if d >= 1 else 0)
    return N


@lru_cache(maxsize=32)
def dyck_open_probability(n: int, m: int) -> np.ndarray:
    """``P[i, d]`` = probability of opening with i tokens left at depth d (uniform over paths).

    Rows of N are rescaled to max 1 as they are built (the ratio within a row is all that
    matters), so lengths in the tens of thousands stay in float64 range."""
    row = np.zeros(m + 3)  # depths -1 .. m+1 stored at 0 .. m+2 (the two ends stay 0)
    row[1] = 1.0
    P = np.zeros((n + 1, m + 1))
    for i in range(1, n + 1):
        up, down = row[2:m + 3], row[0:m + 1]  # N[i-1][d+1], N[i-1][d-1] for d = 0..m
        total = up + down
        with np.errstate(invalid="ignore", divide="ignore"):
            P[i] = np.where(total > 0, up / total, 0.0)
        new = np.zeros_like(row)
        new[1:m + 2] = total
        row = new / new.max()
    P.setflags(write=False)
    return P


def dyck(rng: np.random.Generator, n: int, length: int, k: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` uniform bounded Dyck-(k, m) strings of even ``length``.

    Returns tokens (n, T), distance (n, T) and depth (n, T); at a closing position c,
    ``distance[c] = c - opener`` and ``depth[c]`` = depth just before it (0 at opens)."""
    T = int(length)
    check(T % 2 == 0 and T >= 2, f"Dyck length must be even and >= 2, got {T}")
    P = dyck_open_probability(T, m)
    rows = np.arange(n)
    depth = np.zeros(n, np.int64)
    stack_type = np.zeros((n, m + 1), np.int64)
    stack_pos = np.zeros((n, m + 1), np.int64)
    tokens = np.zeros((n, T), np.int64)
    dist = np.zeros((n, T), np.int64)
    pre_depth = np.zeros((n, T), np.int64)
    for t in range(T):
        opens = rng.random(n) < P[T - t, depth]
        types = rng.integers(0, k, size=n)
        closes = ~opens
        top = np.maximum(depth - 1, 0)
        tokens[:, t] = np.where(opens, types, k + stack_type[rows, top])
        dist[:, t] = np.where(closes, t - stack_pos[rows, top], 0)
        pre_depth[:, t] = np.where(closes, depth, 0)
        stack_type[rows[opens], depth[opens]] = types[opens]
        stack_pos[rows[opens], depth[opens]] = t
        depth = depth + np.where(opens, 1, -1)
    return tokens, dist, pre_depth


def dyck_batch(tokens: np.ndarray, dist: np.ndarray, depth: np.ndarray, k: int) -> Batch:
    """Next-closing-type targets: at t, the type of token t+1 where it closes."""
    n, T = tokens.shape
    nxt = np.concatenate([tokens[:, 1:], np.zeros((n, 1), np.int64)], 1)  # (n, T)
    mask = np.concatenate([tokens[:, 1:] >= k, np.zeros((n, 1), bool)], 1)  # (n, T)
    targets = np.where(mask, nxt - k, 0)
    shift = lambda a: np.concatenate([a[:, 1:], np.zeros((n, 1), a.dtype)], 1)  # noqa: E731
    return Batch(tokens, targets, mask, {"distance": shift(dist), "depth": shift(depth),
                                         "length": np.full(n, T, np.int64)})


DISTANCE_BINS = [(1, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 512), (513, 1024),
                 (1025, 2048), (2049, None)]


def distance_bin_label(lo: int, hi: int | None) -> str:
    return f">{lo - 1}" if hi is None else f"{lo}-{hi}"


def dyck_slices(correct: np.ndarray, batch: Batch, max_depth: int) -> dict:
    """Close accuracy (fraction) and target counts by matching distance bin and pre-close depth.

    correct: (n, T) bool, read where ``batch.loss_mask``. Empty bins report accuracy None."""
    mask = batch.loss_mask
    dist, depth = batch.meta["distance"][mask], batch.meta["depth"][mask]
    ok = correct[mask]
    out = {"distance": {}, "depth": {}}
    for lo, hi in DISTANCE_BINS:
        sel = (dist >= lo) & ((dist <= hi) if hi is not None else True)
        cnt = int(sel.sum())
        out["distance"][distance_bin_label(lo, hi)] = {"count": cnt, "acc": float(ok[sel].mean()) if cnt else None}
    for d in range(1, max_depth + 1):
        sel = depth == d
        cnt = int(sel.sum())
        out["depth"][str(d)] = {"count": cnt, "acc": float(ok[sel].mean()) if cnt else None}
    return out


@dataclass
class DyckConfig:
    k: int = 8
    m: int = 10
    min_len: int = 32
    max_len: int = 256

    def __post_init__(self):
        check(self.k >= 1, f"task.k={self.k} must be >= 1")
        check(self.m >= 1, f"task.m={self.m} must be >= 1")
        check(2 <= self.min_len <= self.max_len and self.max_len >= 2 * (-(-self.min_len // 2)),
              f"task.min_len={self.min_len}, task.max_len={self.max_len}: need an even length in between")


class BoundedDyck:
    def __init__(self, cfg: DyckConfig):
        self.cfg = cfg
        self.vocab_size = 2 * cfg.k
        self.n_out = cfg.k

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        T = _lengths(rng, self.cfg.min_len, self.cfg.max_len, even=True)
        return dyck_batch(*dyck(rng, batch_size, T, self.cfg.k, self.cfg.m), self.cfg.k)

    def eval_set(self, length: int, n: int, seed: int, stream: int | None = None) -> Batch:
        return dyck_batch(*dyck(eval_rng(seed, length, stream), n, length, self.cfg.k, self.cfg.m), self.cfg.k)


# ----------------------------------------------------------------------------- Most-Freq
def min_most_freq_length(V: int, gap: int) -> int:
    return V + gap * V * (V - 1) // 2


def separated_counts(rng: np.random.Generator, V: int, gap: int, T: int) -> np.ndarray:
    """Increasing counts (V,) summing to T, all >= 1, adjacent gaps >= ``gap``."""
    base = 1 + gap * np.arange(V)  # (V,) minimum counts
    extra = T - int(base.sum())
    check(extra >= 0, f"Most-Freq needs length >= {min_most_freq_length(V, gap)} for V={V}, gap={gap}; got {T}")
    parts = rng.multinomial(extra, np.full(V, 1.0 / V))  # each extra token goes to a uniform symbol
    return base + np.sort(parts)


def scaled_counts(rng: np.random.Generator, V: int, gap: int, T: int, reference: int) -> np.ndarray:
    """Counts (V,) summing to T with the relative gaps of a draw at length ``reference``:
    ``c = separated_counts(reference) * T / reference``, floors plus one to the largest
    fractional parts (exact multiples when ``T`` is a multiple of ``reference``)."""
    ref = separated_counts(rng, V, gap, reference).astype(np.float64)  # (V,) increasing
    exact = ref * T / reference  # (V,)
    counts = np.floor(exact).astype(np.int64)
    short = T - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
    return counts


def relative_gaps(counts: np.ndarray) -> np.ndarray:
    """The smallest gap between two counts of each row over the row's mean count: (n, V) -> (n,)."""
    c = np.sort(np.asarray(counts, np.float64), axis=-1)
    return np.diff(c, axis=-1).min(-1) / c.mean(-1)


def most_freq_ranking(source: np.ndarray, V: int) -> np.ndarray:
    """Present symbols by descending count, ties by first appearance (RASP sort_by_most_freq)."""
    counts = np.bincount(source, minlength=V)[:V]
    present = np.flatnonzero(counts)
    first = np.array([np.argmax(source == s) for s in present])
    order = np.lexsort((first, -counts[present]))
    return present[order]


@dataclass
class MostFreqConfig:
    V: int = 5
    gap: int = 4
    min_len: int = 128
    max_len: int = 256
    gaps_from: int | None = None  # evaluation sets longer than this keep its relative count gaps

    def __post_init__(self):
        check(self.V >= 1, f"task.V={self.V} must be >= 1")
        check(self.gaps_from is None or self.gaps_from >= min_most_freq_length(self.V, self.gap),
              f"task.gaps_from={self.gaps_from} must be None or >= V + gap*V(V-1)/2 = "
              f"{min_most_freq_length(self.V, self.gap)}")
        check(self.gap >= 0, f"task.gap={self.gap} must be >= 0")
        check(self.min_len <= self.max_len, f"task.min_len={self.min_len} must be <= task.max_len={self.max_len}")
        lo = min_most_freq_length(self.V, self.gap)
        check(self.min_len >= lo, f"task.min_len={self.min_len} must be >= V + gap*V(V-1)/2 = {lo}")


class MostFreq:
    def __init__(self, cfg: MostFreqConfig):
        self.cfg = cfg
        V = cfg.V
        self.SEP, self.EOS, self.PAD, self.EOS_OUT = V, V + 1, V + 2, V
        self.vocab_size, self.n_out = V + 3, V + 1

    def sources(self, rng: np.random.Generator, n: int, T: int,
                gaps_from: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Sources (n, T) and their rankings (n, V); ``gaps_from`` = R < T: counts of
        :func:`scaled_counts` (length R's relative gaps)."""
        V = self.cfg.V
        src = np.zeros((n, T), np.int64)
        rank = np.zeros((n, V), np.int64)
        scaled = gaps_from is not None and T > gaps_from
        for i in range(n):
            counts = (scaled_counts(rng, V, self.cfg.gap, T, gaps_from) if scaled
                      else separated_counts(rng, V, self.cfg.gap, T))  # increasing
            src[i], rank[i] = self.arrange(rng, counts)
        return src, rank

    def arrange(self, rng: np.random.Generator, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One source with distinct increasing ``counts`` (V,): symbols assigned to the counts at
        random, tokens in random order; returns it (T,) and its ranking (V,)."""
        labels = rng.permutation(self.cfg.V)  # symbol labels[j] gets counts[j]
        return rng.permutation(np.repeat(labels, counts)), labels[::-1]  # distinct counts: no tie rule

    def batch(self, src: np.ndarray, rank: np.ndarray) -> Batch:
        """Teacher-forced sequences: source, SEP, ranking; targets ranking + EOS from SEP on."""
        n, T = src.shape  # rank: (n, V)
        tokens = np.concatenate([src, np.full((n, 1), self.SEP), rank], 1)  # (n, T + 1 + V)
        targets = np.zeros_like(tokens)
        targets[:, T:] = np.concatenate([rank, np.full((n, 1), self.EOS_OUT)], 1)
        mask = np.zeros(tokens.shape, bool)
        mask[:, T:] = True
        return Batch(tokens, targets, mask, {"source_len": np.full(n, T, np.int64), "ranking": rank})

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        T = _lengths(rng, self.cfg.min_len, self.cfg.max_len)
        return self.batch(*self.sources(rng, batch_size, T))

    def eval_set(self, length: int, n: int, seed: int, stream: int | None = None) -> Batch:
        """The fixed set at ``length``; above ``cfg.gaps_from`` with that length's relative gaps."""
        return self.batch(*self.sources(eval_rng(seed, length, stream), n, length, self.cfg.gaps_from))

    # ------------------------------------------------------------ baselines and metrics
    def with_eos(self, ranking: list[np.ndarray]) -> np.ndarray:
        """Rankings of up to V symbols -> (n, V + 1) outputs ending in EOS (padded with EOS)."""
        out = np.full((len(ranking), self.cfg.V + 1), self.EOS_OUT, np.int64)
        for i, r in enumerate(ranking):
            out[i, :len(r)] = r
        return out

    def baseline_fixed_order(self, src: np.ndarray) -> np.ndarray:
        return self.with_eos([np.arange(self.cfg.V)] * len(src))

    def baseline_first_appearance(self, src: np.ndarray) -> np.ndarray:
        return self.with_eos([first_appearance_order(row) for row in src])

    def baseline_suffix_frequency(self, src: np.ndarray, window: int = 32) -> np.ndarray:
        return self.with_eos([most_freq_ranking(row[-window:], self.cfg.V) for row in src])

    def score(self, outputs: np.ndarray, ranking: np.ndarray) -> dict:
        """Percent-free fractions: full exact (ranking + EOS), top-1, top-2 prefix, set exact,
        termination. outputs: (n, n_new) generated output ids (EOS = ``EOS_OUT``)."""
        V = ranking.shape[1]
        n, n_new = outputs.shape
        gold = np.concatenate([ranking, np.full((len(ranking), 1), self.EOS_OUT)], 1)  # (n, V + 1)
        k = min(n_new, V + 1)
        full = (outputs[:, :V + 1] == gold).all(1) if n_new >= V + 1 else np.zeros(n, bool)
        is_eos = outputs == self.EOS_OUT
        terminated = is_eos.any(1)
        end = np.where(terminated, is_eos.argmax(1), n_new)
        set_exact = np.array([np.array_equal(np.sort(outputs[i, :end[i]]), np.sort(ranking[i])) for i in range(n)])
        return {"exact": float(full.mean()), "top1": float((outputs[:, 0] == gold[:, 0]).mean()),
                "top2": float((outputs[:, :min(2, k)] == gold[:, :min(2, k)]).all(1).mean()),
                "set_exact": float(set_exact.mean()), "termination": float(terminated.mean())}


def first_appearance_order(row: np.ndarray) -> np.ndarray:
    """Distinct values in order of first appearance."""
    _, first = np.unique(row, return_index=True)
    return row[np.sort(first)]


def batch_fingerprint(batch: Batch) -> str:
    return fingerprint(batch.tokens, batch.targets, batch.loss_mask)
