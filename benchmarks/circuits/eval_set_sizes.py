"""Token counts of the evaluation sets (depths 3-30, 100 expressions per depth) against the paper's.

The paper gives, per task, the mean (SD) and maximum tokens over its evaluation sets and the mean
at depth 30, but not its generator. Ours (``enumeration.sample_expression``, one parameter
``p_deep`` per grammar, calibrated to the depth-30 mean) is drawn here over ``--seeds`` data
seeds, and the generator's exact mean per depth is computed from its size recurrence
(``enumeration.mean_tokens_by_depth``).

    .venv/bin/python benchmarks/circuits/eval_set_sizes.py
    .venv/bin/python benchmarks/circuits/eval_set_sizes.py --seeds 5 --grammars boolean
"""
from __future__ import annotations

import argparse

import numpy as np

from tinyscope.studies.circuits.enumeration import mean_tokens_by_depth, sample_expression
from tinyscope.studies.circuits.grammar import PAPER_GRAMMARS, encode, grammar
from tinyscope.studies.circuits.task import P_DEEP

# the paper's evaluation sets: mean (SD) and max over depths 3-30, mean at depth 30
PAPER_TOKENS = {"boolean": (710.9, 914.7, 7441, 2748), "arithmetic": (1937.9, 2725.3, 18085, 8509),
                "listops": (3852.2, 5819.3, 41389, 18376)}
DEPTHS = range(3, 31)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="data seeds to draw the 2,800-expression set from")
    ap.add_argument("--per-depth", type=int, default=100)
    ap.add_argument("--grammars", nargs="+", default=list(PAPER_GRAMMARS), choices=list(PAPER_GRAMMARS))
    args = ap.parse_args()
    print(f"{'grammar':<11} {'source':<16} {'mean':>8} {'SD':>8} {'SD/mean':>7} {'max':>7} {'mean d=30':>10}")
    for name in args.grammars:
        g, p = grammar(name), P_DEEP[name]
        m, sd, mx, m30 = PAPER_TOKENS[name]
        print(f"{name:<11} {'paper':<16} {m:>8.1f} {sd:>8.1f} {sd / m:>7.2f} {mx:>7} {m30:>10}")
        s = mean_tokens_by_depth(g, p)
        print(f"{name:<11} {'recurrence':<16} {s[3:].mean():>8.1f} {'':>8} {'':>7} {'':>7} {s[30]:>10.0f}")
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            sizes = np.array([[len(encode(g, sample_expression(g, rng, d, p))) for _ in range(args.per_depth)]
                              for d in DEPTHS])  # (28, per_depth)
            flat = sizes.ravel()
            print(f"{name:<11} {f'drawn, seed {seed}':<16} {flat.mean():>8.1f} {flat.std(ddof=1):>8.1f} "
                  f"{flat.std(ddof=1) / flat.mean():>7.2f} {flat.max():>7} {sizes[-1].mean():>10.0f}")


if __name__ == "__main__":
    main()
