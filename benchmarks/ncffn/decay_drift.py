"""Why the quantifier half-lives of an ncffn-lm run move or stay: Adam's drift ratio of each decay
logit's gradient at kept checkpoints, beside the rate budget and what weight decay alone would do.

    OMP_NUM_THREADS=1 python benchmarks/ncffn/decay_drift.py RUN [--steps 100,600,1200] [--batches 24]

RUN: a finished run trained with quantifiers and kept checkpoints (``--set quant.layers=0,1 --set
train.checkpoint_every=100 --set train.keep_checkpoints=true``). For each checkpoint step, on
``--batches`` fresh training batches: the median drift ratio mean(g)/rms(g) over the units (Adam
moves a logit by about lr times it per step; > 0: toward shorter half-lives) and the share of units
pushed shorter. Printed last: the run's rate budget (sum of its rates, the farthest Adam can move a
logit; 69 -> 1.5 tokens needs 4.1) and the half-life weight decay alone would leave at the run's
``train.weight_decay`` (target: a run whose decays are learned ends away from that number).
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from tinyscope.runs.rundir import load_run
from tinyscope.studies.ncffn.legibility_training import decay_gradient_signal, rate_budget, weight_decay_half_life
from tinyscope.tasks.base import step_rng
from tinyscope.train.trainer import masked_next_token_loss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--steps", default="100,600,1200")
    ap.add_argument("--batches", type=int, default=24)
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = load_run(args.run, "last")
    cfg = run.cfg
    batches = [run.task.sample(step_rng(1000 + cfg.seed, i), cfg.train.batch_size).to_torch("cpu")
               for i in range(args.batches)]  # not the run's own training batches (other stream)
    for step in (int(s) for s in args.steps.split(",")):
        run.load_step(step)
        sig = decay_gradient_signal(run.model.train(), batches, masked_next_token_loss)
        r = sig["ratio"]
        row = {"step": step, "median_ratio": float(np.median(r)), "share_pushed_shorter": float((r > 0).mean())}
        row |= {f"median_ratio_{k}": float(np.median(r[sig["kind"] == k])) for k in ("exist", "prop")}
        print(json.dumps(row))
    q = cfg.quant
    print(json.dumps({"rate_budget": rate_budget(cfg.train) * q.decay_lr_mult,
                      "weight_decay_only_half_life": weight_decay_half_life(cfg.train, q.init_decay, cfg.train.weight_decay,
                                                                             q.decay_lr_mult),
                      "decay_weight_decay": q.decay_weight_decay}))


if __name__ == "__main__":
    main()
