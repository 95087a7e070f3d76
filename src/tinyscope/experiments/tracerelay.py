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

Tables: :func:`table1`, :func:`table3`, :func:`table4`, :func:`table5` take run summaries
(:func:`summarize_run`) and return Markdown in the layout of the paper's Tables 1, 3, 4, 5;
:func:`tables` renders all of them for a list of run directories.
"""
from __future__ import annotations

import abc

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import check
from ..models.tracerelay import TraceRelay, TraceRelayConfig
from ..tasks.base import Batch, fingerprint
from ..tasks.formal import (BoundedDyck, DyckConfig, EqualRepeats, EqualRepeatsConfig, MostFreq, MostFreqConfig,
                            dyck_slices)
from ..train.trainer import TrainConfig
from .base import Experiment
from .registry import register


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
    paper = "001"

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
    """Sized for 2 shared CPU cores: the paper's rule with a 1e-3 rate and batch 32."""
    return paper_train(**{**dict(steps=6000, batch_size=32, lr=1e-3, eval_every=250, checkpoint_every=250), **kw})


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
        model=_cpu_model(16, 8), train=_cpu_train(),
        eval=TraceRelayEvalConfig(n_val=128, n_final=500, n_ood=200, ood_lengths=[512, 1024, 4096], batch_size=64)),
    "paper": lambda: DyckRunConfig(),
}

MF_PRESETS = {
    "smoke": lambda: MostFreqRunConfig(
        task=MostFreqConfig(V=3, gap=1, min_len=8, max_len=12), model=_smoke_model(6, 4), train=_smoke_train(),
        eval=TraceRelayEvalConfig(val_lengths=[8, 12], id_lengths=[8, 12], ood_lengths=[24], **_SMOKE_EVAL)),
    "cpu": lambda: MostFreqRunConfig(
        model=_cpu_model(8, 6), train=_cpu_train(),
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
TASK_LABEL = {"tracerelay-equal-repeats": ("Equal Repeats", "On"),
              "tracerelay-equal-repeats-no-inheritance": ("Equal Repeats", "Off"),
              "tracerelay-dyck": ("Dyck", "On"), "tracerelay-most-freq": ("Most-Freq", "On")}
TASK_SHORT = {"Equal Repeats": "ER", "Dyck": "Dyck", "Most-Freq": "MF"}


def summarize_run(path: str | Path) -> dict:
    """What the tables need from one run directory: task, inheritance, d_c, seed, metrics,
    steps (selected / final), tokens, minutes and parameter count."""
    path = Path(path)
    record = json.loads((path / "config.json").read_text())
    results = json.loads((path / "results.json").read_text())
    cfg = record["config"]
    tokens = 0
    if (path / "metrics.jsonl").exists():
        for line in (path / "metrics.jsonl").read_text().splitlines():
            rec = json.loads(line) if line.strip() else {}
            tokens = rec.get("tokens", tokens)
    task, inherit = TASK_LABEL.get(record["experiment"], (record["experiment"], "On"))
    d = cfg["model"]["d_trace"]
    return {"task": task, "inherit": inherit, "d_c": d[len(d) // 2], "seed": cfg["seed"],
            "metrics": results["metrics"], "best": results.get("selected_step"), "final": results["steps"],
            "stopped": results.get("stopped", ""), "tokens": tokens, "minutes": results["wall_time"] / 60,
            "params": results.get("n_parameters")}


def mean_sd(values: list[float], scale: float = 100.0) -> str:
    """``mean ± sample SD`` in percent; a single value has no SD; no values give an en dash."""
    vals = [v * scale for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0]:.2f}"
    return f"{np.mean(vals):.2f} ± {np.std(vals, ddof=1):.2f}"


def _groups(summaries: list[dict], keys: tuple[str, ...]) -> dict:
    out: dict = {}
    for s in summaries:
        out.setdefault(tuple(s[k] for k in keys), []).append(s)
    return out


def _md(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def table1(summaries: list[dict], id_len: int = 256, ood_len: int = 1024) -> str:
    """Table 1: best-checkpoint test results per task / inheritance / d_c, mean ± SD over seeds."""
    order = {"Equal Repeats": 0, "Dyck": 1, "Most-Freq": 2}
    groups = _groups(summaries, ("task", "inherit", "d_c"))
    rows = []
    for (task, inherit, dc) in sorted(groups, key=lambda g: (order.get(g[0], 9), g[1] == "Off", -g[2])):
        runs = groups[(task, inherit, dc)]
        rows.append([task, inherit, dc, mean_sd([r["metrics"].get(f"acc@{id_len}") for r in runs]),
                     mean_sd([r["metrics"].get(f"acc@{ood_len}") for r in runs]), len(runs)])
    return _md(["Task", "Phase inheritance", "d_c", f"ID: {id_len}", f"OOD: {ood_len}", "seeds"], rows)


def table3(summaries: list[dict], length: int = 4096) -> str:
    """Table 3: Dyck close accuracy by matching distance and pre-close depth at ``length``."""
    from ..tasks.formal import DISTANCE_BINS, distance_bin_label

    dyck = [s for s in summaries if s["task"] == "Dyck"]
    groups = _groups(dyck, ("d_c",))
    widths = sorted((g[0] for g in groups), reverse=True)
    max_depth = max((int(k[5:].split("_")[0]) for s in dyck for k in s["metrics"]
                     if k.startswith("depth") and k.endswith(f"_n@{length}")), default=0)
    names = [(f"dist{distance_bin_label(lo, hi)}", distance_bin_label(lo, hi)) for lo, hi in DISTANCE_BINS]
    names += [(f"depth{d}", f"Depth {d}") for d in range(1, max_depth + 1)]
    rows = []
    for key, label in names:
        counts = [s["metrics"].get(f"{key}_n@{length}") for s in dyck]
        count = int(counts[0]) if counts and counts[0] is not None else 0
        rows.append([label, f"{count:,}"] + [mean_sd([s["metrics"].get(f"{key}_acc@{length}") for s in groups[(w,)]])
                                             for w in widths])
    return _md(["Slice", "Closes"] + [f"d_c={w}" for w in widths], rows)


def table4(summaries: list[dict], length: int = 1024) -> str:
    """Table 4: Most-Freq diagnostics at ``length`` (full exact, top-1, top-2, set, termination)."""
    mf = [s for s in summaries if s["task"] == "Most-Freq"]
    groups = _groups(mf, ("d_c",))
    widths = sorted((g[0] for g in groups), reverse=True)
    metrics = [("acc", "Full exact"), ("top1", "Top-1"), ("top2", "Top-2 prefix"), ("set_exact", "Set exact"),
               ("termination", "Termination")]
    rows = [[label] + [mean_sd([s["metrics"].get(f"{key}@{length}") for s in groups[(w,)]]) for w in widths]
            for key, label in metrics]
    base = [("base_suffix32_exact", "Suffix frequency (32)"), ("base_first_exact", "First appearance"),
            ("base_fixed_exact", "Fixed order")]
    rows += [[label] + [mean_sd([s["metrics"].get(f"{key}@{length}") for s in groups[(w,)]]) for w in widths]
             for key, label in base if any(f"{key}@{length}" in s["metrics"] for s in mf)]
    return _md(["Metric"] + [f"d_c={w}" for w in widths], rows)


def table5(summaries: list[dict]) -> str:
    """Table 5: training exposure per run (selected and final update, tokens, minutes, params)."""
    order = {"Equal Repeats": 0, "Dyck": 1, "Most-Freq": 2}
    rows = []
    for s in sorted(summaries, key=lambda s: (order.get(s["task"], 9), s["inherit"] == "Off", -s["d_c"], s["seed"])):
        dagger = "†" if s["stopped"] == "max_steps" else ""
        rows.append([f"{TASK_SHORT.get(s['task'], s['task'])} / {s['inherit']}", s["d_c"], s["seed"],
                     f"{s['best']:,}" if s["best"] is not None else "–", f"{s['final']:,}{dagger}",
                     f"{s['tokens'] / 1e6:.2f}", f"{s['minutes']:.1f}", f"{s['params']:,}"])
    return _md(["Task / inheritance", "d_c", "Seed", "Best", "Final", "Tokens (M)", "Min.", "Params"], rows)


def tables(run_dirs: list[str | Path]) -> str:
    """Tables 1, 3, 4 and 5 (those with data) for a set of TraceRelay run directories."""
    summaries = [summarize_run(p) for p in run_dirs if (Path(p) / "results.json").exists()]
    parts = ["### Table 1", table1(summaries)]
    for task, title, fn, want in (("Dyck", "Table 3", table3, 4096), ("Most-Freq", "Table 4", table4, 1024)):
        lengths = {int(k.split("@")[1]) for s in summaries if s["task"] == task for k in s["metrics"] if "@" in k}
        if lengths:
            T = want if want in lengths else max(lengths)
            parts += [f"### {title} (T = {T})", fn(summaries, T)]
    parts += ["### Table 5", table5(summaries)]
    return "\n\n".join(parts)
