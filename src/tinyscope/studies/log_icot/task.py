"""k-parity with a tree-shaped chain of thought (Log-ICoT, Huang et al. 2026; the CoT of Kim & Suzuki 2025).

An input is ``n`` uniform bits ``x``; a secret subset ``S = {s_0 < ... < s_{k-1}}`` of size ``k``
(a power of two) is fixed per task instance; the answer is ``XOR_{i in S} x_i``.

The chain of thought is the binary tree of pairwise XORs over the selected bits, written level by
level (this project's reading of the "tree-structured k-parity" CoT)::

    level 1:  v_{1,i} = x_{s_{2i}} XOR x_{s_{2i+1}}          i < k/2
    level l:  v_{l,i} = v_{l-1,2i} XOR v_{l-1,2i+1}          i < k/2^l
    level L = log2 k: the single node v_{L,0} = the answer

Nodes are numbered ``j = 0 .. k-2`` in that order (level 1 left to right, then level 2, ...), so
the ``k-1`` thinking tokens end with the answer.

Token layout (next-token prediction, teacher forcing)::

    position  0 .. n-1   n     n+1 .. n+k-2
    token     x_0..x_n-1 SEP   t_0 .. t_{k-3}         (t_j = v_j, or BLANK when node j is removed)
    target    -          v_0   v_1 .. v_{k-2}          (the position before a node predicts it)

so the *slot* of node ``j`` -- the position whose output predicts it -- is ``n + j``, and the answer
is predicted at the last position. A curriculum stage removes a set of non-answer nodes:

* ``removal="blank"`` (default; what the paper implies: CoT positions kept but filled with a
  placeholder): removed nodes become ``BLANK`` tokens and their slots are not supervised; every
  node keeps its slot, so positions stay aligned across stages and a single forward pass over
  ``x, SEP, BLANK * (k-2)`` yields the answer.
* ``removal="drop"``: removed nodes are deleted, the kept ones move left.

Token ids: 0, 1 = bit values (and node values), 2 = SEP, 3 = BLANK. Model outputs have two
classes, the bit values 0 and 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.tasks.base import Batch, fingerprint

SEP, BLANK = 2, 3
VOCAB = ["0", "1", "SEP", "_"]


@dataclass
class ParityConfig:
    n: int = 20                         # input bits
    k: int = 8                          # subset size, a power of two >= 2
    subset_seed: int = 0                # draws the secret subset when ``subset`` is empty
    subset: list[int] = field(default_factory=list)  # explicit secret subset (overrides subset_seed)
    removal: Literal["blank", "drop"] = "blank"
    data_seed: int = 1                  # seed of the fixed validation / test sets
    n_val: int = 2048
    n_test: int = 4096
    eval_seed: int | None = None        # None: the test set comes from data_seed; else a fresh one from this seed
    blank_ahead: float = 0.0            # share of a non-final stage's training samples written in the next stage's
                                        # token layout (look-ahead blanking, :func:`encode_ahead`)

    def __post_init__(self):
        check(self.k >= 2 and (self.k & (self.k - 1)) == 0, f"task.k={self.k} must be a power of two >= 2")
        check(self.n >= self.k, f"task.n={self.n} must be >= task.k={self.k}")
        check_choice("task.removal", self.removal, ("blank", "drop"))
        if self.subset:
            check(len(self.subset) == self.k and len(set(self.subset)) == self.k
                  and all(0 <= i < self.n for i in self.subset),
                  f"task.subset={self.subset} must hold k={self.k} distinct positions in [0, {self.n})")
        check(self.n_val >= 1 and self.n_test >= 1, "task.n_val and task.n_test must be >= 1")
        check(0.0 <= self.blank_ahead < 1.0, f"task.blank_ahead={self.blank_ahead} must be in [0, 1)")
        check(self.blank_ahead == 0.0 or self.removal == "blank",
              f"task.blank_ahead={self.blank_ahead} needs task.removal=blank (a dropped token moves every later slot)")

    @property
    def levels(self) -> int:
        return int(self.k).bit_length() - 1


def draw_subset(n: int, k: int, seed: int) -> np.ndarray:
    """The secret subset: ``k`` distinct positions of ``n``, sorted, a pure function of ``seed``."""
    return np.sort(np.random.default_rng([int(seed), 8]).choice(n, size=k, replace=False)).astype(np.int64)


def node_levels(k: int) -> np.ndarray:
    """(k-1,) tree level (1 .. log2 k) of each node ``j``."""
    return np.concatenate([np.full(k >> lvl, lvl) for lvl in range(1, k.bit_length())]).astype(np.int64)


def node_children(k: int) -> list[tuple[int, ...]]:
    """The children of each node ``j`` (k-1 entries): () at level 1 (its children are input bits),
    else the two nodes ``2i, 2i+1`` of the level below, as node indices."""
    sizes = [k >> lvl for lvl in range(1, k.bit_length())]
    first = np.concatenate([[0], np.cumsum(sizes)])  # index of each level's first node
    return [() if lvl == 0 else (int(first[lvl - 1] + 2 * i), int(first[lvl - 1] + 2 * i + 1))
            for lvl, size in enumerate(sizes) for i in range(size)]


def parity_tree(bits: np.ndarray, subset: Sequence[int]) -> np.ndarray:
    """(B, k-1) node values of the XOR tree over ``bits[:, subset]``, level by level; the last is the answer."""
    level = bits[:, np.asarray(subset)]  # (B, k)
    out = []
    while level.shape[1] > 1:
        level = level[:, 0::2] ^ level[:, 1::2]  # (B, width/2)
        out.append(level)
    return np.concatenate(out, axis=1)


@dataclass(frozen=True)
class Layout:
    """Where everything sits for one set of removed nodes.

    ``slot[j]``: the position that predicts node ``j`` (-1 when dropped); ``token_pos[j]``: where
    node ``j``'s token is written (-1 for removed nodes and the answer); ``supervised``: nodes
    whose slot is in the loss.
    """

    n: int
    k: int
    removed: frozenset
    removal: str

    @property
    def kept(self) -> list[int]:
        return [j for j in range(self.k - 1) if j not in self.removed]

    @property
    def length(self) -> int:
        extra = self.k - 2 if self.removal == "blank" else len(self.kept) - 1
        return self.n + 1 + extra

    @property
    def slot(self) -> np.ndarray:
        if self.removal == "blank":
            return self.n + np.arange(self.k - 1)
        out = np.full(self.k - 1, -1)
        out[self.kept] = self.n + np.arange(len(self.kept))
        return out

    @property
    def token_pos(self) -> np.ndarray:
        pos = self.slot + 1
        pos[list(self.removed)] = -1
        pos[self.k - 2] = -1
        return pos

    @property
    def answer_pos(self) -> int:
        return self.length - 1


def encode(bits: np.ndarray, nodes: np.ndarray, layout: Layout) -> Batch:
    """The Batch of ``bits`` (B, n) and their tree ``nodes`` (B, k-1) in ``layout``."""
    B, n = bits.shape
    T = layout.length
    tokens = np.full((B, T), BLANK, dtype=np.int64)
    tokens[:, :n] = bits
    tokens[:, n] = SEP
    targets = np.zeros((B, T), dtype=np.int64)
    mask = np.zeros((B, T), dtype=bool)
    slot, tpos = layout.slot, layout.token_pos
    for j in layout.kept:
        targets[:, slot[j]] = nodes[:, j]
        mask[:, slot[j]] = True
        if tpos[j] >= 0:
            tokens[:, tpos[j]] = nodes[:, j]
    return Batch(tokens, targets, mask, {"answer": nodes[:, -1].copy(), "nodes": nodes.copy(), "bits": bits.copy()})


def encode_ahead(bits: np.ndarray, nodes: np.ndarray, now: Layout, ahead: Layout) -> Batch:
    """A look-ahead sample of the stage that removes ``now.removed``, before the one that removes
    ``ahead.removed``: the tokens of ``ahead`` (the next stage's nodes already ``BLANK``), the loss
    at the nodes ``now`` supervises except those with a child the next stage removes (their inputs
    are gone and the active depth cannot yet recompute them).

    Why (docs/results/log_icot.md): with ``freeze_absorbed``, a layer trained while node ``j``'s
    token was written computes its nodes from queries that read that token; when the next stage
    blanks it, the frozen layer's own nodes at the following slots go wrong (k = 16, stage 2:
    nodes 9-11 at 0.90 / 0.69 / 0.65). Look-ahead samples train each layer on both layouts of its
    slots."""
    check(now.removal == ahead.removal == "blank" and now.removed <= ahead.removed,
          "look-ahead needs blank layouts with now.removed a subset of ahead.removed")
    batch = encode(bits, nodes, ahead)
    new = ahead.removed - now.removed
    targets, mask = np.zeros_like(batch.targets), np.zeros_like(batch.loss_mask)
    children = node_children(now.k)
    for j in now.kept:
        if not new.intersection(children[j]):
            targets[:, now.slot[j]] = nodes[:, j]
            mask[:, now.slot[j]] = True
    return Batch(batch.tokens, targets, mask, batch.meta)


CURRICULA = ("direct", "cot", "icot", "logicot")


def removal_schedule(k: int, kind: str) -> list[tuple[int, ...]]:
    """The removed nodes of each stage of a curriculum over the ``k-1`` thinking tokens.

    * ``cot``: one stage, nothing removed (every thinking token supervised);
    * ``direct``: one stage, every non-answer node removed (the answer alone);
    * ``icot``: stage ``s`` removes the first ``s`` nodes in CoT order, ``s = 0 .. k-2``: ``k-1`` stages,
      one token more per stage, ending with the answer alone;
    * ``logicot``: stage ``l`` removes tree levels ``1 .. l`` (bottom-up), ``l = 0 .. log2(k)-1``:
      ``log2 k`` stages, one whole level more per stage, ending with the answer alone.
    """
    check_choice("curriculum kind", kind, CURRICULA)
    last = k - 2  # the answer's node index; nodes 0 .. k-3 can be removed
    if kind == "cot":
        return [()]
    if kind == "direct":
        return [tuple(range(last))]
    if kind == "icot":
        return [tuple(range(s)) for s in range(k - 1)]
    level = node_levels(k)
    return [tuple(int(j) for j in np.flatnonzero(level <= lvl)) for lvl in range(k.bit_length() - 1)]


class Parity:
    """The k-parity task instance: the secret subset, layouts per removed set, and fixed eval sets."""

    vocab = VOCAB
    vocab_size = len(VOCAB)
    n_classes = 2

    def __init__(self, cfg: ParityConfig | None = None):
        self.cfg = cfg = cfg or ParityConfig()
        self.n, self.k, self.levels = cfg.n, cfg.k, cfg.levels
        self.subset = np.sort(np.asarray(cfg.subset, dtype=np.int64)) if cfg.subset else draw_subset(cfg.n, cfg.k, cfg.subset_seed)
        self.node_level = node_levels(cfg.k)
        self._fixed: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def n_ctx(self) -> int:
        return self.n + self.k - 1

    def layout(self, removed: Sequence[int] = ()) -> Layout:
        removed = frozenset(int(j) for j in removed)
        check(all(0 <= j < self.k - 2 for j in removed),
              f"removed nodes {sorted(removed)} must lie in [0, {self.k - 2}) (the answer node is never removed)")
        return Layout(self.n, self.k, removed, self.cfg.removal)

    def draw(self, rng: np.random.Generator, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """(bits (B, n), nodes (B, k-1)) with bits uniform."""
        bits = rng.integers(0, 2, size=(batch_size, self.n), dtype=np.int64)  # (B, n)
        return bits, parity_tree(bits, self.subset)

    def sample(self, rng: np.random.Generator, batch_size: int, removed: Sequence[int] = (),
               ahead: Sequence[int] | None = None, share: float | None = None) -> Batch:
        """A training batch of the stage that removes ``removed``; with ``ahead`` (the next stage's
        removed nodes) and a share p > 0 (``share``, default ``task.blank_ahead``), each sample is a
        look-ahead one (:func:`encode_ahead`) with probability p (one coin per sample, drawn after
        the bits)."""
        share = self.cfg.blank_ahead if share is None else share
        bits, nodes = self.draw(rng, batch_size)
        batch = encode(bits, nodes, self.layout(removed))
        if ahead is None or share == 0.0:
            return batch
        flip = rng.random(batch_size) < share  # (B,)
        look = encode_ahead(bits, nodes, self.layout(removed), self.layout(ahead))
        for a, b in ((batch.tokens, look.tokens), (batch.targets, look.targets), (batch.loss_mask, look.loss_mask)):
            a[flip] = b[flip]
        return batch

    def fixed(self, split: Literal["val", "test"]) -> tuple[np.ndarray, np.ndarray]:
        """The fixed validation or test draws (bits, nodes), a pure function of ``data_seed``; with
        ``eval_seed`` set, the test draws come from that seed instead (a stream the validation and
        the run's own test set never use), for the same secret subset."""
        if split not in self._fixed:
            size = self.cfg.n_val if split == "val" else self.cfg.n_test
            if split == "test" and self.cfg.eval_seed is not None:
                rng = np.random.default_rng([int(self.cfg.eval_seed), 3])
            else:
                rng = np.random.default_rng([self.cfg.data_seed, 0 if split == "val" else 1])
            self._fixed[split] = self.draw(rng, size)
        return self._fixed[split]

    def eval_batch(self, split: Literal["val", "test"], removed: Sequence[int] = ()) -> Batch:
        return encode(*self.fixed(split), self.layout(removed))

    def eval_fingerprint(self) -> str:
        bits, _ = self.fixed("test")
        return fingerprint(bits, self.subset)
