"""Compiled spatial induction heads against the Bayes posterior.

    .venv/bin/python benchmarks/spatial_induction/construction_vs_bayes.py [--n-traj 1000] [--kappa 0.01]

For each setting (1D V=2, 1D V=3, 2D von Neumann; stochastic rules, Table 10), builds
Construction I + the Layer-2 head at the recipe of App. H.7 for the budget kappa, evaluates it on
``--n-traj`` coverage-filtered test trajectories and prints the time to build, the time to
evaluate and the largest KL(Bayes || B4) over resolvable scored cells; deterministic circuits get
their TF cell accuracy. Then the grid-independence table (Lemma 6). The last line is the largest
KL over all settings next to kappa.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from tinyscope.studies.spatial_induction.bayes import stream_predictive
from tinyscope.studies.spatial_induction.constructions.dedicated_heads import construction_one
from tinyscope.studies.spatial_induction.constructions.shared_head import construction_two
from tinyscope.studies.spatial_induction.experiment import task_config
from tinyscope.studies.spatial_induction.task import CellularTask


def evaluate(task, batch_tokens, traj, loss_mask, c, chunk, alpha):
    q, resolvable = stream_predictive(task.layout, traj, alpha=alpha)
    kls, correct = [], []
    for i in range(0, len(batch_tokens), chunk):
        out = c.predictive(batch_tokens[i:i + chunk]).numpy()  # (b, N, V)
        scored = loss_mask[i:i + chunk] & resolvable[i:i + chunk]
        qi = q[i:i + chunk]
        if alpha > 0:
            kls.append((qi * (np.log(qi) - np.log(np.clip(out, 1e-300, None)))).sum(-1)[scored])
        correct.append((out.argmax(-1) == qi.argmax(-1))[scored])
    return (float(np.concatenate(kls).max()) if kls else None), float(np.concatenate(correct).mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-traj", type=int, default=1000)
    ap.add_argument("--kappa", type=float, default=0.01)
    ap.add_argument("--chunk", type=int, default=16)
    ap.add_argument("--construction", choices=["I", "II"], default="I")
    ap.add_argument("--no-grids", action="store_true", help="skip the grid-independence table")
    args = ap.parse_args()
    torch.set_num_threads(2)
    worst = 0.0
    for setting in ("eca", "v3", "vn2d"):
        for regime in ("det", "stoch"):
            task = CellularTask(task_config(setting, regime))
            t0 = time.perf_counter()
            build = construction_one if args.construction == "I" else construction_two
            c = build(task.layout, stochastic=regime == "stoch", kappa=args.kappa)
            c.model.double()
            t_build = time.perf_counter() - t0
            n = args.n_traj if regime == "stoch" else min(args.n_traj, 200)
            tables, traj = task.trajectories(np.random.default_rng(42), n, "test", covered=True)
            batch = task.batch(tables, traj, scored_only=True)
            t0 = time.perf_counter()
            kl, acc = evaluate(task, batch.tokens, traj, batch.loss_mask, c, args.chunk, 1.0 if regime == "stoch" else 0.0)
            t_eval = time.perf_counter() - t0
            extra = f"max KL(Bayes||B4) {kl:.3e}" if kl is not None else "deterministic"
            print(f"[{args.construction}] {setting:5s} {regime:5s} n={n:5d}  build {t_build:6.2f} s  evaluate {t_eval:7.1f} s "
                  f"({t_eval / n * 1e3:.1f} ms/traj)  argmax = Bayes argmax: {acc:.4f}  {extra}", flush=True)
            if kl is not None:
                worst = max(worst, kl)
    grids = () if args.no_grids else (("eca", [16]), ("eca", [64]), ("eca", [256]), ("eca", [1024]), ("vn2d", [6, 6]),
                                      ("vn2d", [12, 12]), ("vn2d", [24, 24]), ("vn2d", [32, 32]))
    if grids:
        print(f"grid independence, Construction {args.construction} (deterministic, T=4, T0=3):")
    for setting, grid in grids:
        task = CellularTask(task_config(setting, "det", grid=grid, T=4, T0=3, holdout=[]))
        c = build(task.layout)
        tables, traj = task.trajectories(np.random.default_rng(0), 1, "test", covered=True)
        batch = task.batch(tables, traj, scored_only=True)
        _, acc = evaluate(task, batch.tokens, traj, batch.loss_mask, c, 1, 0.0)
        s = c.sizes()
        print(f"  grid {'x'.join(map(str, grid)):>7s}  |G|={task.lattice.volume:5d}  d_p={s['d_p']}  "
              f"d_model={s['d_model']}  Lambda={s['Lambda']:.0f}  TF cell acc {acc:.4f}", flush=True)
    print(f"Construction {args.construction}: largest KL to the Bayes posterior over {args.n_traj} stochastic trajectories per setting: "
          f"{worst:.3e} (budget kappa = {args.kappa})")


if __name__ == "__main__":
    main()
