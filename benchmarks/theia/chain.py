"""The mod-3 chain figure (THEIA Sec. 4.4): final-step accuracy on chains of 5, 10, 50, 100 and
500 steps for each trained ``theia-chain`` run (THEIA step model, flat MLP, transformer), with
the single-record step accuracy beside it, as a table and a figure.

Train the runs first (each is a few minutes on one core with the ``cpu`` preset), e.g.::

    tinyscope run theia-chain --preset cpu --seed 42 --out runs/chain-theia
    tinyscope run theia-chain --preset cpu --seed 42 --set model.arch=flat_mlp --out runs/chain-flat
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/theia/chain.py runs/chain-theia runs/chain-flat \
        --figure chain.png

The numbers come from each run's ``results.json`` (written by its final evaluation); nothing is
retrained here. Beside each measured row, the accuracy an exact transition would give if the step
model erred independently at its single-record error rate (``chain_accuracy_from_step``). The
table is printed last. Target (THEIA Sec. 4.4): the THEIA step model at 99.97 ± 0.02% on chains of
500 steps, the flat MLP at chance (33%) by 50 steps.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from tinyscope.studies.theia.analysis import chain_accuracy_from_step, chain_figure, chain_table

ARCH_NAMES = {"theia_step": "THEIA step (1.51M)", "flat_mlp": "flat MLP", "transformer": "transformer (3.58M)"}


def read_chain_run(path: Path) -> tuple[str, dict[int, float], float]:
    """(model label, {length: accuracy}, step accuracy) of one ``theia-chain`` run directory."""
    results = json.loads((path / "results.json").read_text())
    config = json.loads((path / "config.json").read_text())["config"]
    metrics = results["metrics"]
    arch = config["model"]["arch"]
    label = ARCH_NAMES.get(arch, arch)
    if arch == "flat_mlp":
        label = f"flat MLP (hidden {config['model']['flat_hidden']})"
    label += f", {config['train'].get('optimizer', 'adamw')}"
    if config["model"].get("number_init", "default") != "default":
        label += f" + {config['model']['number_init']}"
    label += f", phase 1 {results['steps']:,} steps"
    curve = {int(k.split("/")[1]): v for k, v in metrics.items() if k.startswith("chain_acc/")}
    return f"{label}, seed {config['seed']}", curve, metrics.get("step_acc", float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="theia-chain run directories")
    ap.add_argument("--figure", type=Path, default=None, help="write the figure here (png)")
    args = ap.parse_args()
    curves, step_acc = {}, {}
    for path in args.runs:
        label, curve, acc = read_chain_run(path)
        curves[label], step_acc[label] = curve, acc
    if args.figure:
        chain_figure(curves).savefig(args.figure, dpi=150)
        print(f"figure: {args.figure}")
    print("single-record step accuracy: " + ", ".join(f"{k} {100 * v:.2f}%" for k, v in step_acc.items()))
    print("paper (500 steps): THEIA 99.97%, transformer 99.24%, flat MLP at chance by 50 steps")
    predicted = {f"{k}: predicted from step acc.": {L: chain_accuracy_from_step(step_acc[k], L) for L in curve}
                 for k, curve in curves.items()}
    print(chain_table(curves | predicted))


if __name__ == "__main__":
    main()
