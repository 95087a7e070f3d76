"""CPU cost of the Figure-1 checkpoints (sih-figure1-*): a training step of the cpu preset at each
curriculum horizon and at Table 15's 64-cell ring and T = 64 (same width and batch), then one
validation pass, the final evaluation and the Figure-1 row of an untrained cpu-preset model.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/spatial_induction/figure1_cost.py [--reps 3]

Times are process CPU seconds (one intra-op thread), so a loaded machine stretches the wall
time but not them; step cases run interleaved and the first of each is dropped.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import torch

from tinyscope.models.transformer import Transformer
from tinyscope.runs.registry import get
from tinyscope.studies.spatial_induction.coverage import cover
from tinyscope.studies.spatial_induction.experiment import model_config
from tinyscope.studies.spatial_induction.rollout import rollout_panel
from tinyscope.studies.spatial_induction.rules import stavskaya, wolfram
from tinyscope.studies.spatial_induction.task import CellularTask

CASES = {  # name: (experiment, T, grid); None = the cpu preset's
    "cpu det, T=32, 32 cells": ("sih-figure1-det", None, None),
    "cpu det, T=13, 32 cells": ("sih-figure1-det", 13, None),
    "cpu det, T=20, 32 cells": ("sih-figure1-det", 20, None),
    "cpu stoch, T=32, 32 cells": ("sih-figure1-stoch", None, None),
    "Table 15 det, T=64, 64 cells, d_model 64": ("sih-figure1-det", 64, [64]),
}


def _setup(name: str, T: int | None, grid: list[int] | None):
    exp = get(name)
    cfg = exp.presets["cpu"]()
    over = {k: v for k, v in dict(T=T, grid=grid).items() if v is not None}
    task_cfg = dataclasses.replace(cfg.task, curriculum_T=[], curriculum_steps=[], curriculum_alpha=[], **over)
    task = CellularTask(task_cfg)
    d = cfg.model.d_model
    mc = cfg.model if not over else model_config(task_cfg, exp.arch, d, 4 * d, 4, init="gpt2")
    model = Transformer(mc)
    return task, model, torch.optim.AdamW(model.parameters(), lr=1e-3), cfg.train.batch_size


def _step(task, model, opt, batch_size: int, rng) -> float:
    b = task.sample(rng, batch_size)
    x, y = torch.from_numpy(b.tokens).long(), torch.from_numpy(b.targets).long()
    t0 = time.process_time()
    loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-eval", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    built = {k: _setup(*v) for k, v in CASES.items()}
    rng = np.random.default_rng(0)
    times = {k: [] for k in CASES}
    for _ in range(args.reps):
        for k, (task, model, opt, bs) in built.items():
            times[k].append(_step(task, model, opt, bs, rng))
    base = float(np.median(times[next(iter(CASES))][1:]))
    for k, v in times.items():
        med = float(np.median(v[1:]))
        print(f"{k:42s} {med:7.3f} CPU s/step  ratio {med / base:5.2f}", flush=True)
    if args.skip_eval:
        return
    for regime in ("det", "stoch"):
        exp = get(f"sih-figure1-{regime}")
        cfg = exp.presets["cpu"]()
        task, model = CellularTask(cfg.task), Transformer(cfg.model).eval()
        t = time.process_time()
        exp.evaluator(cfg, task)(model)
        val = time.process_time() - t
        t = time.process_time()
        exp.final_evaluation(cfg, task, model)
        final = time.process_time() - t
        table = wolfram(110) if regime == "det" else stavskaya(0.29)
        traj, ok = cover(task.lattice, table[None], cfg.task.T, cfg.task.T0, np.random.default_rng(42), tries=1000)
        t = time.process_time()
        rollout_panel(model, task.layout, traj, cfg.task.T0, regime == "stoch", "row")
        row = time.process_time() - t
        print(f"{regime}: validation pass (sets built) {val:.1f} s, final evaluation {final:.1f} s, "
              f"Figure-1 row {row:.1f} s (CPU); held-out rule covered: {bool(ok[0])}", flush=True)


if __name__ == "__main__":
    main()
