"""Absorption of the chain of thought into depth: per-stage, per-layer attention mass on each tree
level and per-layer probe accuracy of each level's XOR values, for a finished parity run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/log_icot/absorption.py runs/parity-logicot-cpu-s0 --out figs/

Saves ``absorption_attention.png`` and ``absorption_probes.png`` under ``--out`` (default: the run's
``figures/``) and prints the level-mass tables, then the probe tables, the last stage last; then,
for the run's selected model, each head's own-level mass and the share of answers unchanged when
the head is mean-ablated (which heads the single-pass answer reads). A run without stage-end
checkpoints (``train.keep_checkpoints=false``) prints only the selected model's tables.
Target (the Log-ICoT account): after stage s the layer that absorbed tree level s puts most of its
attention mass on that level's positions, and a linear probe at that layer reads the level's XOR
values at ≥ 99%.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    import torch

    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.log_icot.absorption import (
        absorption_over_stages,
        format_mass,
        head_ablation,
        head_level_mass,
        plot_attention_by_stage,
        plot_probe_tables,
    )

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--out", default=None)
    ap.add_argument("--examples", type=int, default=512)
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = load_run(args.run)
    task = run.task.task
    selected = run.step
    own = head_level_mass(run.model, task, n_examples=args.examples)  # (L, H)
    kept = head_ablation(run.model, task, n_examples=args.examples)  # (L, H)
    stages = absorption_over_stages(run, n_examples=args.examples)
    out = Path(args.out) if args.out else Path(args.run) / "figures"
    if stages:
        out.mkdir(parents=True, exist_ok=True)
        plot_attention_by_stage(stages, task).savefig(out / "absorption_attention.png", dpi=130)
        plot_probe_tables(stages).savefig(out / "absorption_probes.png", dpi=130)
        print(f"figures in {out}")
    else:
        print("no stage-end checkpoints in this run: no per-stage figures")
    for entry in stages:
        print("\nprobe accuracy (rows: layer outputs, columns: tree levels 1..L), stage", entry["stage"])
        for name, row in zip(entry["probe_rows"], entry["probe"]):
            print(f"{name:>8}  " + "  ".join("   -  " if np.isnan(v) else f"{v:6.3f}" for v in row))
    for entry in stages:
        print()
        print(format_mass(entry))
    print(f"\nselected model (step {selected}): per head, own-level mass / answers unchanged when mean-ablated")
    for layer in range(own.shape[0]):
        print(f"layer {layer + 1}  " + "  ".join(f"h{h} {own[layer, h]:.2f}/{kept[layer, h]:.3f}"
                                                for h in range(own.shape[1])))


if __name__ == "__main__":
    main()
