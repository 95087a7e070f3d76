"""TraceRelay experiments (paper 001): Equal Repeats with and without phase inheritance,
bounded Dyck-(8, 10) and Most-Freq (V = 5), with the paper's protocol and tables.

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
omitted, not zero) and Most-Freq diagnostics and shortcut baselines.

Tables: the layouts of the paper's Tables 1, 3, 4 and 5 are registered as ``tracerelay-table1``,
``tracerelay-table3``, ``tracerelay-table4`` and ``tracerelay-table5``, so that
``tinyscope report DIR --table tracerelay-table1`` prints them (mean ± sample SD over seeds) from
the runs under DIR.
"""
from __future__ import annotations

import abc
import json
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.errors import check
from tinyscope.report.records import RunRecord
from tinyscope.report.tables import FunctionTable, Key, Metric, Table, TableLayout, register_table
from tinyscope.runs.experiment import Citation, Experiment
from tinyscope.runs.registry import register
from tinyscope.studies.tracerelay.model import TraceRelay, TraceRelayConfig
from tinyscope.studies.tracerelay.task import (
    DISTANCE_BINS,
    BoundedDyck,
    DyckConfig,
    EqualRepeats,
    EqualRepeatsConfig,
    MostFreq,
    MostFreqConfig,
    distance_bin_label,
    dyck_slices,
)
from tinyscope.tasks.base import Batch, fingerprint
from tinyscope.train.trainer import TrainConfig

CITATION = Citation("", "TraceRelay: Attention-Aligned Recurrence over Rolling Traces", 2026)


# ----------------------------------------------------------------------------- configs
@dataclass
class TraceRelayEvalConfig:
    """Fixed evaluation sets (App. A, Table 2): drawn from (seed, length), shared by all runs."""

    val_lengths: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    id_lengths: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    ood_lengths: list[int] = field(default_factory=lambda: [512, 1024, 2048, 4096])
    n_val: int = 1024
    n_final: int = 10000
    n_ood: int | None = None        # examples per OOD length; None = n_final
    val_seed: int = 20261007
    final_seed: int = 20261006
    batch_size: int = 128

    def __post_init__(self):
        check(len(self.val_lengths) >= 1, "eval.val_lengths must list at least one length")
        check(self.n_val >= 1 and self.n_final >= 1, f"eval.n_val={self.n_val}, eval.n_final={self.n_final} must be >= 1")
        check(self.batch_size >= 1, f"eval.batch_size={self.batch_size} must be >= 1")


def _model(vocab: int, n_out: int, **kw) -> TraceRelayConfig:
    return TraceRelayConfig(vocab_size=vocab, n_out=n_out, **kw)


def _cpu_model(vocab: int, n_out: int, **kw) -> TraceRelayConfig:
    """The cpu presets' model: H = 32, trace widths [32, 16, 32], FFN 128 (about 4x cheaper)."""
    return TraceRelayConfig(vocab_size=vocab, n_out=n_out, d_model=32, d_trace=[32, 16, 32], d_ffn=128, **kw)


def _smoke_model(vocab: int, n_out: int, **kw) -> TraceRelayConfig:
    return TraceRelayConfig(vocab_size=vocab, n_out=n_out, d_model=16, d_trace=[8, 8, 8], n_heads=2, d_ffn=32,
                            left_window=3, right_window=1, stride=2, **kw)


def paper_train(**kw) -> TrainConfig:
    """App. A: AdamW 3e-4 (0.9, 0.999), wd 0.01, 100-update linear warmup then constant, clip 1,
    batch 64, validation every 250, two consecutive ID means >= 99% stop, cap 20,000."""
    base = dict(steps=20000, batch_size=64, lr=3e-4, betas=[0.9, 0.999], weight_decay=0.01, schedule="constant",
                warmup_steps=100, warmup_start=0.01, grad_clip=1.0, log_every=50, eval_every=250,
                checkpoint_every=250, keep_checkpoints=True, select_metric="id_acc", select_mode="max",
                tie_break_metric="id_ce", tie_break_mode="min", stop_metric="id_acc", stop_threshold=0.99,
                stop_mode="max", stop_consecutive=2, threads=1)
    base.update(kw)
    return TrainConfig(**base)


@dataclass
class EqualRepeatsRunConfig:
    seed: int = 42
    task: EqualRepeatsConfig = field(default_factory=EqualRepeatsConfig)
    model: TraceRelayConfig = field(default_factory=lambda: _model(2, 3))
    train: TrainConfig = field(default_factory=paper_train)
    eval: TraceRelayEvalConfig = field(default_factory=TraceRelayEvalConfig)


@dataclass
class DyckRunConfig:
    seed: int = 42
    task: DyckConfig = field(default_factory=DyckConfig)
    model: TraceRelayConfig = field(default_factory=lambda: _model(16, 8))
    train: TrainConfig = field(default_factory=paper_train)
    eval: TraceRelayEvalConfig = field(default_factory=lambda: TraceRelayEvalConfig(n_final=2000, batch_size=64))


@dataclass
class MostFreqRunConfig:
    seed: int = 42
    task: MostFreqConfig = field(default_factory=MostFreqConfig)
    model: TraceRelayConfig = field(default_factory=lambda: _model(8, 6))
    train: TrainConfig = field(default_factory=paper_train)
    eval: TraceRelayEvalConfig = field(default_factory=lambda: TraceRelayEvalConfig(
        val_lengths=[128, 192, 256], id_lengths=[128, 192, 256], ood_lengths=[512, 1024], n_val=512, n_final=1024,
        batch_size=64))


# ----------------------------------------------------------------------------- scoring
def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _chunks(batch: Batch, size: int):
    for i in range(0, len(batch), size):
        yield batch.select(slice(i, i + size))


def final_position_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """Cross-entropy of the classifier read at each row's final valid position (Equal Repeats)."""
    tokens, length = batch["tokens"], batch["length"]  # (B, T), (B,)
    valid = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < length[:, None]  # (B, T)
    logits = model(tokens, valid)  # (B, T, C)
    last = logits[torch.arange(tokens.shape[0], device=tokens.device), length - 1]  # (B, C)
    return F.cross_entropy(last.float(), batch["label"])


@torch.no_grad()
def score_equal_repeats(model, task, batch: Batch, bs: int) -> dict:
    correct, losses = [], []
    for part in _chunks(batch, bs):
        t = part.to_torch(_device(model))
        logits = model(t["tokens"])[:, -1].float()  # (b, 3) final position (one length per set)
        correct.append((logits.argmax(-1) == t["label"]).cpu())
        losses.append(F.cross_entropy(logits, t["label"], reduction="sum").cpu())
    n = len(batch)
    return {"acc": torch.cat(correct).float().mean().item(), "ce": float(sum(losses)) / n}


@torch.no_grad()
def score_dyck(model, task, batch: Batch, bs: int, slices: bool = False) -> dict:
    correct = np.zeros(batch.tokens.shape, bool)
    loss_sum, n_targets = 0.0, 0
    for i in range(0, len(batch), bs):
        t = batch.select(slice(i, i + bs)).to_torch(_device(model))
        logits = model(t["tokens"]).float()  # (b, T, k)
        mask = t["loss_mask"]
        correct[i:i + bs] = ((logits.argmax(-1) == t["targets"]) & mask).cpu().numpy()
        loss_sum += F.cross_entropy(logits[mask], t["targets"][mask], reduction="sum").item()
        n_targets += int(mask.sum())
    out = {"acc": float(correct[batch.loss_mask].mean()), "ce": loss_sum / n_targets, "n_closes": float(n_targets)}
    if slices:
        s = dyck_slices(correct, batch, task.cfg.m)
        for kind, prefix in (("distance", "dist"), ("depth", "depth")):
            for name, cell in s[kind].items():
                out[f"{prefix}{name}_n"] = float(cell["count"])
                if cell["acc"] is not None:
                    out[f"{prefix}{name}_acc"] = cell["acc"]
    return out


@torch.no_grad()
def greedy_most_freq(model: TraceRelay, task: MostFreq, src: np.ndarray, max_new: int | None = None) -> np.ndarray:
    """Free generation from source + SEP: feed back only the model's own outputs (EOS_OUT -> EOS).
    Uses prefill + bounded-state steps. Returns (n, max_new) output ids."""
    max_new = max_new or task.cfg.V + 1
    dev = _device(model)
    n = src.shape[0]
    prompt = torch.from_numpy(np.concatenate([src, np.full((n, 1), task.SEP)], 1)).to(dev)  # (n, T + 1)
    state = model.prefill(prompt)
    outs = []
    logits = state.last_logits
    for i in range(max_new):
        out = logits.float().argmax(-1)  # (n,)
        outs.append(out)
        if i + 1 < max_new:
            feed = torch.where(out == task.EOS_OUT, torch.full_like(out, task.EOS), out)  # (n,)
            logits, state = model.step(feed, state)
    return torch.stack(outs, 1).cpu().numpy()


@torch.no_grad()
def score_most_freq(model, task, batch: Batch, bs: int, baselines: bool = False) -> dict:
    T = int(batch.meta["source_len"][0])
    src, ranking = batch.tokens[:, :T], batch.meta["ranking"]
    outputs = np.concatenate([greedy_most_freq(model, task, src[i:i + bs]) for i in range(0, len(batch), bs)])
    out = task.score(outputs, ranking)
    loss_sum, tf_exact = 0.0, []
    for part in _chunks(batch, bs):
        t = part.to_torch(_device(model))
        logits = model(t["tokens"])[:, T:].float()  # (b, V + 1, n_out)
        targets = t["targets"][:, T:]
        loss_sum += F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
        tf_exact.append((logits.argmax(-1) == targets).all(1).cpu())
    out = {"acc": out.pop("exact"), **out, "ce": loss_sum / batch.loss_mask.sum(),
           "tf_exact": torch.cat(tf_exact).float().mean().item()}
    if baselines:
        for name, pred in (("fixed", task.baseline_fixed_order(src)), ("first", task.baseline_first_appearance(src)),
                           ("suffix32", task.baseline_suffix_frequency(src, 32))):
            b = task.score(pred, ranking)
            out[f"base_{name}_exact"], out[f"base_{name}_top1"] = b["exact"], b["top1"]
    return out


# ----------------------------------------------------------------------------- experiments
class TraceRelayExperiment(Experiment):
    citation = CITATION
    study = "tracerelay"

    def build_model(self, cfg, task) -> TraceRelay:
        check(cfg.model.vocab_size == task.vocab_size,
              f"model.vocab_size={cfg.model.vocab_size} must be {task.vocab_size} for {self.name}")
        check(cfg.model.n_out == task.n_out, f"model.n_out={cfg.model.n_out} must be {task.n_out} for {self.name}")
        return TraceRelay(cfg.model)

    @abc.abstractmethod
    def score(self, model, task, batch: Batch, cfg, final: bool) -> dict:
        """The task's metrics of ``model`` on one evaluation batch (``final``: the full set of them)."""

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

    def final_sets(self, cfg, task):
        """(length, is_id, batch) of the final evaluation, generated one length at a time."""
        e = cfg.eval
        for T in e.id_lengths:
            yield T, True, task.eval_set(T, e.n_final, e.final_seed)
        for T in e.ood_lengths:
            yield T, False, task.eval_set(T, e.n_ood or e.n_final, e.final_seed)

    def final_evaluation(self, cfg, task, model) -> dict:
        model.eval()
        out: dict[str, float] = {}
        id_acc, id_ce = [], []
        for T, is_id, batch in self.final_sets(cfg, task):
            m = self.score(model, task, batch, cfg, final=True)
            out.update({f"{k}@{T}": float(v) for k, v in m.items()})
            if is_id:
                id_acc.append(m["acc"])
                id_ce.append(m["ce"])
        out["id_acc"], out["id_ce"] = float(np.mean(id_acc)), float(np.mean(id_ce))
        return out

    def figures(self, run) -> dict:
        figs = {"validation_history": validation_figure(run.metrics(), self.name)}
        metrics = run.results.get("metrics", {})
        if metrics:
            chance = run.cfg.model.n_out if "equal-repeats" in self.name else None
            figs["accuracy_by_length"] = length_figure(metrics, chance, self.name)
        return figs

    def id_max_length(self, cfg) -> int:
        return max(cfg.eval.id_lengths)

    def eval_fingerprint(self, cfg, task) -> str:
        e = cfg.eval
        parts = [task.eval_set(T, min(e.n_final, 64), e.final_seed).fingerprint()
                 for T in list(e.id_lengths) + list(e.ood_lengths)]
        return fingerprint(np.frombuffer("".join(parts).encode(), np.uint8),
                           np.array([e.n_final, e.n_ood or e.n_final, e.final_seed]))


class EqualRepeatsExperiment(TraceRelayExperiment):
    config_cls = EqualRepeatsRunConfig

    def __init__(self, inherit: bool):
        self.inherit = inherit
        self.name = "tracerelay-equal-repeats" + ("" if inherit else "-no-inheritance")
        self.description = ("TraceRelay on Equal Repeats, " + ("with phase inheritance" if inherit
                                                               else "no-inheritance ablation (theta = wrap(u))"))
        self.presets = {name: (lambda f=f: self._with_inherit(f())) for name, f in ER_PRESETS.items()}

    def _with_inherit(self, cfg):
        cfg.model.inherit = self.inherit
        return cfg

    def build_task(self, cfg):
        return EqualRepeats(cfg.task)

    def objective(self, cfg, task):
        return final_position_loss

    def score(self, model, task, batch, cfg, final):
        return score_equal_repeats(model, task, batch, cfg.eval.batch_size)

    def final_evaluation(self, cfg, task, model) -> dict:
        out = super().final_evaluation(cfg, task, model)
        labels = task.eval_set(cfg.eval.id_lengths[-1], cfg.eval.n_final, cfg.eval.final_seed).meta["label"]
        counts = np.bincount(labels, minlength=3)
        out.update({f"class{c}_n": float(n) for c, n in enumerate(counts)})
        out["majority_baseline"] = float(counts.max() / counts.sum())
        return out


class DyckExperiment(TraceRelayExperiment):
    name = "tracerelay-dyck"
    description = "TraceRelay on bounded Dyck-(8, 10) closing-type prediction"
    config_cls = DyckRunConfig

    def __init__(self):
        self.presets = DYCK_PRESETS

    def build_task(self, cfg):
        return BoundedDyck(cfg.task)

    def score(self, model, task, batch, cfg, final):
        return score_dyck(model, task, batch, cfg.eval.batch_size, slices=final)


class MostFreqExperiment(TraceRelayExperiment):
    name = "tracerelay-most-freq"
    description = "TraceRelay on Most-Freq (V=5) with greedy free generation"
    config_cls = MostFreqRunConfig

    def __init__(self):
        self.presets = MF_PRESETS

    def build_task(self, cfg):
        return MostFreq(cfg.task)

    def score(self, model, task, batch, cfg, final):
        return score_most_freq(model, task, batch, cfg.eval.batch_size, baselines=final)


# ----------------------------------------------------------------------------- presets
def _smoke_train(**kw) -> TrainConfig:
    return paper_train(**{**dict(steps=30, batch_size=8, lr=3e-3, warmup_steps=5, eval_every=15,
                                 checkpoint_every=15, log_every=5), **kw})


def _cpu_train(**kw) -> TrainConfig:
    """Sized for 2 shared CPU cores (about 30 minutes a run): the paper's stopping and selection
    rules with a 1e-3 rate (3e-3 collapsed to chance by update 500), batch 32 and a 7,000-update
    cap; warmup-stable-decay, the last 30% a cosine down to 5% of the rate, so that the constant
    stretch is long and the end is not left at full-rate noise."""
    return paper_train(**{**dict(steps=7000, batch_size=32, lr=1e-3, schedule="wsd", decay_fraction=0.3,
                                 min_lr_ratio=0.05, eval_every=250, checkpoint_every=250), **kw})


_SMOKE_EVAL = dict(n_val=16, n_final=16, batch_size=16)

ER_PRESETS = {
    "smoke": lambda: EqualRepeatsRunConfig(
        task=EqualRepeatsConfig(8, 16), model=_smoke_model(2, 3), train=_smoke_train(),
        eval=TraceRelayEvalConfig(val_lengths=[8, 16], id_lengths=[8, 16], ood_lengths=[32], **_SMOKE_EVAL)),
    "cpu": lambda: EqualRepeatsRunConfig(
        model=_cpu_model(2, 3), train=_cpu_train(),
        eval=TraceRelayEvalConfig(n_val=256, n_final=1000, n_ood=500, ood_lengths=[512, 1024])),
    "paper": lambda: EqualRepeatsRunConfig(),
}

DYCK_PRESETS = {
    "smoke": lambda: DyckRunConfig(
        task=DyckConfig(k=2, m=3, min_len=8, max_len=16), model=_smoke_model(4, 2), train=_smoke_train(),
        eval=TraceRelayEvalConfig(val_lengths=[8, 16], id_lengths=[8, 16], ood_lengths=[32], **_SMOKE_EVAL)),
    "cpu": lambda: DyckRunConfig(
        model=_cpu_model(16, 8), train=_cpu_train(steps=7500),
        eval=TraceRelayEvalConfig(n_val=128, n_final=500, n_ood=200, ood_lengths=[512, 1024, 4096], batch_size=64)),
    "paper": lambda: DyckRunConfig(),
}

MF_PRESETS = {
    "smoke": lambda: MostFreqRunConfig(
        task=MostFreqConfig(V=3, gap=1, min_len=8, max_len=12), model=_smoke_model(6, 4), train=_smoke_train(),
        eval=TraceRelayEvalConfig(val_lengths=[8, 12], id_lengths=[8, 12], ood_lengths=[24], **_SMOKE_EVAL)),
    "cpu": lambda: MostFreqRunConfig(
        model=_cpu_model(8, 6), train=_cpu_train(steps=2500),
        eval=TraceRelayEvalConfig(val_lengths=[128, 192, 256], id_lengths=[128, 192, 256], ood_lengths=[512, 1024],
                                  n_val=256, n_final=512, batch_size=64)),
    "paper": lambda: MostFreqRunConfig(),
}

register(EqualRepeatsExperiment(inherit=True))
register(EqualRepeatsExperiment(inherit=False))
register(DyckExperiment())
register(MostFreqExperiment())


# ----------------------------------------------------------------------------- figures
def validation_figure(records: list[dict], title: str):
    """ID validation accuracy per length and their mean against the update (Fig. 5 style)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evals = [r for r in records if r.get("split") == "eval"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    keys = sorted({k for r in evals for k in r if k.startswith("acc@")}, key=lambda k: int(k[4:]))
    steps = [r["step"] for r in evals]
    for k in keys:
        ax.plot(steps, [100 * r.get(k, float("nan")) for r in evals], lw=1, alpha=0.7, label=f"T={k[4:]}")
    ax.plot(steps, [100 * r.get("id_acc", float("nan")) for r in evals], "k-", lw=2, label="ID mean")
    ax.axhline(99, ls="--", color="gray", lw=1)
    ax.set(xlabel="update", ylabel="accuracy (%)", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def curves_figure(histories: dict[str, list[dict]], metrics: tuple[str, ...] = ("acc@256", "id_acc"),
                  title: str = "Equal Repeats: phase inheritance on / off"):
    """Validation curves of several runs on one axis (Fig. 5 style): for each run label, each
    metric in percent against the update; 1/3 chance and the 99% stopping line dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    styles = ["-", "--", ":", "-."]
    for color, (label, records) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], histories.items()):
        evals = [r for r in records if r.get("split") == "eval"]
        for style, metric in zip(styles, metrics):
            ax.plot([r["step"] for r in evals], [100 * r.get(metric, float("nan")) for r in evals], style,
                    color=color, lw=1.5, label=f"{label}: {metric}")
    ax.axhline(100 / 3, ls=":", color="gray", lw=1)
    ax.axhline(99, ls="--", color="gray", lw=1)
    ax.set(xlabel="update", ylabel="validation accuracy (%)", title=title, ylim=(0, 100))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def length_figure(metrics: dict, n_classes: int | None, title: str):
    """Final accuracy against evaluation length (Figs. 2-4 style), with the 1/n chance line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = sorted(int(k[4:]) for k in metrics if k.startswith("acc@"))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(lengths, [100 * metrics[f"acc@{T}"] for T in lengths], "o-")
    if n_classes:
        ax.axhline(100 / n_classes, ls=":", color="gray")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="length T", ylabel="accuracy (%)", title=title)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- tables
TASK_NAMES = {"tracerelay-equal-repeats": "Equal Repeats", "tracerelay-equal-repeats-no-inheritance": "Equal Repeats",
              "tracerelay-dyck": "Dyck", "tracerelay-most-freq": "Most-Freq"}
TASK_SHORT = {"Equal Repeats": "ER", "Dyck": "Dyck", "Most-Freq": "MF"}
PAPER_WIDTHS = (64, 32, 16)


def middle_width(run: RunRecord) -> int:
    """d_c: the trace width of the middle layer (Sec. 3: widths [64, d_c, 64])."""
    widths = run.value("model.d_trace")
    return int(widths[len(widths) // 2])


_TASK = Key("Task", "experiment", labels=TASK_NAMES, order=("Equal Repeats", "Dyck", "Most-Freq"))
_INHERIT = Key("Phase inheritance", "model.inherit", labels={True: "On", False: "Off"}, order=("On", "Off"))
_WIDTH = Key("d_c", middle_width, descending=True)
_WIDTH_COLUMN = Key("d_c", lambda r: f"d_c={middle_width(r)}", order=tuple(f"d_c={w}" for w in PAPER_WIDTHS))


def _percent(label: str, name: str, count: str | None = None) -> Metric:
    return Metric(label, name, scale=100, digits=2, count=count)


TABLE1 = register_table(TableLayout(
    name="tracerelay-table1", experiments=("tracerelay-*",), rows=(_TASK, _INHERIT, _WIDTH),
    caption="Best-checkpoint test results, mean ± sample SD over seeds (percent). ID is T = 256 and OOD is "
            "T = 1024 for every task: accuracy (Equal Repeats), close accuracy (Dyck), greedy exact (Most-Freq).",
    metrics=(_percent("ID: 256", "acc@256"), _percent("OOD: 1024", "acc@1024"))))

TABLE3 = register_table(TableLayout(
    name="tracerelay-table3", experiments=("tracerelay-dyck",), rows=(_WIDTH_COLUMN,), transpose=True,
    caption="Dyck diagnostics at T = 4096: percent close accuracy by matching distance and pre-close depth, "
            "mean ± sample SD; Closes counts the targets of the common evaluation set. Empty bins show –.",
    metrics=tuple(_percent(distance_bin_label(lo, hi).replace("-", "–"), f"dist{distance_bin_label(lo, hi)}_acc@4096",
                           count=f"dist{distance_bin_label(lo, hi)}_n@4096") for lo, hi in DISTANCE_BINS)
    + tuple(_percent(f"Depth {d}", f"depth{d}_acc@4096", count=f"depth{d}_n@4096") for d in range(1, 11)),
    count_header="Closes", metric_header="Slice"))

TABLE4 = register_table(TableLayout(
    name="tracerelay-table4", experiments=("tracerelay-most-freq",), rows=(_WIDTH_COLUMN,), transpose=True,
    caption="Most-Freq diagnostics at T = 1024 (percent, mean ± sample SD), with the three shortcut baselines "
            "(exact ranking + EOS).",
    metrics=(_percent("Full exact", "acc@1024"), _percent("Top-1", "top1@1024"),
             _percent("Top-2 prefix", "top2@1024"), _percent("Set exact", "set_exact@1024"),
             _percent("Termination", "termination@1024"),
             _percent("Suffix frequency (32)", "base_suffix32_exact@1024"),
             _percent("First appearance", "base_first_exact@1024"), _percent("Fixed order", "base_fixed_exact@1024"))))


def _exposure_table(runs: list[RunRecord]) -> Table:
    """One row per run: selected and final update (dagger: the cap was reached without the
    stopping rule), training tokens, training-loop minutes (validation included) and parameters."""
    rows = []
    for r in sorted(runs, key=lambda r: (_TASK.sort_key(_TASK.of(r)), _INHERIT.sort_key(_INHERIT.of(r)),
                                         -middle_width(r), r.seed)):
        results = json.loads((r.path / "results.json").read_text())
        dagger = "†" if results.get("stopped") == "max_steps" else ""
        best = f"{r.selected_step:,}" if r.selected_step is not None else "–"
        rows.append([f"{TASK_SHORT[_TASK.of(r)]} / {_INHERIT.of(r)}", middle_width(r), r.seed, best,
                     f"{r.steps:,}{dagger}", f"{(r.tokens or 0) / 1e6:.2f}", f"{(r.wall_time or 0) / 60:.1f}",
                     f"{results.get('n_parameters', 0):,}"])
    return Table(["Task / inheritance", "d_c", "Seed", "Best", "Final", "Tokens (M)", "Min.", "Params"], rows)


TABLE5 = register_table(FunctionTable(
    name="tracerelay-table5", experiments=("tracerelay-*",), build_fn=_exposure_table,
    caption="Training exposure per run: selected (Best) and stopping (Final) update, † = update cap reached, "
            "training tokens, training-loop minutes including validation, parameters."))
