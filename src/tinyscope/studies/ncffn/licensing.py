"""A synthetic licensing language (for the NC-FFN paper's licensing / quantifier claims).

Sentences in which a *licensor* earlier in the sentence licenses a later word at a distance,
each with an unlicensed twin whose slot holds the default word ``and``::

    comparative   the N is COMP   GAP than the N .     | the N is ADJ  GAP and the N is ADJ .
    passive       the N was PART  GAP by the N .       | the N was ADJ GAP and the N was ADJ .
    correlative   neither the N   GAP nor the N V .    | either the N GAP or the N V .
                                                        | both the N GAP and the N V .

``GAP`` is empty or ``, w_1 ... w_k ,`` with k in [1, max_gap] filler adverbs, so the word in
the slot after the gap is fixed by the licensor alone and must be carried across k + 2 tokens
(``either`` -> ``or`` is itself licensed; ``both`` and the adjectives are the unlicensed twins).
Sentences follow one another in a stream; a word-level vocabulary (:data:`VOCAB`).

The task keeps a fixed training corpus and a fixed held-out corpus (seeded by ``data_seed``);
training batches are random windows, evaluation windows start at sentence starts so that every
slot in a window sees its licensor. ``meta["slot"]`` codes each *target* position:
0 not a slot, then :data:`SLOT_KINDS` (1 than, 2 by, 3 nor, 4 or, 5 and-after-twin);
``meta["licensor_pos"]`` is the position (in the window) of the sentence's licensor or twin
word for slot targets, else -1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyscope.errors import check
from tinyscope.tasks.base import Batch, fingerprint

NOUNS = "dog cat fox bird horse mouse child teacher farmer doctor king queen river tree house garden".split()
ADJS = "tall big small old young quick quiet happy bright dark".split()
COMPARATIVES = "taller bigger smaller older younger quicker quieter happier brighter darker".split()
PARTICIPLES = "seen chased found helped followed praised taken eaten carried watched".split()
VERBS = "slept ran sang left waited smiled laughed fell".split()
FILLERS = "really often today again quite very still there here now later indeed surely perhaps always soon".split()
SLOT_WORDS = ["than", "by", "nor", "or", "and"]
VOCAB = [".", ",", "the", "is", "was", "neither", "either", "both"] + SLOT_WORDS + NOUNS + ADJS + COMPARATIVES \
    + PARTICIPLES + VERBS + FILLERS
ID = {w: i for i, w in enumerate(VOCAB)}

SLOT_KINDS = {1: "than (comparative)", 2: "by (passive participle)", 3: "nor (neither)", 4: "or (either)",
              5: "and (no licensor)"}
LICENSED_KINDS = (1, 2, 3)  # the paper's three licensors: comparative, passive participle, negative polarity
LICENSOR_CLASS = {"comparative": COMPARATIVES, "participle": PARTICIPLES, "npi": ["neither"]}


@dataclass
class LicensingConfig:
    max_gap: int = 6             # filler words between the licensor and its slot (0 .. max_gap)
    p_licensed: float = 0.5      # share of sentences that carry a licensor (vs their unlicensed twin)
    n_train_tokens: int = 300_000
    n_val_tokens: int = 40_000
    block_size: int = 64         # window length (model context)
    data_seed: int = 0           # corpus seed; the held-out corpus uses a second stream

    def __post_init__(self):
        check(0 <= self.max_gap <= 64, f"task.max_gap={self.max_gap} must lie in [0, 64]")
        check(0.0 <= self.p_licensed <= 1.0, f"task.p_licensed={self.p_licensed} must lie in [0, 1]")
        check(self.block_size >= 12 + self.max_gap + 2,
              f"task.block_size={self.block_size} must hold a whole sentence: >= {12 + self.max_gap + 2}")
        check(self.n_train_tokens >= 10 * self.block_size and self.n_val_tokens >= 2 * self.block_size,
              f"task.n_train_tokens={self.n_train_tokens} / n_val_tokens={self.n_val_tokens} too small for "
              f"block_size={self.block_size}")


def generate_sentence(rng: np.random.Generator, max_gap: int, p_licensed: float) -> tuple[list[str], int, int, int]:
    """One sentence: (words, slot index, licensor index, slot kind in SLOT_KINDS)."""
    def pick(words):
        return words[int(rng.integers(len(words)))]

    k = int(rng.integers(0, max_gap + 1))
    gap = ([","] + [pick(FILLERS) for _ in range(k)] + [","]) if k else []
    licensed = rng.random() < p_licensed
    construction = int(rng.integers(3))
    if construction == 0:
        head = ["the", pick(NOUNS), "is", pick(COMPARATIVES) if licensed else pick(ADJS)]
        tail = ["than", "the", pick(NOUNS), "."] if licensed else ["and", "the", pick(NOUNS), "is", pick(ADJS), "."]
        kind, lic = (1 if licensed else 5), 3
    elif construction == 1:
        head = ["the", pick(NOUNS), "was", pick(PARTICIPLES) if licensed else pick(ADJS)]
        tail = ["by", "the", pick(NOUNS), "."] if licensed else ["and", "the", pick(NOUNS), "was", pick(ADJS), "."]
        kind, lic = (2 if licensed else 5), 3
    else:
        opener = "neither" if licensed else ("either" if rng.random() < 0.5 else "both")
        head = [opener, "the", pick(NOUNS)]
        slot_word = {"neither": "nor", "either": "or", "both": "and"}[opener]
        tail = [slot_word, "the", pick(NOUNS), pick(VERBS), "."]
        kind, lic = {"neither": 3, "either": 4, "both": 5}[opener], 0
    words = head + gap + tail
    return words, len(head) + len(gap), lic, kind


def generate_corpus(rng: np.random.Generator, n_tokens: int, max_gap: int, p_licensed: float) -> dict[str, np.ndarray]:
    """Sentences until ``n_tokens`` tokens: ``tokens``, per-token ``slot`` kind (at the slot word),
    ``licensor`` (index of the licensor for slot words, else -1) and ``starts`` (sentence starts)."""
    tokens, slot, licensor, starts = [], [], [], []
    while len(tokens) < n_tokens:
        words, s, lic, kind = generate_sentence(rng, max_gap, p_licensed)
        base = len(tokens)
        starts.append(base)
        tokens += [ID[w] for w in words]
        slot += [0] * len(words)
        licensor += [-1] * len(words)
        slot[base + s] = kind
        licensor[base + s] = base + lic
    return {"tokens": np.array(tokens, dtype=np.int64), "slot": np.array(slot, dtype=np.int64),
            "licensor": np.array(licensor, dtype=np.int64), "starts": np.array(starts, dtype=np.int64)}


class Licensing:
    """The licensing-language LM task: random training windows, sentence-aligned held-out windows.

    ``eval_seed`` (None: the corpus of ``data_seed``'s second stream) draws the held-out corpus
    afresh from that seed, with the same grammar and size, on a stream the training corpus never uses.
    """

    vocab = VOCAB
    vocab_size = len(VOCAB)

    def __init__(self, cfg: LicensingConfig | None = None, eval_seed: int | None = None):
        self.cfg = cfg = cfg or LicensingConfig()
        self.train = generate_corpus(np.random.default_rng([cfg.data_seed, 0]), cfg.n_train_tokens, cfg.max_gap,
                                     cfg.p_licensed)
        held = [cfg.data_seed, 1] if eval_seed is None else [cfg.data_seed, 2, int(eval_seed)]
        self.heldout = generate_corpus(np.random.default_rng(held), cfg.n_val_tokens, cfg.max_gap, cfg.p_licensed)
        self._eval: Batch | None = None

    def _window(self, corpus: dict, starts: np.ndarray) -> Batch:
        W = self.cfg.block_size
        idx = starts[:, None] + np.arange(W + 1)  # (B, W+1)
        win = corpus["tokens"][idx]
        slot = corpus["slot"][idx[:, 1:]]  # (B, W) kind of each target
        lic = corpus["licensor"][idx[:, 1:]] - starts[:, None]  # (B, W) licensor position in the window
        lic = np.where((slot > 0) & (lic >= 0), lic, -1)
        slot = np.where(lic >= 0, slot, 0)  # a slot whose licensor fell before the window is no slot
        return Batch(win[:, :-1].copy(), win[:, 1:].copy(), np.ones((len(starts), W), dtype=bool),
                     {"slot": slot, "licensor_pos": lic})

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """``batch_size`` windows of ``block_size + 1`` tokens at random offsets of the training corpus."""
        n = len(self.train["tokens"]) - self.cfg.block_size - 1
        return self._window(self.train, rng.integers(0, n, size=batch_size))

    def eval_set(self) -> Batch:
        """Fixed held-out windows, each starting at a sentence start, covering the held-out corpus."""
        if self._eval is None:
            W = self.cfg.block_size
            starts, last = [], -W
            for s in self.heldout["starts"]:
                if s >= last + W and s + W + 1 <= len(self.heldout["tokens"]):
                    starts.append(s)
                    last = s
            self._eval = self._window(self.heldout, np.array(starts, dtype=np.int64))
        return self._eval

    def eval_fingerprint(self) -> str:
        b = self.eval_set()
        return fingerprint(b.tokens, b.targets, b.meta["slot"])

    def decode(self, ids) -> str:
        return " ".join(VOCAB[int(i)] for i in ids)
