"""TraceRelay experiments: Equal Repeats with and without phase inheritance, bounded Dyck-(8, 10)
and Most-Freq (V = 5), with the paper's protocol.

Experiments: ``tracerelay-equal-repeats``, ``tracerelay-equal-repeats-no-inheritance``,
``tracerelay-dyck``, ``tracerelay-most-freq``; presets ``smoke`` (seconds), ``cpu`` (a smaller
model and shorter schedule sized for 2 CPU cores), ``paper`` (App. A, Table 2: H = 64, FFN 256,
three layers, four heads, trace widths [64, d_c, 64], L = 15, R = 7, W = 8; AdamW 3e-4,
betas (0.9, 0.999), weight decay 0.01, 100-update linear warmup then constant, clip 1, batch
64 with one length per batch, ID validation every 250 updates, stop after two consecutive ID
means >= 99%, 20,000-update cap, selection by the ID mean with the cross-entropy tie-break).
The middle width is ``--set model.d_trace=[64,32,64]``.

Metrics (fractions, not percent): ``acc@T`` is the task's headline metric at length T
(Equal Repeats: classification accuracy; Dyck: token-weighted close-type accuracy; Most-Freq:
greedy free-generation exact ranking + EOS), ``ce@T`` its cross-entropy (Most-Freq:
teacher-forced). ``id_acc`` / ``id_ce`` are unweighted means over the ID lengths: the
selection, tie-break and stopping metrics. Final evaluation adds OOD lengths, Dyck slices
(``dist{bin}_acc@T`` / ``dist{bin}_n@T``, ``depth{d}_acc@T`` / ``depth{d}_n@T``; empty bins are
omitted, not zero) and Most-Freq diagnostics, shortcut baselines and teacher-forced / greedy
disagreement counts (``tf_greedy_disagree@T``, their sum and maximum, and ``tf_greedy_n``, the
number of examples they are counted over).

One class, :class:`TraceRelayExperiment`, serves every task: what differs between tasks is a
:class:`TaskSpec` (task and config classes, presets, scoring, and whether the task is a
final-position classification). Configs: :mod:`.config`; scoring: :mod:`.scoring`; figures:
:mod:`.figures`; the paper tables: :mod:`.tables`.
"""
from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
import torch

from tinyscope.errors import check
from tinyscope.runs.experiment import AnalysisOptions, AnalysisResult, Citation, Experiment, View, ViewOptions
from tinyscope.runs.registry import register
from tinyscope.studies.tracerelay.config import (
    SMOKE_EVAL,
    DyckRunConfig,
    EqualRepeatsRunConfig,
    MostFreqRunConfig,
    TraceRelayEvalConfig,
    cpu_model,
    cpu_train,
    smoke_model,
    smoke_train,
)
from tinyscope.studies.tracerelay.figures import length_figure, validation_figure
from tinyscope.studies.tracerelay.model import TraceRelay
from tinyscope.studies.tracerelay.scoring import final_position_loss, score_dyck, score_equal_repeats, score_most_freq
from tinyscope.studies.tracerelay.tables import TABLES
from tinyscope.studies.tracerelay.task import (
    BoundedDyck,
    DyckConfig,
    EqualRepeats,
    EqualRepeatsConfig,
    MostFreq,
    MostFreqConfig,
)
from tinyscope.tasks.base import Batch, fingerprint

CITATION = Citation("", "TraceRelay: Attention-Aligned Recurrence over Rolling Traces", 2026)
FRESH_STREAM = 1  # the generator stream of fresh final sets (eval.eval_seed), apart from every run's own

# ----------------------------------------------------------------------------- presets
ER_PRESETS = {
    "smoke": lambda: EqualRepeatsRunConfig(
        task=EqualRepeatsConfig(8, 16), model=smoke_model(2, 3), train=smoke_train(),
        eval=TraceRelayEvalConfig(val_lengths=[8, 16], id_lengths=[8, 16], ood_lengths=[32], **SMOKE_EVAL)),
    "cpu": lambda: EqualRepeatsRunConfig(
        model=cpu_model(2, 3), train=cpu_train(),
        eval=TraceRelayEvalConfig(n_val=256, n_final=1000, n_ood=500, ood_lengths=[512, 1024])),
    "paper": lambda: EqualRepeatsRunConfig(),
}

DYCK_PRESETS = {
    "smoke": lambda: DyckRunConfig(
        task=DyckConfig(k=2, m=3, min_len=8, max_len=16), model=smoke_model(4, 2), train=smoke_train(),
        eval=TraceRelayEvalConfig(val_lengths=[8, 16], id_lengths=[8, 16], ood_lengths=[32], **SMOKE_EVAL)),
    "cpu": lambda: DyckRunConfig(
        model=cpu_model(16, 8), train=cpu_train(steps=7500),
        eval=TraceRelayEvalConfig(n_val=128, n_final=500, n_ood=200, ood_lengths=[512, 1024, 4096], batch_size=64)),
    "paper": lambda: DyckRunConfig(),
}

MF_PRESETS = {
    "smoke": lambda: MostFreqRunConfig(
        task=MostFreqConfig(V=3, gap=1, min_len=8, max_len=12), model=smoke_model(6, 4), train=smoke_train(),
        eval=TraceRelayEvalConfig(val_lengths=[8, 12], id_lengths=[8, 12], ood_lengths=[24], **SMOKE_EVAL)),
    "cpu": lambda: MostFreqRunConfig(
        model=cpu_model(8, 6), train=cpu_train(steps=2500),
        eval=TraceRelayEvalConfig(val_lengths=[128, 192, 256], id_lengths=[128, 192, 256], ood_lengths=[512, 1024],
                                  n_val=256, n_final=512, batch_size=64)),
    "paper": lambda: MostFreqRunConfig(),
}


# ----------------------------------------------------------------------------- tasks
Score = Callable[[torch.nn.Module, object, Batch, int, bool], dict]  # (model, task, batch, batch_size, final)


@dataclass(frozen=True)
class TaskSpec:
    """What one TraceRelay task brings to the experiment.

    task_cls builds the task from ``cfg.task``; config_cls and presets are the run configs;
    score measures a model on one evaluation batch (``final``: the full set of metrics);
    classification: the task is read at the final position (Equal Repeats), so training uses
    :func:`final_position_loss`, the final evaluation reports the class balance and the length
    figure draws the 1/n chance line."""

    task_cls: type
    config_cls: type
    presets: Mapping[str, Callable[[], object]]
    score: Score
    classification: bool = False


EQUAL_REPEATS = TaskSpec(EqualRepeats, EqualRepeatsRunConfig, ER_PRESETS,
                         lambda model, task, batch, bs, final: score_equal_repeats(model, task, batch, bs),
                         classification=True)
DYCK = TaskSpec(BoundedDyck, DyckRunConfig, DYCK_PRESETS,
                lambda model, task, batch, bs, final: score_dyck(model, task, batch, bs, slices=final))
MOST_FREQ = TaskSpec(MostFreq, MostFreqRunConfig, MF_PRESETS,
                     lambda model, task, batch, bs, final: score_most_freq(model, task, batch, bs, baselines=final))


# ----------------------------------------------------------------------------- the experiment
class TraceRelayExperiment(Experiment):
    """TraceRelay trained on one task (``spec``), with phase inheritance on or off (``inherit``:
    every preset's ``model.inherit``)."""

    citation = CITATION
    study = "tracerelay"

    def __init__(self, name: str, description: str, spec: TaskSpec, inherit: bool = True):
        self.name, self.description, self.spec, self.inherit = name, description, spec, inherit
        self.config_cls = spec.config_cls
        self.presets = {preset: (lambda f=f: self._with_inherit(f())) for preset, f in spec.presets.items()}

    def _with_inherit(self, cfg):
        cfg.model.inherit = self.inherit
        return cfg

    # ------------------------------------------------------------ parts
    def build_task(self, cfg):
        return self.spec.task_cls(cfg.task)

    def build_model(self, cfg, task) -> TraceRelay:
        check(cfg.model.vocab_size == task.vocab_size,
              f"model.vocab_size={cfg.model.vocab_size} must be {task.vocab_size} for {self.name}")
        check(cfg.model.n_out == task.n_out, f"model.n_out={cfg.model.n_out} must be {task.n_out} for {self.name}")
        return TraceRelay(cfg.model)

    def objective(self, cfg, task):
        return final_position_loss if self.spec.classification else None

    def score(self, model, task, batch: Batch, cfg, final: bool) -> dict:
        """The task's metrics of ``model`` on one evaluation batch (``final``: the full set of them)."""
        return self.spec.score(model, task, batch, cfg.eval.batch_size, final)

    def evaluator(self, cfg, task):
        sets = {T: task.eval_set(T, cfg.eval.n_val, cfg.eval.val_seed) for T in cfg.eval.val_lengths}

        def evaluate(model) -> dict:
            out = {}
            for T, batch in sets.items():
                m = self.score(model, task, batch, cfg, final=False)
                out[f"acc@{T}"], out[f"ce@{T}"] = m["acc"], m["ce"]
            out["id_acc"] = float(np.mean([out[f"acc@{T}"] for T in sets]))
            out["id_ce"] = float(np.mean([out[f"ce@{T}"] for T in sets]))
            return out

        return evaluate

    def final_set(self, cfg, task, T: int, n: int) -> Batch:
        """The final evaluation set of ``n`` examples at length ``T``: drawn from
        ``eval.final_seed``, or, for a fresh evaluation (``eval.eval_seed`` set), from the fresh
        stream of ``eval.eval_seed``."""
        e = cfg.eval
        if e.eval_seed is None:
            return task.eval_set(T, n, e.final_seed)
        return task.eval_set(T, n, e.eval_seed, stream=FRESH_STREAM)

    def final_sets(self, cfg, task):
        """(length, is_id, batch) of the final evaluation, generated one length at a time."""
        e = cfg.eval
        for T in e.id_lengths:
            yield T, True, self.final_set(cfg, task, T, e.n_final)
        for T in e.ood_lengths:
            yield T, False, self.final_set(cfg, task, T, e.n_ood or e.n_final)

    def final_evaluation(self, cfg, task, model) -> dict:
        model.eval()
        out: dict[str, float] = {}
        id_acc, id_ce, n_examples = [], [], 0
        for T, is_id, batch in self.final_sets(cfg, task):
            m = self.score(model, task, batch, cfg, final=True)
            n_examples += len(batch)
            out.update({f"{k}@{T}": float(v) for k, v in m.items()})
            if is_id:
                id_acc.append(m["acc"])
                id_ce.append(m["ce"])
        out["id_acc"], out["id_ce"] = float(np.mean(id_acc)), float(np.mean(id_ce))
        disagree = [v for k, v in out.items() if k.startswith("tf_greedy_disagree@")]
        if disagree:  # Most-Freq: examples whose teacher-forced and greedy exactness differ (App. A)
            out["tf_greedy_disagree"], out["tf_greedy_disagree_max"] = float(sum(disagree)), float(max(disagree))
            out["tf_greedy_n"] = float(n_examples)  # the examples behind the count (the paper: 18 of 46,080)
        if self.spec.classification:
            labels = self.final_set(cfg, task, cfg.eval.id_lengths[-1], cfg.eval.n_final).meta["label"]
            counts = np.bincount(labels, minlength=task.n_out)
            out.update({f"class{c}_n": float(n) for c, n in enumerate(counts)})
            out["majority_baseline"] = float(counts.max() / counts.sum())
        return out

    def id_max_length(self, cfg) -> int:
        return max(cfg.eval.id_lengths)

    def eval_fingerprint(self, cfg, task) -> str:
        e = cfg.eval
        parts = [self.final_set(cfg, task, T, min(e.n_final, 64)).fingerprint()
                 for T in list(e.id_lengths) + list(e.ood_lengths)]
        fresh = [] if e.eval_seed is None else [e.eval_seed, FRESH_STREAM]
        return fingerprint(np.frombuffer("".join(parts).encode(), np.uint8),
                           np.array([e.n_final, e.n_ood or e.n_final, e.final_seed, *fresh]))

    def fresh_eval_config(self, cfg, seed: int, n: int | None = None):
        """The final sets drawn afresh from ``seed`` at the run's own ID and OOD lengths, ``n``
        examples per length (default: the run's counts); model, training and validation unchanged."""
        e = cfg.eval
        fresh = dataclasses.replace(e, eval_seed=int(seed), n_final=n or e.n_final, n_ood=n or e.n_ood)
        return dataclasses.replace(cfg, eval=fresh)

    def claims(self) -> list:
        from tinyscope.studies.tracerelay.claims import CLAIMS

        return [c for c in CLAIMS if c.experiment == self.name]

    # ------------------------------------------------------------ what a run offers
    def views(self, run, options: ViewOptions | None = None) -> list[View]:
        views = [View("validation_history", "Fig. 5",
                      "ID validation accuracy per length and their mean against the update; dashed: the 99% "
                      "stopping line", lambda: validation_figure(run.metrics(), self.name))]
        metrics = run.results.get("metrics", {})
        if metrics:
            chance = run.cfg.model.n_out if self.spec.classification else None
            views.append(View("accuracy_by_length", "Figs. 2-4",
                              "final accuracy of the selected checkpoint against the evaluation length"
                              + ("; dotted: chance" if chance else ""),
                              lambda: length_figure(metrics, chance, self.name)))
        return views

    def analyses(self) -> tuple[str, ...]:
        """Most-Freq's OOD diagnosis (:mod:`.analysis`): kept-gap sets, phase aliasing, rescaled
        increments, bf16 evaluation."""
        from tinyscope.studies.tracerelay.analysis import ANALYSES

        return ANALYSES if self.spec is MOST_FREQ else ()

    def analyze(self, run, options: AnalysisOptions) -> AnalysisResult:
        from tinyscope.studies.tracerelay import analysis
        from tinyscope.studies.tracerelay.figures import (
            aliasing_figure,
            kept_gap_figure,
            phase_count_figure,
            phase_trace_figure,
            rescaled_figure,
        )

        if self.spec is not MOST_FREQ:
            return super().analyze(run, options)
        cfg, task, model = run.cfg, run.task, run.model.eval()
        n = min(options.n, cfg.eval.n_final)
        result = AnalysisResult({"n": n})
        if "kept_gaps" in options.only:
            numbers = analysis.kept_gap_analysis(self, cfg, task, model, n)
            result.numbers["kept_gaps"] = numbers
            result.figures["kept_gaps"] = kept_gap_figure(numbers)
            result.captions["kept_gaps"] = ("greedy exact and top-1 on the plain final sets and on sets that keep "
                                            f"the relative count gaps of T = {numbers['reference']}")
        if "phase" in options.only:
            numbers, data = analysis.phase_analysis(self, cfg, task, model, n)
            result.numbers["phase"] = numbers
            result.figures.update(phase_traces=phase_trace_figure(data),
                                  phase_vs_count=phase_count_figure(data, list(cfg.eval.id_lengths)),
                                  phase_aliasing=aliasing_figure(numbers))
            result.captions.update(
                phase_traces="unwrapped phase of each layer's most count-like channel against the position",
                phase_vs_count="lineage-end phases against the ID count fit; shaded: ID range, dashed: one turn away",
                phase_aliasing="span (turns) and aliased fraction of the count-like channels by length")
        if "rescaled" in options.only:
            numbers = analysis.rescaled_analysis(self, cfg, task, model, n)
            result.numbers["rescaled"] = numbers
            result.figures["rescaled"] = rescaled_figure(numbers)
            result.captions["rescaled"] = (f"greedy exact at the OOD lengths with the relay increments of each layer set "
                                           f"multiplied by T_ref / T (T_ref = {numbers['reference']}); hatched: "
                                           "kept-gap sets")
        if "precision" in options.only:
            result.numbers["precision"] = analysis.precision_analysis(self, cfg, task, model, n)
        return result

    def tables(self) -> list:
        return [t for t in TABLES if any(fnmatch.fnmatchcase(self.name, p) for p in t.experiments)]


register(TraceRelayExperiment("tracerelay-equal-repeats", "TraceRelay on Equal Repeats, with phase inheritance",
                              EQUAL_REPEATS))
register(TraceRelayExperiment("tracerelay-equal-repeats-no-inheritance",
                              "TraceRelay on Equal Repeats, no-inheritance ablation (theta = wrap(u))",
                              EQUAL_REPEATS, inherit=False))
register(TraceRelayExperiment("tracerelay-dyck", "TraceRelay on bounded Dyck-(8, 10) closing-type prediction", DYCK))
register(TraceRelayExperiment("tracerelay-most-freq", "TraceRelay on Most-Freq (V=5) with greedy free generation",
                              MOST_FREQ))
