"""Per-rule and per-stratum weights of the coverage-filtered test sets against uniform (App. I.1).

The paper draws each test trajectory's rule uniformly from the (coverage-feasible) test pool and
redraws only the initial state. A filter that redraws the rule with the initial state instead
weights every rule by its acceptance rate. For each setting this prints, over ``--n`` test
trajectories: the spread of per-rule counts against the uniform expectation (ECA), and the test
set's share per stratum against the pool's own share (2D von Neumann, V=3), for today's sampler
and for the old rule-redrawing filter on the same pool. Figure printed last: the largest
per-stratum (2D) or per-rule (ECA) ratio of test-set weight to uniform, target within 1 +- 4 sd.

    nice -n 10 .venv/bin/python benchmarks/spatial_induction/test_set_weights.py --n 4096 --settings eca vn2d
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from tinyscope.runs import registry
from tinyscope.studies.spatial_induction.coverage import is_covered
from tinyscope.studies.spatial_induction.evolve import evolve
from tinyscope.studies.spatial_induction.rules import numbers_of
from tinyscope.studies.spatial_induction.task import CellularTask


def old_filter(task: CellularTask, rng: np.random.Generator, n: int) -> np.ndarray:
    """The pre-fix filter: (rule, x0) drawn together, both rejected when the context is not covered."""
    kept, have = [], 0
    while have < n:
        tables = task.draw_rules(rng, 4 * n, "test")
        ok = is_covered(task.lattice, evolve(task.lattice, tables, task.cfg.T0, rng), task.cfg.T0)
        kept.append(tables[ok])
        have += int(ok.sum())
    return np.concatenate(kept)[:n]


def stratum_of(tables: np.ndarray, hists: list, V: int) -> np.ndarray:
    counts = np.stack([(tables == v).sum(-1) for v in range(V)], -1)
    key = {tuple(h): i for i, h in enumerate(hists)}
    return np.array([key[tuple(sorted(c, reverse=True))] for c in counts.tolist()])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096, help="test trajectories per setting")
    p.add_argument("--settings", nargs="+", default=["eca", "vn2d"], choices=["eca", "vn2d", "v3"])
    p.add_argument("--preset", default="cpu", help="preset whose task (grid, T, T0, pools) is measured")
    args = p.parse_args()
    torch.set_num_threads(1)
    out = {}
    for setting in args.settings:
        cfg = registry.get(f"sih-{setting}-dedicated-det").config(args.preset, 0, [f"task.n_test={args.n}"])
        task = CellularTask(cfg.task)
        new = task.eval_set("test").meta["tables"]
        old = old_filter(task, np.random.default_rng(7), args.n)
        row = {"n": args.n}
        if setting == "eca":
            pool = task.eval_pool("test")
            for name, tabs in (("new", new), ("old", old)):
                numbers = numbers_of(tabs, 2)
                w = np.array([(numbers == r).mean() for r in pool])
                row[name] = {"rules": len(pool), "uniform": 1 / len(pool), "min": float(w.min()), "max": float(w.max()),
                             "max_ratio": float(w.max() * len(pool)), "min_ratio": float(w.min() * len(pool)),
                             "tv_from_uniform": float(0.5 * np.abs(w - 1 / len(pool)).sum())}
            row["infeasible_test_rules"] = sorted(set(task.pool("test").tolist()) - set(pool.tolist()))
            sd = np.sqrt((1 / len(pool)) * (1 - 1 / len(pool)) / args.n) * len(pool)
            row["ratio_sd"] = float(sd)
        else:
            pools = task.splits
            hists = pools.histograms
            share = np.array(pools.strata["test"], dtype=float) / sum(pools.strata["test"])
            for name, tabs in (("new", new), ("old", old)):
                s = np.bincount(stratum_of(tabs, hists, task.lattice.V), minlength=len(hists)) / len(tabs)
                live = share > 0
                row[name] = {"weights": {"-".join(map(str, h)): round(float(x), 4) for h, x in zip(hists, s)},
                             "max_ratio": float((s[live] / share[live]).max()), "min_ratio": float((s[live] / share[live]).min()),
                             "outside_pool_strata": float(s[~live].sum())}
            row["pool_share"] = {"-".join(map(str, h)): round(float(x), 4) for h, x in zip(hists, share)}
            row["pool_train_constant_weight"] = pools.strata["train"][0] / sum(pools.strata["train"])
        out[setting] = row
        print(json.dumps({setting: row}), flush=True)
    worst = max(abs(out[s]["new"]["max_ratio"] - 1) for s in out)
    print(f"largest |test weight / uniform - 1| with today's sampler: {worst:.3f}")


if __name__ == "__main__":
    main()
