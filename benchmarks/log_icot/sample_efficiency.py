"""Samples to 99% for each curriculum (direct, CoT, ICoT, Log-ICoT) at k in {4, 8, 16}.

Each cell trains one run of ``parity-<kind>`` (the ``cpu`` preset, resized to k; n = 12, 20, 30) until
the curriculum's last stage reaches the advance threshold (99% answer accuracy on the validation
set: single-pass for direct / ICoT / Log-ICoT, with generated thinking tokens for CoT) or the
sample budget runs out. Printed last: the table of samples to 99%, stages used, the ICoT /
Log-ICoT stage ratio ((k-1) / log2 k) and the measured ICoT / Log-ICoT sample ratio. Target:
Log-ICoT uses log2 k stages and fewer samples to 99% than ICoT (k - 1 stages) at every k, and
direct training without CoT does not reach 99% within the budget at k = 16.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/log_icot/sample_efficiency.py --ks 4,8 --out runs/parity-bench
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/log_icot/sample_efficiency.py --arch constrained --ks 4,8,16

Run directories are kept under ``--out`` and reused when complete (``resume``), so an interrupted
benchmark continues where it stopped.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

N_FOR_K = {4: 12, 8: 20, 16: 30}
KINDS = ("direct", "cot", "icot", "logicot")


def overrides(k: int, arch: str) -> list[str]:
    """The ``cpu`` preset resized to ``k`` (at k = 8 these are the preset's own values, so finished
    ``tinyscope run parity-<kind> --preset cpu`` runs placed under --out are reused)."""
    n = N_FOR_K[k]
    layers = k.bit_length() - 1
    sets = [f"task.n={n}", f"task.k={k}", f"model.n_ctx={n + k - 1}", f"model.n_heads={[2] * layers}",
            f"model.d_mlp={[128] * layers}"]
    if arch == "constrained":
        sets += ["arch=constrained", "train.lr=0.03", "train.warmup_steps=0", "train.eval_every=10",
                 "train.checkpoint_every=10"]
    return sets


def main() -> None:
    from tinyscope.runs.rundir import run_experiment

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="4,8", help="comma-separated k values (4, 8, 16)")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--arch", default="transformer", choices=("transformer", "constrained"))
    ap.add_argument("--direct-steps", type=int, default=0,
                    help="step budget of the direct runs (0 = the preset's train.steps)")
    ap.add_argument("--set", dest="extra", action="append", default=[], help="extra overrides for every run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="keep the run directories here (default: a temporary folder)")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    kinds = args.kinds.split(",")
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="parity-bench-"))
    rows = []
    for k in ks:
        for kind in kinds:
            t0 = time.perf_counter()
            sets = overrides(k, args.arch) + args.extra
            if kind == "direct" and args.direct_steps:
                sets.append(f"train.steps={args.direct_steps}")
            res = run_experiment(f"parity-{kind}", "cpu", seed=args.seed, overrides=sets,
                                 out=root / f"{args.arch}-k{k}-{kind}", resume=True, progress=False,
                                 report="none")
            m = res["metrics"]
            rows.append({"k": k, "kind": kind, "reached": bool(m.get("curriculum_done", 0.0)),
                         "samples": int(m.get("samples", 0)), "stages": int(m.get("stages_reached", 0)),
                         "n_stages": int(m["n_stages"]), "test_acc": m["test_acc"],
                         "wall_s": round(time.perf_counter() - t0, 1)})
            print(json.dumps(rows[-1]), flush=True)

    print(f"\nsamples to 99% validation accuracy ({args.arch}; '>' = not reached within the budget, "
          f"the samples used):")
    print(f"{'k':>3} {'n':>3} {'curriculum':>10} {'stages':>7} {'samples to 99%':>15} {'test acc':>9} {'wall s':>7}")
    for r in rows:
        s = f"{r['samples']:,}" if r["reached"] else f">{r['samples']:,}"
        print(f"{r['k']:>3} {N_FOR_K[r['k']]:>3} {r['kind']:>10} {r['stages']:>3}/{r['n_stages']:<3} {s:>15} "
              f"{r['test_acc']:>9.4f} {r['wall_s']:>7}")
    for k in ks:
        by = {r["kind"]: r for r in rows if r["k"] == k}
        line = f"k={k}: ICoT / Log-ICoT stages = {k - 1} / {k.bit_length() - 1} = {(k - 1) / (k.bit_length() - 1):.2f}"
        if "icot" in by and "logicot" in by and by["logicot"]["samples"]:
            line += f"; samples ratio = {by['icot']['samples'] / by['logicot']['samples']:.2f}"
        print(line)


if __name__ == "__main__":
    main()
