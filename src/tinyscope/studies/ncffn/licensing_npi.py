"""The ``npi`` licensing language: NPI licensing at a distance, out of scope, under nested negation
and by quantifiers, with an exact Bayes ceiling and minimal pairs per phenomenon.

Each sentence belongs to one phenomenon (drawn with weights ``mix``) and ends in the slot
``has SLOT V .``, where SLOT is the negative-polarity item ``ever`` or the neutral ``once``::

    distance     DET N GAP has SLOT V .
    distractor   DET N that DET2 N V , GAP has SLOT V .
    nested       (it is NEG true that)^k DET N GAP has SLOT V .        k in [1, max_depth]
    quantifier   Q N GAP has SLOT V .

DET is the licensor ``no`` (probability ``p_licensor``) or ``the``; DET2, inside the relative
clause and so out of scope, is ``no`` with probability ``distractor_rate`` (a licensor-looking
distractor); NEG is ``not`` or ``so`` (1/2 each); Q is uniform over :data:`QUANTIFIERS`, of which
the downward-entailing :data:`DE_QUANTIFIERS` license; GAP is d filler adverbs, d uniform in
[min_gap, max_gap]. The slot is *licensed* (L = 1) when the number of negators in scope is odd:

* distance, distractor: L = [DET = no] (DET2 never counts);
* nested: L = ([DET = no] + #{NEG = not}) mod 2, so ``not ... no ...`` cancels;
* quantifier: L = [Q in DE_QUANTIFIERS].

A licensed slot holds ``ever`` with probability ``p_npi`` (else ``once``), an unlicensed one with
probability ``p_noise`` (a speaker error; 0 by default). Nouns, verbs and fillers are uniform.

Bayes ceiling of the top-1 accuracy at the slot, per phenomenon (the prefix fixes L exactly)::

    ceiling = P(L=1) max(p_npi, 1 - p_npi) + P(L=0) max(p_noise, 1 - p_noise)

with P(L=1) = p_licensor (distance, distractor), |DE|/|Q| (quantifier), and for nested
(1/D) sum_k (1 - (1 - 2 p_licensor)(1 - 2 * 1/2)^k) / 2 = 1/2 (parity of k+1 independent bits
of which k are fair). Minimal pairs (BLiMP's design): a licensed sentence with ``ever`` against
the same sentence edited to be unlicensed (distance: no -> the; distractor: DET -> the and
DET2 -> no, the licensor moved out of scope; nested: one NEG flipped; quantifier: a DE quantifier
replaced by a non-DE one); the preferred member has the higher total log-probability, and the
pair ceiling is the share of pairs the generator itself (:func:`sentence_logprob`) ranks right.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PHENOMENA = ("distance", "distractor", "nested", "quantifier")
NOUNS = "dog cat fox bird horse child teacher farmer doctor king queen student".split()
VERBS = "slept ran sang left waited smiled laughed fell".split()
FILLERS = "really often today again quite still there here now later indeed surely".split()
DE_QUANTIFIERS = ("no", "few")
QUANTIFIERS = DE_QUANTIFIERS + ("some", "many", "every", "each")
SLOT_WORDS = ("ever", "once")
VOCAB = [".", ",", "that", "it", "is", "true", "not", "so", "has", "the"] + list(SLOT_WORDS) + list(QUANTIFIERS) \
    + NOUNS + VERBS + FILLERS
ID = {w: i for i, w in enumerate(VOCAB)}
PREFIX_LEN = 5  # "it is NEG true that"


@dataclass(frozen=True)
class NPIGrammar:
    """The generator's parameters (the fields of the same names in ``LicensingConfig``)."""

    min_gap: int = 0
    max_gap: int = 6
    distractor_rate: float = 0.5
    max_depth: int = 2
    p_licensor: float = 0.5
    p_npi: float = 0.8
    p_noise: float = 0.0
    mix: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)

    @property
    def weights(self) -> np.ndarray:
        w = np.asarray(self.mix, dtype=float)
        return w / w.sum()

    @property
    def max_sentence_len(self) -> int:
        body = 2 + self.max_gap + 4  # DET N GAP has SLOT V .
        return max(body + 5, body + PREFIX_LEN * self.max_depth)  # + relative clause, or + k prefixes


@dataclass
class Sentence:
    words: list[str]
    phenomenon: int   # index into PHENOMENA
    slot: int         # index of SLOT in words
    licensed: bool


def _pick(rng: np.random.Generator, words) -> str:
    return words[int(rng.integers(len(words)))]


def sample_sentence(rng: np.random.Generator, g: NPIGrammar, phenomenon: int | None = None,
                    licensed: bool | None = None) -> Sentence:
    """One sentence from the grammar (phenomenon drawn from ``mix`` unless given); ``licensed``
    given: drawn from the grammar conditioned on L (by rejection), with ``ever`` at the slot."""
    while True:
        ph = int(rng.choice(len(PHENOMENA), p=g.weights)) if phenomenon is None else phenomenon
        head: list[str] = []
        negators = 0
        if PHENOMENA[ph] == "nested":
            for _ in range(int(rng.integers(1, g.max_depth + 1))):
                neg = "not" if rng.random() < 0.5 else "so"
                negators += neg == "not"
                head += ["it", "is", neg, "true", "that"]
        if PHENOMENA[ph] == "quantifier":
            q = _pick(rng, QUANTIFIERS)
            head += [q, _pick(rng, NOUNS)]
            negators += q in DE_QUANTIFIERS
        else:
            det = "no" if rng.random() < g.p_licensor else "the"
            negators += det == "no"
            head += [det, _pick(rng, NOUNS)]
        if PHENOMENA[ph] == "distractor":
            det2 = "no" if rng.random() < g.distractor_rate else "the"
            head += ["that", det2, _pick(rng, NOUNS), _pick(rng, VERBS), ","]
        head += [_pick(rng, FILLERS) for _ in range(int(rng.integers(g.min_gap, g.max_gap + 1)))] + ["has"]
        lic = negators % 2 == 1
        if licensed is not None and lic != licensed:
            continue
        p_ever = g.p_npi if lic else g.p_noise
        slot_word = "ever" if licensed is not None else ("ever" if rng.random() < p_ever else "once")
        return Sentence(head + [slot_word, _pick(rng, VERBS), "."], ph, len(head), lic)


def licensed_probability(g: NPIGrammar, phenomenon: int) -> float:
    """P(L = 1) in sentences of ``phenomenon`` (module docstring)."""
    name = PHENOMENA[phenomenon]
    if name == "quantifier":
        return len(DE_QUANTIFIERS) / len(QUANTIFIERS)
    if name == "nested":  # parity of [DET = no] and k fair NEG bits
        return float(np.mean([(1 - (1 - 2 * g.p_licensor) * (1 - 2 * 0.5) ** k) / 2
                              for k in range(1, g.max_depth + 1)]))
    return g.p_licensor


def slot_ceiling(g: NPIGrammar, phenomenon: int) -> float:
    """Bayes-optimal top-1 accuracy at the slot for ``phenomenon`` (module docstring)."""
    p = licensed_probability(g, phenomenon)
    return p * max(g.p_npi, 1 - g.p_npi) + (1 - p) * max(g.p_noise, 1 - g.p_noise)


@dataclass(frozen=True)
class Parse:
    phenomenon: int   # 0 also stands for "distance or quantifier with Q = no" (same words)
    licensed: bool
    slot: int
    n_prefix: int     # nested prefixes "it is NEG true that"
    gap: int


def parse(words: list[str]) -> Parse | None:
    """The derivation read off a sentence's words; None if the grammar cannot produce them."""
    i, negators, n_prefix = 0, 0, 0
    while words[i:i + 2] == ["it", "is"]:
        if words[i + 2:i + 3] not in (["not"], ["so"]) or words[i + 3:i + 5] != ["true", "that"]:
            return None
        negators += words[i + 2] == "not"
        n_prefix, i = n_prefix + 1, i + PREFIX_LEN
    ph = 2 if n_prefix else 0
    if len(words) < i + 2 or words[i + 1] not in NOUNS:
        return None
    if words[i] in QUANTIFIERS and words[i] != "no" and not n_prefix:
        ph = 3
    elif words[i] not in ("no", "the"):
        return None
    negators += words[i] in DE_QUANTIFIERS
    i += 2
    if words[i:i + 1] == ["that"]:
        if ph or len(words) < i + 5 or words[i + 1] not in ("no", "the") or words[i + 2] not in NOUNS \
                or words[i + 3] not in VERBS or words[i + 4] != ",":
            return None
        ph, i = 1, i + 5
    start = i
    while i < len(words) and words[i] in FILLERS:
        i += 1
    if len(words) != i + 4 or words[i] != "has" or words[i + 1] not in SLOT_WORDS or words[i + 2] not in VERBS \
            or words[i + 3] != ".":
        return None
    return Parse(ph, negators % 2 == 1, i + 1, n_prefix, i - start)


def sentence_logprob(words: list[str], g: NPIGrammar) -> float:
    """Exact log-probability of ``words`` under the grammar (-inf if it cannot produce them).

    ``no N GAP has ...`` is a distance sentence or a quantifier sentence with Q = no; both
    derivations are summed."""
    d = parse(words)
    if d is None or not g.min_gap <= d.gap <= g.max_gap or d.n_prefix > g.max_depth:
        return -math.inf
    p_ever = g.p_npi if d.licensed else g.p_noise
    p = (1 / len(NOUNS)) / len(VERBS) / len(FILLERS) ** d.gap / (g.max_gap - g.min_gap + 1) \
        * (p_ever if words[d.slot] == "ever" else 1 - p_ever)
    w = g.weights
    det = words[PREFIX_LEN * d.n_prefix]
    p_det = g.p_licensor if det == "no" else 1 - g.p_licensor
    if d.phenomenon == 1:
        p_det2 = g.distractor_rate if words[3] == "no" else 1 - g.distractor_rate
        p *= w[1] * p_det * p_det2 / len(NOUNS) / len(VERBS)
    elif d.phenomenon == 2:
        p *= w[2] * p_det / g.max_depth * 0.5 ** d.n_prefix
    elif d.phenomenon == 3:
        p *= w[3] / len(QUANTIFIERS)
    else:
        p *= w[0] * p_det + (w[3] / len(QUANTIFIERS) if det == "no" else 0.0)
    return math.log(p) if p > 0 else -math.inf


def minimal_pair(rng: np.random.Generator, g: NPIGrammar, phenomenon: int) -> tuple[list[str], list[str]]:
    """(grammatical, ungrammatical): a licensed sentence with ``ever`` and its unlicensing edit."""
    good = sample_sentence(rng, g, phenomenon, licensed=True).words
    bad = list(good)
    name = PHENOMENA[phenomenon]
    if name == "nested":
        k = int(rng.integers(sum(1 for i in range(0, len(good), PREFIX_LEN) if good[i:i + 2] == ["it", "is"])))
        bad[PREFIX_LEN * k + 2] = "so" if good[PREFIX_LEN * k + 2] == "not" else "not"
    elif name == "quantifier":
        bad[0] = _pick(rng, [q for q in QUANTIFIERS if q not in DE_QUANTIFIERS])
    else:
        bad[0] = "the"
        if name == "distractor":
            bad[3] = "no"
    return good, bad


def generate_corpus(rng: np.random.Generator, n_tokens: int, g: NPIGrammar) -> dict[str, np.ndarray]:
    """Sentences until ``n_tokens`` tokens, in the classic corpus's layout: ``slot`` holds
    1 + phenomenon at each slot word (0 elsewhere), ``licensor`` the sentence start there."""
    tokens, slot, licensor, starts = [], [], [], []
    while len(tokens) < n_tokens:
        s = sample_sentence(rng, g)
        base = len(tokens)
        starts.append(base)
        tokens += [ID[w] for w in s.words]
        slot += [0] * len(s.words)
        licensor += [-1] * len(s.words)
        slot[base + s.slot] = 1 + s.phenomenon
        licensor[base + s.slot] = base
    return {"tokens": np.array(tokens, dtype=np.int64), "slot": np.array(slot, dtype=np.int64),
            "licensor": np.array(licensor, dtype=np.int64), "starts": np.array(starts, dtype=np.int64)}


def phenomenon_sets(rng: np.random.Generator, g: NPIGrammar, n: int) -> dict[str, np.ndarray]:
    """Held-out evaluation sequences, per phenomenon ``n`` sentences and ``n`` minimal pairs.

    Each sequence is ``.`` (the previous sentence's end) and a sentence, padded with ``.`` to the
    longest. Arrays over sequences: ``tokens`` (M, T), ``length`` (tokens incl. the leading ``.``),
    ``slot`` (position of the slot word), ``phenomenon``, ``role`` (0 sentence, 1 grammatical,
    2 ungrammatical; pair i's members are rows ``pair_good[i]`` and ``pair_good[i] + 1``); per
    sentence ``bayes_slot_correct`` (the Bayes prediction from the prefix equals the slot word) and
    per pair ``bayes_pair_correct`` (1 if the grammar gives the grammatical member the higher
    probability, 1/2 on a tie)."""
    seqs, phen, role, bayes_slot, bayes_pair = [], [], [], [], []
    for ph in range(len(PHENOMENA)):
        for _ in range(n):
            s = sample_sentence(rng, g, ph)
            p_ever = g.p_npi if s.licensed else g.p_noise
            bayes_slot.append(float((p_ever > 0.5) == (s.words[s.slot] == "ever")) if p_ever != 0.5 else 0.5)
            seqs.append(s.words), phen.append(ph), role.append(0)
        for _ in range(n):
            good, bad = minimal_pair(rng, g, ph)
            lg, lb = sentence_logprob(good, g), sentence_logprob(bad, g)
            bayes_pair.append(1.0 if lg > lb else 0.5 if lg == lb else 0.0)
            seqs += [good, bad]
            phen += [ph, ph]
            role += [1, 2]
    T = 1 + max(len(w) for w in seqs)
    tokens = np.full((len(seqs), T), ID["."], dtype=np.int64)
    for i, w in enumerate(seqs):
        tokens[i, 1:1 + len(w)] = [ID[x] for x in w]
    role_a = np.array(role)
    return {"tokens": tokens, "length": np.array([1 + len(w) for w in seqs]),
            "slot": np.array([1 + len(w) - 3 for w in seqs]), "phenomenon": np.array(phen), "role": role_a,
            "pair_good": np.flatnonzero(role_a == 1), "bayes_slot_correct": np.array(bayes_slot),
            "bayes_pair_correct": np.array(bayes_pair)}
