"""CoT stage 0 of the constrained model: does every thinking token get learned, per learning rate and batch?

For each (lr, batch, seed) the constrained model (``arch=constrained``) is trained on full CoT (every
node supervised; AdamW, beta = (0.9, 0.98), no warmup, clipping 1.0) until every node's teacher-forced
accuracy on 512 validation inputs is >= 99% (checked every 25 steps) or ``--steps`` run out. Printed
per setting: seeds solved, samples to 99%, and for the unsolved seeds the stuck level-1 nodes and the
number of stuck nodes (< 90%). Target: at n = 30, k = 16 the claims' lr (0.03) solves 5/5 seeds.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/log_icot/constrained_stage0.py --n 30 --k 16 --lrs 0.1,0.03,0.01
"""
from __future__ import annotations

import argparse
import itertools

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.studies.log_icot.model import ConstrainedParityConfig, ConstrainedParityTransformer
from tinyscope.studies.log_icot.task import Parity, ParityConfig, node_levels


def train_stage0(task: Parity, lr: float, batch: int, seed: int, steps: int) -> tuple[int | None, np.ndarray]:
    """(samples when every node first reached 99%, or None; final per-node validation accuracy (k-1,))."""
    n, k = task.n, task.k
    val = task.eval_batch("val", ())
    tokens, nodes = torch.from_numpy(val.tokens), val.meta["nodes"]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = ConstrainedParityTransformer(ConstrainedParityConfig(), n=n, k=k)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    for step in range(steps + 1):
        if step % 25 == 0:
            with torch.no_grad():
                acc = (model(tokens)[:, n:n + k - 1].argmax(-1).numpy() == nodes).mean(0)  # (k-1,)
            if acc.min() >= 0.99:
                return step * batch, acc
        b = task.sample(rng, batch, ())
        t, y, mask = (torch.from_numpy(a) for a in (b.tokens, b.targets, b.loss_mask))
        loss = F.cross_entropy(model(t)[mask], y[mask])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return None, acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--lrs", default="0.1,0.03,0.01")
    ap.add_argument("--batches", default="64")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1")
    ap.add_argument("--steps", type=int, default=1000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    task = Parity(ParityConfig(n=args.n, k=args.k, n_val=512))
    level = node_levels(args.k)
    for lr, batch in itertools.product([float(x) for x in args.lrs.split(",")], [int(x) for x in args.batches.split(",")]):
        solved, stuck = [], []
        for seed in range(args.seeds):
            samples, acc = train_stage0(task, lr, batch, seed, args.steps)
            if samples is not None:
                solved.append(samples)
            else:
                bad = np.flatnonzero(acc < 0.9)
                stuck.append((seed, [int(j) for j in bad if level[j] == 1], len(bad)))
        print(f"n={args.n} k={args.k} lr={lr} batch={batch}: solved {len(solved)}/{args.seeds}; samples to 99% "
              f"{solved}; unsolved (seed, stuck level-1 nodes, stuck nodes): {stuck}", flush=True)


if __name__ == "__main__":
    main()
