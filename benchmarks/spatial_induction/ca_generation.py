"""Cell updates per second of the batched CA generator vs CellPyLib's ``evolve``, and the Bayes
predictor's throughput (tokens/s). Target: generator >= 1000x CellPyLib.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/spatial_induction/ca_generation.py [--width 16] [--steps 10]

Needs ``pip install cellpylib`` (benchmark only). Prints the figure last.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rule", type=int, default=110)
    ap.add_argument("--width", type=int, default=16, help="ring size (the paper's ECA grid is 16)")
    ap.add_argument("--steps", type=int, default=10, help="time steps T (the paper's ECA det T is 10)")
    ap.add_argument("--batch", type=int, default=4096, help="trajectories per batched call")
    ap.add_argument("--cellpylib-runs", type=int, default=50)
    args = ap.parse_args()

    import cellpylib as cpl

    from tinyscope.studies.spatial_induction.bayes import posterior_predictive
    from tinyscope.studies.spatial_induction.evolve import evolve
    from tinyscope.studies.spatial_induction.lattice import elementary
    from tinyscope.studies.spatial_induction.rules import wolfram
    from tinyscope.studies.spatial_induction.serialize import Layout

    lat = elementary(args.width)
    rng = np.random.default_rng(0)
    x0 = rng.integers(0, 2, size=(args.batch, args.width), dtype=np.uint8)
    table = np.broadcast_to(wolfram(args.rule), (args.batch, 8)).copy()
    updates = args.width * (args.steps - 1)

    ours = timed(lambda: evolve(lat, table, args.steps, rng, x0=x0))
    ours_rate = args.batch * updates / ours

    # correctness on the same initial rows
    sample = x0[:3]
    mine = evolve(lat, table[:3], args.steps, rng, x0=sample)
    rule = lambda n, c, t: cpl.nks_rule(n, args.rule)
    for i in range(3):
        theirs = cpl.evolve(sample[i:i + 1].astype(int), timesteps=args.steps, apply_rule=rule)
        assert np.array_equal(theirs, mine[i]), "CellPyLib and tinyscope disagree"

    def cellpylib_runs():
        for i in range(args.cellpylib_runs):
            cpl.evolve(x0[i:i + 1].astype(int), timesteps=args.steps, apply_rule=rule)

    theirs_t = timed(cellpylib_runs, repeat=1)
    theirs_rate = args.cellpylib_runs * updates / theirs_t

    traj = evolve(lat, table, args.steps, rng, x0=x0)
    layout = Layout(lat, args.steps)
    bayes_t = timed(lambda: posterior_predictive(lat, traj, alpha=1.0))
    tokens = args.batch * layout.stream_length

    print(f"rule {args.rule}, ring {args.width}, T {args.steps}, batch {args.batch}")
    print(f"tinyscope evolve : {ours_rate:14,.0f} cell updates/s")
    print(f"CellPyLib evolve : {theirs_rate:14,.0f} cell updates/s")
    print(f"Bayes predictor  : {tokens / bayes_t:14,.0f} tokens/s ({args.batch} streams of {layout.stream_length})")
    print(f"speed-up over CellPyLib: {ours_rate / theirs_rate:,.0f}x (target >= 1000x)")


if __name__ == "__main__":
    main()
