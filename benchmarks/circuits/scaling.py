"""Linear cost of the circuit transformer: O(n) per iteration, d iterations, O(n d) in all.

Times the hand-set construction's self-halting loop (the sparse inference path, one expression
per call, median of ``--repeats``) on

1. expressions of growing length n at a fixed depth (``--fixed-depth``),
2. expressions of growing depth d at a fixed length (``--fixed-length``),
3. one depth-30 ListOps expression of about 41,000 tokens (the paper's largest test case),

and prints the fitted exponents of time ~ n^a and time ~ d^b (target: a ~ 1, b ~ 1).
``--exactness N`` instead checks the construction on N random expressions per depth 1..30 for
each grammar and prints the accuracy and exact-halting tables.

    .venv/bin/python benchmarks/circuits/scaling.py
    .venv/bin/python benchmarks/circuits/scaling.py --exactness 1000
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from tinyscope.studies.circuits.construction import construct
from tinyscope.studies.circuits.enumeration import pad_batch, sample_expression
from tinyscope.studies.circuits.grammar import encode, evaluate, grammar
from tinyscope.studies.circuits.task import P_DEEP


def expected_length(g, d: int, p: float) -> float:
    """Mean token count of ``sample_expression(g, ., d, p)`` (the generator's recurrence)."""
    close = 4 if g.blank_after_close else 3
    choices = [k for arities, _ in g.operators.values() for k in arities]
    size = 1.0
    for _ in range(d):
        total = 0.0
        for k in choices:
            m = k * p / (1 - (1 - p) ** k)  # expected deep operands, given at least one
            total += close + m * size + (k - m)
        size = total / len(choices)
    return size


def p_for_length(g, d: int, n: float) -> float:
    lo, hi = 1e-4, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_length(g, d, mid) < n else (lo, mid)
    return (lo + hi) / 2


def expression_near(g, rng, d: int, n: int, tolerance: float = 0.1, tries: int = 400):
    """A depth-d expression whose token count is within ``tolerance`` of n (closest of ``tries``)."""
    p = p_for_length(g, d, n)
    best = None
    for _ in range(tries):
        e = sample_expression(g, rng, d, p)
        ids = encode(g, e)
        if best is None or abs(len(ids) - n) < abs(len(best[1]) - n):
            best = (e, ids)
        if abs(len(ids) - n) <= tolerance * n:
            break
    return best


def time_run(model, ids: np.ndarray, repeats: int) -> float:
    x = torch.from_numpy(ids)[None]
    times = []
    with torch.no_grad():
        model.run(x)  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            model.run(x)
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


def slope(x, y) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def scaling(args) -> None:
    g = grammar(args.grammar)
    model = construct(g.name)
    rng = np.random.default_rng(args.seed)
    rows_n = []
    for n in args.lengths:
        e, ids = expression_near(g, rng, args.fixed_depth, n)
        rows_n.append((len(ids), args.fixed_depth, time_run(model, ids, args.repeats)))
    rows_d = []
    for d in args.depths:
        e, ids = expression_near(g, rng, d, args.fixed_length)
        rows_d.append((len(ids), d, time_run(model, ids, args.repeats)))
    lp = grammar("listops")
    big_model = model if g.name == "listops" else construct("listops")
    e, ids = expression_near(lp, rng, 30, 41000, tolerance=0.03, tries=2000)
    with torch.no_grad():
        out = big_model.run(torch.from_numpy(ids)[None])
    answer = lp.literals[int(out.readout[0, 2:12].argmax())]
    t_big = time_run(big_model, ids, args.repeats)

    print(f"circuit transformer scaling ({g.name} construction, sparse loop, torch threads "
          f"{torch.get_num_threads()}, median of {args.repeats})")
    print(f"\n(1) fixed depth d = {args.fixed_depth}")
    print(f"{'tokens n':>9}  {'seconds':>8}  {'us / (n d)':>10}")
    for n, d, t in rows_n:
        print(f"{n:>9}  {t:>8.4f}  {1e6 * t / (n * d):>10.3f}")
    print(f"\n(2) fixed length n ~ {args.fixed_length}")
    print(f"{'depth d':>9}  {'tokens':>8}  {'seconds':>8}  {'us / (n d)':>10}")
    for n, d, t in rows_d:
        print(f"{d:>9}  {n:>8}  {t:>8.4f}  {1e6 * t / (n * d):>10.3f}")
    a = slope([r[0] for r in rows_n], [r[2] for r in rows_n])
    # at fixed length the token counts still vary a little: regress time / n on d
    b = slope([r[1] for r in rows_d], [r[2] / r[0] for r in rows_d])
    print(f"\n(3) depth-30 ListOps expression of {len(ids)} tokens: {t_big:.3f} s "
          f"({out.iterations.item()} iterations, answer {'correct' if answer == evaluate(lp, e) else 'WRONG'}; "
          f"target < 1 s)")
    from scipy.optimize import nnls

    rows = rows_n + rows_d
    X = np.array([[1.0, n, n * d] for n, d, _ in rows])
    (c0, c1, c2), _ = nnls(X, np.array([t for _, _, t in rows]))
    print(f"cost model (non-negative least squares over both sweeps): time = {1e3 * c0:.1f} ms "
          f"+ {1e6 * c1:.2f} us * n + {1e6 * c2:.3f} us * n * d")
    print(f"\nfitted exponents: time ~ n^{a:.2f} at fixed depth, time/n ~ d^{b:.2f} at fixed length "
          f"(target 1 and 1: O(n d); below 1 where the per-token work done once, c1, outweighs "
          f"the per-iteration scan, c2)")


def exactness(args) -> None:
    rng = np.random.default_rng(args.seed)
    print(f"construction exactness: {args.exactness} random expressions per depth (P_DEEP generator)")
    for name in args.grammars:
        g, model = grammar(name), construct(name)
        accs, halts = [], []
        for d in range(1, args.max_depth + 1):
            exprs = [sample_expression(g, rng, d, P_DEEP[name]) for _ in range(args.exactness)]
            seqs = [encode(g, e) for e in exprs]
            order = np.argsort([len(s) for s in seqs])
            correct = halted = 0
            start = 0
            while start < len(order):  # batches of similar length, at most ~200k padded tokens
                stop = start + 1
                while stop < len(order) and (stop - start + 1) * len(seqs[order[stop]]) <= 200_000:
                    stop += 1
                idx = order[start:stop]
                tokens, _ = pad_batch(g, [seqs[i] for i in idx])
                with torch.no_grad():
                    out = model.run(torch.from_numpy(tokens))
                pred = out.readout[:, 2:2 + g.n_classes].argmax(-1).tolist()
                clean = (out.readout.sum(-1) == 1).tolist()
                for j, i in enumerate(idx):
                    correct += int(clean[j] and g.literals[pred[j]] == evaluate(g, exprs[i]))
                halted += int((out.iterations == d).sum())
                start = stop
            accs.append(correct / len(exprs))
            halts.append(halted / len(exprs))
        print(f"\n{name}: depth: accuracy / halted after exactly d iterations")
        print("  ".join(f"{d}:{a:.3f}/{h:.3f}" for d, (a, h) in enumerate(zip(accs, halts), start=1)))
        print(f"{name}: min accuracy {min(accs):.3f}, min exact halting {min(halts):.3f} over depths 1..{args.max_depth}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grammar", default="listops")
    ap.add_argument("--fixed-depth", type=int, default=10)
    ap.add_argument("--lengths", type=int, nargs="+", default=[2000, 4000, 8000, 16000, 32000, 64000])
    ap.add_argument("--fixed-length", type=int, default=16000)
    ap.add_argument("--depths", type=int, nargs="+", default=[10, 14, 18, 22, 26, 30])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exactness", type=int, default=0, help="check N expressions per depth instead of timing")
    ap.add_argument("--grammars", nargs="+", default=["boolean", "arithmetic", "listops"])
    ap.add_argument("--max-depth", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    exactness(args) if args.exactness else scaling(args)


if __name__ == "__main__":
    main()
