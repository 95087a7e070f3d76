"""The circuit task: a depth-1 then depth-1+2 curriculum per epoch and fixed evaluation sets by depth.

Training data (Ito et al. Sec. "Data"): every depth-1 and depth-2 expression of the grammar
(ListOps: a fresh sample of depth-2 ones per epoch; listops-lra: of depth-1 ones too), balanced
over result classes; the target of each token is its one-step reduction
(:func:`~tinyscope.studies.circuits.reduction.reduce_once`).
Evaluation (Sec. "Evaluation"): ``eval_per_depth`` sampled expressions per depth, fixed by
``data_seed``. Everything here is numpy / pure Python.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.studies.circuits.enumeration import (
    balance,
    enumerate_depth,
    pad_batch,
    sample_expression,
    sample_expressions,
    subproblem_weights,
)
from tinyscope.studies.circuits.grammar import GRAMMARS, Expr, Grammar, depth, encode, evaluate, grammar, to_symbols
from tinyscope.studies.circuits.reduction import reduce_once
from tinyscope.tasks.base import Batch, fingerprint

# calibrated to the paper's depth-30 token means (listops-lra: to ListOps' 18,376, through the same recurrence)
P_DEEP = {"boolean": 0.42, "arithmetic": 0.373, "listops": 0.28, "listops-lra": 0.081}
FRESH_STREAM = 1  # generator stream of fresh evaluation sets (LogicTaskConfig.eval_seed)


@dataclass
class LogicTaskConfig:
    """Data of the circuit experiments (Ito et al. Sec. "Data" and "Evaluation")."""

    grammar: str = "boolean"
    balance: str = "upsample"            # upsample | downsample | none (over result classes)
    subproblem_balance: bool = False     # first repeat expressions so every depth-1 bag is equally
                                         # frequent among the reduced spans (subproblem_weights)
    depth1_samples: int = 0              # > 0: draw this many fresh depth-1 expressions per epoch instead
                                         # of enumerating (listops-lra: its depth-1 set has 4.4e10)
    depth2_samples: int = 0              # > 0: draw this many fresh depth-2 expressions per epoch instead
                                         # of enumerating (ListOps: 8,800; its depth-2 set has 3.4e11)
    depth2_p_deep: float = 0.5           # p_deep of the sampled depth-2 expressions
    p_deep: float | None = None          # evaluation generator; None = calibrated per grammar (P_DEEP)
    eval_depths: list[int] | None = None  # None = 3..30
    eval_per_depth: int = 100
    eval_max_tokens: int = 0             # > 0: redraw evaluation expressions longer than this
    data_seed: int = 0
    eval_seed: int | None = None         # None: evaluation sets from data_seed; an integer: fresh sets
                                         # (`tinyscope eval RUN --seed S`) from their own stream

    def __post_init__(self):
        check_choice("task.grammar", self.grammar, tuple(GRAMMARS))
        check_choice("task.balance", self.balance, ("upsample", "downsample", "none"))
        check(self.depth1_samples >= 0, f"task.depth1_samples={self.depth1_samples} must be >= 0")
        check(self.depth2_samples >= 0, f"task.depth2_samples={self.depth2_samples} must be >= 0")
        check(0 < self.depth2_p_deep <= 1, f"task.depth2_p_deep={self.depth2_p_deep} must lie in (0, 1]")
        if self.p_deep is None:
            self.p_deep = P_DEEP[self.grammar]
        check(0 < self.p_deep <= 1, f"task.p_deep={self.p_deep} must lie in (0, 1]")
        if self.eval_depths is None:
            self.eval_depths = list(range(3, 31))
        check(len(self.eval_depths) > 0 and all(d >= 1 for d in self.eval_depths),
              f"task.eval_depths={self.eval_depths} must list depths >= 1")
        check(self.eval_per_depth >= 1, f"task.eval_per_depth={self.eval_per_depth} must be >= 1")
        check(self.eval_max_tokens >= 0, f"task.eval_max_tokens={self.eval_max_tokens} must be >= 0")


@dataclass
class ExpressionSet:
    """Padded token ids, one-step-reduced targets, answers and depths of a list of expressions."""

    tokens: np.ndarray    # (N, T) BLANK-padded
    targets: np.ndarray   # (N, T) reduce_once(tokens)
    lengths: np.ndarray   # (N,)
    values: np.ndarray    # (N,) exact answer
    depths: np.ndarray    # (N,)

    def __len__(self) -> int:
        return len(self.values)

    def batch(self, index: np.ndarray, blank: int) -> Batch:
        T = int(self.lengths[index].max(initial=1))
        tokens, targets = self.tokens[index, :T], self.targets[index, :T]
        mask = np.arange(T)[None, :] < self.lengths[index][:, None]  # (B, T)
        return Batch(tokens, targets, mask, {"value": self.values[index], "depth": self.depths[index]})


def expression_set(g: Grammar, exprs: Sequence[Expr]) -> ExpressionSet:
    """Encode, reduce and evaluate each distinct expression once (balanced sets repeat many)."""
    index: dict = {}
    inverse = np.array([index.setdefault(e, len(index)) for e in exprs], dtype=np.int64)
    unique = list(index)
    seqs = [encode(g, e) for e in unique]
    tokens, lengths = pad_batch(g, seqs)
    targets, _ = pad_batch(g, [reduce_once(g, s) for s in seqs])
    values = np.array([evaluate(g, e) for e in unique], dtype=np.int64)
    depths = np.array([depth(e) for e in unique], dtype=np.int64)
    return ExpressionSet(tokens[inverse], targets[inverse], lengths[inverse], values[inverse], depths[inverse])


def step_of(rng: np.random.Generator) -> tuple[int, int]:
    """(seed, step) of a generator made by ``tasks.base.step_rng(seed, step)``.

    The trainer hands samplers only the step's generator; an epoch curriculum needs the step
    itself, which ``step_rng`` stores as the generator's seed entropy ``[seed, step, stream]``.
    """
    entropy = rng.bit_generator.seed_seq.entropy
    if not isinstance(entropy, (list, tuple)) or len(entropy) != 3:
        raise ValueError("the curriculum sampler needs a generator from tasks.base.step_rng(seed, step)")
    return int(entropy[0]), int(entropy[1])


class LogicTask:
    """Depth-1 then depth-1+2 curriculum (per epoch) and fixed evaluation sets by depth.

    Each epoch is ``ceil(n1 / B)`` batches of the depth-1 set followed by ``ceil(n12 / B)``
    batches of the depth-1 and depth-2 sets mixed, each shuffled per epoch; ``sample`` turns the
    trainer's step into (epoch, phase, batch), so data are a pure function of (seed, step).
    """

    def __init__(self, cfg: LogicTaskConfig | None = None):
        self.cfg = cfg = cfg or LogicTaskConfig()
        self.grammar = g = grammar(cfg.grammar)
        self.vocab_size = g.D + 1
        self.depth1_fixed = None if cfg.depth1_samples else self._balanced(enumerate_depth(g, 1))
        self.depth2_fixed = None if cfg.depth2_samples else self._balanced(enumerate_depth(g, 2))
        self._epoch_cache: tuple[tuple, ExpressionSet] | None = None
        self._eval: dict[int, ExpressionSet] = {}

    def _balanced(self, exprs: list[Expr]) -> list[Expr]:
        if self.cfg.subproblem_balance:
            exprs = [e for e, w in zip(exprs, subproblem_weights(self.grammar, exprs)) for _ in range(w)]
        values = np.array([evaluate(self.grammar, e) for e in exprs])
        return [exprs[i] for i in balance(values, self.cfg.balance)]

    # ------------------------------------------------------------ curriculum
    @property
    def depth1(self) -> list[Expr]:
        """The enumerated (balanced) depth-1 set; a sampled one has no single set (:meth:`depth1_of`)."""
        if self.depth1_fixed is None:
            raise ValueError(f"task.depth1_samples={self.cfg.depth1_samples}: the depth-1 set is drawn per epoch")
        return self.depth1_fixed

    def depth1_of(self, seed: int, epoch: int) -> list[Expr]:
        """The depth-1 expressions of an epoch: the enumerated set, or a fresh sample (stream 1)."""
        if self.depth1_fixed is not None:
            return self.depth1_fixed
        rng = np.random.default_rng([int(seed), int(epoch), 1, self.cfg.data_seed])
        return sample_expressions(self.grammar, rng, 1, self.cfg.depth1_samples)

    def depth2(self, seed: int, epoch: int) -> list[Expr]:
        if self.depth2_fixed is not None:
            return self.depth2_fixed
        rng = np.random.default_rng([int(seed), int(epoch), 2, self.cfg.data_seed])
        return sample_expressions(self.grammar, rng, 2, self.cfg.depth2_samples, self.cfg.depth2_p_deep)

    def phase_sizes(self) -> tuple[int, int]:
        n1 = len(self.depth1_fixed) if self.depth1_fixed is not None else self.cfg.depth1_samples
        n2 = len(self.depth2_fixed) if self.depth2_fixed is not None else self.cfg.depth2_samples
        return n1, n1 + n2

    def steps_per_epoch(self, batch_size: int) -> int:
        n1, n12 = self.phase_sizes()
        return -(-n1 // batch_size) + -(-n12 // batch_size)

    def _epoch_sets(self, seed: int, epoch: int) -> tuple[ExpressionSet, ExpressionSet]:
        fixed = self.depth1_fixed is not None and self.depth2_fixed is not None
        key = (seed, 0 if fixed else epoch)
        if self._epoch_cache is None or self._epoch_cache[0] != key:
            g, one = self.grammar, self.depth1_of(seed, epoch)
            self._epoch_cache = (key, (expression_set(g, one), expression_set(g, one + self.depth2(seed, epoch))))
        return self._epoch_cache[1]

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """The batch of the trainer's step (see class docstring)."""
        seed, step = step_of(rng)
        n1, n12 = self.phase_sizes()
        b1 = -(-n1 // batch_size)
        epoch, j = divmod(step, self.steps_per_epoch(batch_size))
        phase, j = (0, j) if j < b1 else (1, j - b1)
        data = self._epoch_sets(seed, epoch)[phase]
        order = np.random.default_rng([seed, epoch, phase]).permutation(len(data))
        return data.batch(order[j * batch_size:(j + 1) * batch_size], self.grammar.blank)

    # ------------------------------------------------------------ evaluation
    def eval_set(self, d: int) -> ExpressionSet:
        """``eval_per_depth`` expressions of depth ``d``, fixed by ``data_seed`` (generator
        ``[data_seed, 1000 + d]``), or, with ``eval_seed`` set, drawn afresh from the generator
        ``[eval_seed, 1000 + d, FRESH_STREAM]``, which no run's own sets share."""
        if d not in self._eval:
            g, cfg = self.grammar, self.cfg
            key = [cfg.data_seed, 1000 + int(d)] if cfg.eval_seed is None else [cfg.eval_seed, 1000 + int(d), FRESH_STREAM]
            rng = np.random.default_rng(key)
            exprs = []
            while len(exprs) < cfg.eval_per_depth:
                e = sample_expression(g, rng, d, cfg.p_deep)
                if cfg.eval_max_tokens and len(to_symbols(g, e)) > cfg.eval_max_tokens:
                    continue
                exprs.append(e)
            seqs = [encode(g, e) for e in exprs]
            tokens, lengths = pad_batch(g, seqs)
            self._eval[d] = ExpressionSet(tokens, tokens, lengths,
                                          np.array([evaluate(g, e) for e in exprs], dtype=np.int64),
                                          np.full(len(exprs), d, dtype=np.int64))
        return self._eval[d]

    def eval_fingerprint(self) -> str:
        return fingerprint(*[self.eval_set(d).tokens for d in self.cfg.eval_depths])
