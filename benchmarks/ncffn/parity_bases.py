"""NC-FFN parity probe: min parameters per basis for 100% on N-bit parity (table + plot).

    OMP_NUM_THREADS=1 python benchmarks/ncffn/parity_bases.py [--quick] [--out runs/ncffn-parity] [--n-bits 4,6,8,10] [--bases ...]
        [--widths ...] [--seeds 0,1,2] [--max-steps 1500] [--resume]

Writes rows.jsonl (one line per trained stack, appended as each ladder finishes, so an
interrupted sweep keeps its results; --resume skips finished ladders), parity.png, and prints
the minimum-parameter table last. Target (the NC-FFN paper: "bounded multiplicative units are
the most parameter-efficient reasoning basis at shallow depth"): the NC-FFN basis needs the fewest
parameters for 100% at every N, and one NC-FFN layer solves 8-bit parity.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tinyscope.studies.ncffn.parity_bases import (
    ParitySweepConfig,
    format_table,
    min_params_table,
    plot_parity,
    train_parity_batch,
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/ncffn-parity")
    ap.add_argument("--quick", action="store_true", help="N in {4, 6}, depth 1-2, two seeds")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--table-only", action="store_true", help="only redraw the plot and table from rows.jsonl")
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--n-bits", default="4,6,8,10")
    ap.add_argument("--bases", default="gelu,swiglu,bilinear,nc,nc_bool")
    ap.add_argument("--widths", default="2,3,4,6,8,11,16,23")
    ap.add_argument("--seeds", default="0,1,2")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    cfg = ParitySweepConfig(n_bits=ints(args.n_bits), bases=args.bases.split(","), widths=ints(args.widths),
                            seeds=ints(args.seeds), max_steps=args.max_steps)
    if args.quick:
        cfg = ParitySweepConfig(n_bits=[4, 6], depths=[1, 2], seeds=[0, 1], widths=[2, 3, 4, 6, 8, 11], max_steps=800)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rows.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines()] if args.resume and path.exists() else []
    if not (args.resume or args.table_only):
        path.write_text("")
    if args.table_only:
        rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    done = {(r["basis"], r["n_bits"], r["depth"]) for r in rows}
    for n in cfg.n_bits:
        for depth in cfg.depths:
            for basis in cfg.bases:
                if (basis, n, depth) in done or args.table_only:
                    continue
                new = train_parity_batch(basis, n, depth, cfg.widths, cfg.seeds, cfg.max_steps, cfg.lr, cfg.check_every)
                rows += new
                with open(path, "a") as f:
                    f.writelines(json.dumps(r) + "\n" for r in new)
                solved = [r["width"] for r in new if r["accuracy"] == 1.0]
                print(f"N={n} depth={depth} {basis:<9} smallest solved width: {min(solved) if solved else '-'}",
                      flush=True)
    plot_parity(rows).savefig(out / "parity.png", dpi=120)
    print(f"plot: {out / 'parity.png'}")
    print(format_table(min_params_table(rows, cfg.min_solved)))


if __name__ == "__main__":
    main()
