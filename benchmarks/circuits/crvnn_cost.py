"""Cost of the 521,611-parameter CRvNN baseline (``circuit-listops-crvnn``) on this machine.

1. AdamW steps of the ``paper`` preset on the curriculum's own batches (two depth-1 batches, then
   three depth-1+2 ones) and the evaluation time of 20 expressions at depths 5 and 10;
2. ``--trial SECONDS``: instead, train the ``cpu`` preset's model on the curriculum for that long
   (plain AdamW, lr 1e-3, clip 1, no schedule) and print the accuracy at depths 1-3 on 50 fresh
   expressions each, beside the share of the most frequent answer.

    nice -n 10 .venv/bin/python benchmarks/circuits/crvnn_cost.py
    nice -n 10 .venv/bin/python benchmarks/circuits/crvnn_cost.py --trial 420
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from tinyscope.runs.registry import get
from tinyscope.runs.rundir import build
from tinyscope.studies.circuits.crvnn_experiment import crvnn_answers, crvnn_loss
from tinyscope.studies.circuits.task import ExpressionSet
from tinyscope.tasks.base import step_rng


def _subset(data: ExpressionSet, n: int) -> ExpressionSet:
    i = np.arange(min(n, len(data)))
    return ExpressionSet(data.tokens[i], data.tokens[i], data.lengths[i], data.values[i], data.depths[i])


def _step(model, opt, task, cfg, step: int) -> tuple[float, int]:
    b = task.sample(step_rng(cfg.seed, step), cfg.train.batch_size).to_torch()
    model.train()
    loss = crvnn_loss(model, b, task.grammar.blank)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss.detach()), int(b["tokens"].shape[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trial", type=float, default=0.0, help="train this many seconds, then evaluate")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(8739)
    exp = get("circuit-listops-crvnn")
    cfg = exp.config("cpu" if args.trial else "paper")
    task, model = build(exp, cfg)[:2]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    blank = task.grammar.blank
    if args.trial:
        t0, step = time.perf_counter(), 0
        while time.perf_counter() - t0 < args.trial:
            loss, T = _step(model, opt, task, cfg, step)
            step += 1
        print(f"trained {step} steps in {time.perf_counter() - t0:.0f} s (last loss {loss:.3f}, T={T})")
        model.eval()
        for d in (1, 2, 3):
            s = _subset(task.eval_set(d), 50)
            acc = float(np.mean(crvnn_answers(model, s, blank) == s.values))
            print(f"depth {d}: accuracy {acc:.2f} on {len(s)} (most frequent answer {np.bincount(s.values).max() / len(s):.2f})")
        return
    print(f"steps per epoch {task.steps_per_epoch(cfg.train.batch_size)}, paper preset steps {cfg.train.steps}")
    for step in (0, 1, 40, 41, 42):  # 0-1: the depth-1 phase; 40-42: the depth-1+2 phase of epoch 0
        t = time.perf_counter()
        loss, T = _step(model, opt, task, cfg, step)
        print(f"step {step}: T={T} loss {loss:.3f} {time.perf_counter() - t:.2f} s")
    model.eval()
    for d in (5, 10):
        s = _subset(task.eval_set(d), 20)
        t = time.perf_counter()
        crvnn_answers(model, s, blank)
        print(f"evaluation, depth {d}: {len(s)} expressions (mean {s.lengths.mean():.0f} tokens) {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
