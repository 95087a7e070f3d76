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

``language="npi"`` selects the harder language of :mod:`~tinyscope.studies.ncffn.licensing_npi`
(distance, distractor, nested-negation and quantifier phenomena, exact ceilings and minimal
pairs; ``slot`` then holds 1 + phenomenon); ``"classic"`` (default) is the language above.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.studies.ncffn import licensing_npi as npi
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


LANGUAGES = ("classic", "npi")


@dataclass
class LicensingConfig:
    language: str = "classic"    # classic (than/by/nor) | npi (licensing_npi's four phenomena)
    max_gap: int = 6             # filler words between the licensor and its slot (min_gap .. max_gap)
    p_licensed: float = 0.5      # classic: share of sentences that carry a licensor (vs their unlicensed twin)
    n_train_tokens: int = 300_000
    n_val_tokens: int = 40_000
    block_size: int = 64         # window length (model context)
    data_seed: int = 0           # corpus seed; the held-out corpus uses a second stream
    # npi language only (licensing_npi.NPIGrammar)
    min_gap: int = 0             # fewest filler words before "has"
    distractor_rate: float = 0.5  # P(the relative clause's determiner is the out-of-scope "no")
    max_depth: int = 2           # nested sentences: 1 .. max_depth "it is not/so true that" prefixes
    p_licensor: float = 0.5      # P(DET = no)
    p_npi: float = 0.8           # P(ever) at a licensed slot
    p_noise: float = 0.0         # P(ever) at an unlicensed slot (speaker errors)
    mix: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0, 1.0])  # weights of npi.PHENOMENA
    n_eval_pairs: int = 200      # minimal pairs and held-out sentences per phenomenon

    def __post_init__(self):
        check_choice("task.language", self.language, LANGUAGES)
        check(0 <= self.max_gap <= 64, f"task.max_gap={self.max_gap} must lie in [0, 64]")
        check(0 <= self.min_gap <= self.max_gap,
              f"task.min_gap={self.min_gap} must lie in [0, task.max_gap={self.max_gap}]")
        check(1 <= self.max_depth <= 8, f"task.max_depth={self.max_depth} must lie in [1, 8]")
        for name in ("p_licensed", "distractor_rate", "p_licensor", "p_npi", "p_noise"):
            value = getattr(self, name)
            check(0.0 <= value <= 1.0, f"task.{name}={value} must lie in [0, 1]")
        check(len(self.mix) == len(npi.PHENOMENA) and all(w >= 0 for w in self.mix) and sum(self.mix) > 0,
              f"task.mix={list(self.mix)} must be {len(npi.PHENOMENA)} non-negative weights, not all 0, for "
              f"{', '.join(npi.PHENOMENA)}")
        check(self.n_eval_pairs >= 1, f"task.n_eval_pairs={self.n_eval_pairs} must be >= 1")
        check(self.block_size >= self.max_sentence_len,
              f"task.block_size={self.block_size} must hold a whole sentence: >= {self.max_sentence_len}")
        check(self.n_train_tokens >= 10 * self.block_size and self.n_val_tokens >= 2 * self.block_size,
              f"task.n_train_tokens={self.n_train_tokens} / n_val_tokens={self.n_val_tokens} too small for "
              f"block_size={self.block_size}")

    @property
    def grammar(self) -> npi.NPIGrammar:
        return npi.NPIGrammar(self.min_gap, self.max_gap, self.distractor_rate, self.max_depth, self.p_licensor,
                              self.p_npi, self.p_noise, tuple(float(w) for w in self.mix))

    @property
    def max_sentence_len(self) -> int:
        return self.grammar.max_sentence_len if self.language == "npi" else 12 + self.max_gap + 2


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

    vocab = VOCAB  # the classic language's; an npi task sets its own
    vocab_size = len(VOCAB)

    def __init__(self, cfg: LicensingConfig | None = None, eval_seed: int | None = None):
        self.cfg = cfg = cfg or LicensingConfig()
        self.vocab = npi.VOCAB if cfg.language == "npi" else VOCAB
        self.vocab_size = len(self.vocab)
        self.eval_seed = eval_seed
        if cfg.language == "npi":
            def corpus(rng, n):
                return npi.generate_corpus(rng, n, cfg.grammar)
        else:
            def corpus(rng, n):
                return generate_corpus(rng, n, cfg.max_gap, cfg.p_licensed)
        self.train = corpus(np.random.default_rng([cfg.data_seed, 0]), cfg.n_train_tokens)
        self.heldout = corpus(np.random.default_rng(self._held_seed(1)), cfg.n_val_tokens)
        self._eval: Batch | None = None
        self._phenomena: dict | None = None

    def _held_seed(self, stream: int) -> list[int]:
        """Held-out streams: ``[data_seed, stream]``, or with ``eval_seed`` ``[data_seed, stream + 1, eval_seed]``."""
        s = self.cfg.data_seed
        return [s, stream] if self.eval_seed is None else [s, stream + 1, int(self.eval_seed)]

    def phenomenon_sets(self) -> dict:
        """npi language: per phenomenon, ``n_eval_pairs`` held-out sentences and minimal pairs
        (:func:`~tinyscope.studies.ncffn.licensing_npi.phenomenon_sets`), drawn from their own stream."""
        if self.cfg.language != "npi":
            raise ValueError("phenomenon_sets exist for the npi language only")
        if self._phenomena is None:
            self._phenomena = npi.phenomenon_sets(np.random.default_rng(self._held_seed(3)), self.cfg.grammar,
                                                  self.cfg.n_eval_pairs)
        return self._phenomena

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
        extra = [self.phenomenon_sets()["tokens"]] if self.cfg.language == "npi" else []
        return fingerprint(b.tokens, b.targets, b.meta["slot"], *extra)

    def decode(self, ids) -> str:
        return " ".join(self.vocab[int(i)] for i in ids)
