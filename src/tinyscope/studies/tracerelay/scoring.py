"""Scoring and greedy decoding of the TraceRelay tasks.

Each ``score_*`` function measures a model on one fixed evaluation batch of a single length and
returns fractions (not percent): ``acc`` is the task's headline metric (Equal Repeats:
classification accuracy; Dyck: token-weighted close-type accuracy; Most-Freq: greedy
free-generation exact ranking + EOS) and ``ce`` its cross-entropy (Most-Freq: teacher-forced).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.models.utils import device_of
from tinyscope.studies.tracerelay.model import TraceRelay
from tinyscope.studies.tracerelay.task import MostFreq, dyck_slices
from tinyscope.tasks.base import Batch


def chunks(batch: Batch, size: int) -> Iterator[Batch]:
    """Consecutive sub-batches of at most ``size`` rows."""
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
    """Accuracy and cross-entropy of the class read at the final position (one length per set)."""
    correct, losses = [], []
    for part in chunks(batch, bs):
        t = part.to_torch(device_of(model))
        logits = model(t["tokens"])[:, -1].float()  # (b, 3) final position (one length per set)
        correct.append((logits.argmax(-1) == t["label"]).cpu())
        losses.append(F.cross_entropy(logits, t["label"], reduction="sum").cpu())
    n = len(batch)
    return {"acc": torch.cat(correct).float().mean().item(), "ce": float(sum(losses)) / n}


@torch.no_grad()
def score_dyck(model, task, batch: Batch, bs: int, slices: bool = False) -> dict:
    """Token-weighted close-type accuracy, cross-entropy and the number of closes; with
    ``slices``, accuracy and counts by matching distance and pre-close depth (empty bins omitted)."""
    correct = np.zeros(batch.tokens.shape, bool)  # (N, T)
    loss_sum, n_targets = 0.0, 0
    for i in range(0, len(batch), bs):
        t = batch.select(slice(i, i + bs)).to_torch(device_of(model))
        logits = model(t["tokens"]).float()  # (b, T, k)
        mask = t["loss_mask"]  # (b, T)
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
    dev = device_of(model)
    n = src.shape[0]
    prompt = torch.from_numpy(np.concatenate([src, np.full((n, 1), task.SEP)], 1)).to(dev)  # (n, T + 1)
    state = model.prefill(prompt)
    outs = []
    logits = state.last_logits  # (n, n_out)
    for i in range(max_new):
        out = logits.float().argmax(-1)  # (n,)
        outs.append(out)
        if i + 1 < max_new:
            feed = torch.where(out == task.EOS_OUT, torch.full_like(out, task.EOS), out)  # (n,)
            logits, state = model.step(feed, state)
    return torch.stack(outs, 1).cpu().numpy()


@torch.no_grad()
def score_most_freq(model, task, batch: Batch, bs: int, baselines: bool = False) -> dict:
    """Greedy free-generation ranking metrics (``acc`` = exact ranking + EOS, top-k, set, termination),
    teacher-forced cross-entropy and exactness, and ``tf_greedy_disagree``, the number of examples
    whose teacher-forced and greedy exactness differ (App. A counts 18 of 46,080 under BF16); with
    ``baselines``, the three shortcut baselines."""
    T = int(batch.meta["source_len"][0])
    src, ranking = batch.tokens[:, :T], batch.meta["ranking"]  # (N, T), (N, V)
    outputs = np.concatenate([greedy_most_freq(model, task, src[i:i + bs]) for i in range(0, len(batch), bs)])
    out = task.score(outputs, ranking)
    loss_sum, tf_exact = 0.0, []
    for part in chunks(batch, bs):
        t = part.to_torch(device_of(model))
        logits = model(t["tokens"])[:, T:].float()  # (b, V + 1, n_out)
        targets = t["targets"][:, T:]  # (b, V + 1)
        loss_sum += F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
        tf_exact.append((logits.argmax(-1) == targets).all(1).cpu())
    tf = torch.cat(tf_exact)  # (N,) bool
    gold = np.concatenate([ranking, np.full((len(ranking), 1), task.EOS_OUT)], 1)  # (N, V + 1)
    greedy = (outputs[:, :gold.shape[1]] == gold).all(1)  # (N,)
    out = {"acc": out.pop("exact"), **out, "ce": loss_sum / batch.loss_mask.sum(),
           "tf_exact": tf.float().mean().item(), "tf_greedy_disagree": float((tf.numpy() != greedy).sum())}
    if baselines:
        for name, pred in (("fixed", task.baseline_fixed_order(src)), ("first", task.baseline_first_appearance(src)),
                           ("suffix32", task.baseline_suffix_frequency(src, 32))):
            b = task.score(pred, ranking)
            out[f"base_{name}_exact"], out[f"base_{name}_top1"] = b["exact"], b["top1"]
    return out
