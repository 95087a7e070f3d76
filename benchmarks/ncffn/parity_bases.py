"""NC-FFN parity probe over seeds: the fewest parameters per basis at which at least a share of the
seeds reach 100% on N-bit parity, with 95% bootstrap intervals and the nc_bool / best-other ratio.

    OMP_NUM_THREADS=1 python benchmarks/ncffn/parity_bases.py [--out runs/ncffn-parity] [--n-bits 4,6,8]
        [--depths 1,2] [--bases ...] [--widths ...] [--seeds 0,1,2,3,4] [--max-steps 2000] [--lr 0.03]
        [--solve-share 0.5] [--resume] [--table-only]

Writes rows.jsonl (one line per trained stack, appended as each (N, depth, family) batch finishes, so an
interrupted sweep keeps its results; --resume skips finished cells), parity.png (solve rate against
parameters, exact 95% bands), and prints the table last. Target (the NC-FFN paper: "bounded multiplicative
units are the most parameter-efficient reasoning basis at shallow depth"): nc_bool / best other <= 1.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tinyscope.studies.ncffn.parity_bases import (
    ParitySweepConfig,
    cell_specs,
    format_table,
    min_params_table,
    plot_parity,
    train_parity_stacks,
)
from tinyscope.studies.ncffn.parity_stats import cell_rows, cells, efficiency_ratio

OTHERS = ("gelu", "swiglu", "bilinear")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/ncffn-parity")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--table-only", action="store_true", help="only redraw the plot and table from rows.jsonl")
    ap.add_argument("--max-steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=3e-2)
    ap.add_argument("--n-bits", default="4,6,8")
    ap.add_argument("--depths", default="1,2")
    ap.add_argument("--bases", default="gelu,swiglu,bilinear,nc,nc_bool")
    ap.add_argument("--widths", default="", help="comma list; empty: every width 1..2N")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--solve-share", type=float, default=0.5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    cfg = ParitySweepConfig(n_bits=ints(args.n_bits), depths=ints(args.depths), bases=args.bases.split(","),
                            widths=ints(args.widths) if args.widths else None, seeds=ints(args.seeds),
                            max_steps=args.max_steps, lr=args.lr, solve_share=args.solve_share)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rows.jsonl"
    keep = args.resume or args.table_only
    rows = [json.loads(ln) for ln in path.read_text().splitlines()] if keep and path.exists() else []
    if not keep:
        path.write_text("")
    done = {(r["n_bits"], r["depth"], r["basis"]) for r in rows}
    for n in ([] if args.table_only else cfg.n_bits):
        for depth in cfg.depths:
            for specs in cell_specs(cfg, n).values():
                specs = [s for s in specs if (n, depth, s[0]) not in done]
                if not specs:
                    continue
                new = train_parity_stacks(specs, n, depth, cfg.max_steps, cfg.lr, cfg.check_every)
                rows += new
                with open(path, "a") as f:
                    f.writelines(json.dumps(r) + "\n" for r in new)
                print(f"N={n} depth={depth} {sorted({s[0] for s in specs})}: {len(new)} stacks", flush=True)
    plot_parity(rows).savefig(out / "parity.png", dpi=120)
    print(f"plot: {out / 'parity.png'}")
    ratios = {}
    for n, depth in cells(rows):
        sel = cell_rows(rows, n, depth)
        if {"nc_bool", *OTHERS} <= {r["basis"] for r in sel}:
            ratios[(n, depth)] = efficiency_ratio(sel, "nc_bool", OTHERS, cfg.solve_share)
    print(format_table(min_params_table(rows, cfg.solve_share), ratios))


if __name__ == "__main__":
    main()
