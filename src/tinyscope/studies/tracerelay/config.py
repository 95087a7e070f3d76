"""Run and evaluation configs of the TraceRelay experiments, and the builders their presets use.

A run config holds ``seed``, the task's config, the model (:class:`TraceRelayConfig`), the
training config and the evaluation config (:class:`TraceRelayEvalConfig`). The ``paper``
builders follow App. A, Table 2 (H = 64, FFN 256, three layers, four heads, trace widths
[64, d_c, 64], L = 15, R = 7, W = 8; AdamW 3e-4 with the stopping and selection rules of
:func:`paper_train`), every weight starting at N(0, 0.02^2); ``cpu`` builders are sized for 2 CPU cores and ``smoke`` ones for tests.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tinyscope.errors import check
from tinyscope.studies.tracerelay.model import TraceRelayConfig
from tinyscope.studies.tracerelay.task import DyckConfig, EqualRepeatsConfig, MostFreqConfig
from tinyscope.train.trainer import TrainConfig


@dataclass
class TraceRelayEvalConfig:
    """Fixed evaluation sets (App. A, Table 2): drawn from (seed, length), shared by all runs.

    eval_seed: None (default) draws the final sets from ``final_seed``; an integer draws fresh
    final sets from the generator ``(eval_seed, length, stream 1)`` at the same lengths, which no
    run's own sets share (`tinyscope eval RUN --seed S`; see ``Experiment.fresh_eval_config``)."""

    val_lengths: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    id_lengths: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    ood_lengths: list[int] = field(default_factory=lambda: [512, 1024, 2048, 4096])
    n_val: int = 1024
    n_final: int = 10000
    n_ood: int | None = None        # examples per OOD length; None = n_final
    val_seed: int = 20261007
    final_seed: int = 20261006
    eval_seed: int | None = None
    batch_size: int = 128

    def __post_init__(self):
        check(len(self.val_lengths) >= 1, "eval.val_lengths must list at least one length")
        check(self.n_val >= 1 and self.n_final >= 1, f"eval.n_val={self.n_val}, eval.n_final={self.n_final} must be >= 1")
        check(self.batch_size >= 1, f"eval.batch_size={self.batch_size} must be >= 1")


PAPER_INIT_STD = 0.02  # the paper states no initialization; see paper_model


def paper_model(vocab: int, n_out: int, **kw) -> TraceRelayConfig:
    """The paper's model (App. A, Table 2) for a task with ``vocab`` input ids and ``n_out`` outputs.

    Every weight starts at N(0, 0.02^2) (``init_std``, GPT-2's start), which the paper does not
    state: on Most-Freq at d_c = 16, seed 42, it reaches a validation mean of 86% by update 500
    (PyTorch's starts: 31%, and 2-4x the paper's stopping updates) and generalizes in length as
    the paper's models do, where PyTorch's starts collapse past T = 256
    (docs/results/tracerelay.md)."""
    return TraceRelayConfig(vocab_size=vocab, n_out=n_out, **{"init_std": PAPER_INIT_STD, **kw})


def cpu_model(vocab: int, n_out: int, **kw) -> TraceRelayConfig:
    """The cpu presets' model: H = 32, trace widths [32, 16, 32], FFN 128 (about 4x cheaper)."""
    return TraceRelayConfig(vocab_size=vocab, n_out=n_out, d_model=32, d_trace=[32, 16, 32], d_ffn=128, **kw)


def smoke_model(vocab: int, n_out: int, **kw) -> TraceRelayConfig:
    """The smoke presets' model: H = 16, trace widths [8, 8, 8], two heads, L = 3, R = 1, W = 2."""
    return TraceRelayConfig(vocab_size=vocab, n_out=n_out, d_model=16, d_trace=[8, 8, 8], n_heads=2, d_ffn=32,
                            left_window=3, right_window=1, stride=2, **kw)


def paper_train(**kw) -> TrainConfig:
    """App. A: AdamW 3e-4 (0.9, 0.999), wd 0.01, 100-update linear warmup then constant, clip 1,
    batch 64, validation every 250, two consecutive ID means >= 99% stop, cap 20,000."""
    base = dict(steps=20000, batch_size=64, lr=3e-4, betas=[0.9, 0.999], weight_decay=0.01, schedule="constant",
                warmup_steps=100, warmup_start=0.01, grad_clip=1.0, log_every=50, eval_every=250,
                checkpoint_every=250, keep_checkpoints=True, select_metric="id_acc", select_mode="max",
                tie_break_metric="id_ce", tie_break_mode="min", stop_metric="id_acc", stop_threshold=0.99,
                stop_mode="max", stop_consecutive=2, threads="auto")
    base.update(kw)
    return TrainConfig(**base)


def smoke_train(**kw) -> TrainConfig:
    """30 updates at rate 3e-3, batch 8, validation every 15: seconds, for tests."""
    return paper_train(**{**dict(steps=30, batch_size=8, lr=3e-3, warmup_steps=5, eval_every=15,
                                 checkpoint_every=15, log_every=5), **kw})


def cpu_train(**kw) -> TrainConfig:
    """Sized for 2 shared CPU cores (about 30 minutes a run): the paper's stopping and selection
    rules with a 1e-3 rate (3e-3 collapsed to chance by update 500), batch 32 and a 7,000-update
    cap; warmup-stable-decay, the last 30% a cosine down to 5% of the rate, so that the constant
    stretch is long and the end is not left at full-rate noise."""
    return paper_train(**{**dict(steps=7000, batch_size=32, lr=1e-3, schedule="wsd", decay_fraction=0.3,
                                 min_lr_ratio=0.05, eval_every=250, checkpoint_every=250), **kw})


SMOKE_EVAL = dict(n_val=16, n_final=16, batch_size=16)  # evaluation set sizes of every smoke preset


@dataclass
class EqualRepeatsRunConfig:
    seed: int = 42
    task: EqualRepeatsConfig = field(default_factory=EqualRepeatsConfig)
    model: TraceRelayConfig = field(default_factory=lambda: paper_model(2, 3))
    train: TrainConfig = field(default_factory=paper_train)
    eval: TraceRelayEvalConfig = field(default_factory=TraceRelayEvalConfig)


@dataclass
class DyckRunConfig:
    seed: int = 42
    task: DyckConfig = field(default_factory=DyckConfig)
    model: TraceRelayConfig = field(default_factory=lambda: paper_model(16, 8))
    train: TrainConfig = field(default_factory=paper_train)
    eval: TraceRelayEvalConfig = field(default_factory=lambda: TraceRelayEvalConfig(n_final=2000, batch_size=64))


@dataclass
class MostFreqRunConfig:
    seed: int = 42
    task: MostFreqConfig = field(default_factory=MostFreqConfig)
    model: TraceRelayConfig = field(default_factory=lambda: paper_model(8, 6))
    train: TrainConfig = field(default_factory=paper_train)
    eval: TraceRelayEvalConfig = field(default_factory=lambda: TraceRelayEvalConfig(
        val_lengths=[128, 192, 256], id_lengths=[128, 192, 256], ood_lengths=[512, 1024], n_val=512, n_final=1024,
        batch_size=64))
