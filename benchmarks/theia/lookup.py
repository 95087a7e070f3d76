"""How fast can THEIA's arithmetic -> set path learn the set lookup val_set = S[c]?

The 4-domain rules that fail longest are those that need S[c] for c < 20 (docs/results/theia.md). This
probe isolates that path: Arith -> bridge -> Set engine -> a linear readout, trained with
cross-entropy on val_set (F / T / U) directly, and reports the lookup accuracy on held-out
records with c < 20 known and S known, by step. Variants, each from the same seed and data:

* ``adamw``: the paper's optimizer (AdamW 1e-3) and PyTorch's default init;
* ``muon-tiled``: the `cpu` preset's Muon (0.05) with AdamW (1e-3) and tiled number encoders;
* ``onehot``: AdamW, with c given to the Set engine as a learned embedding of its true value
  (an upper bound: how fast the lookup is once c is a discrete code).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/theia/lookup.py [--steps 1000] [--variants adamw muon-tiled onehot]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.studies.theia.model import Theia, split_record, tile_number_encoders
from tinyscope.studies.theia.task import evaluate_records, sample_records
from tinyscope.train.optim import MuonAdamW, muon_param_groups

VARIANTS = ("adamw", "muon-tiled", "onehot")


class LookupPath(nn.Module):
    """Arith -> bridge_set -> Set -> Linear(D, 3) of a fresh THEIA (or a c embedding -> Set)."""

    def __init__(self, variant: str):
        super().__init__()
        self.theia = Theia()
        if variant == "muon-tiled":
            tile_number_encoders(self.theia, self.theia.number_scale)
        self.onehot = nn.Embedding(21, 128) if variant == "onehot" else None
        self.readout = nn.Linear(128, 3)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        f = split_record(x, self.theia.number_scale)
        if self.onehot is not None:
            c_vec = torch.where((f["a_unk"] | f["b_unk"]).unsqueeze(-1), self.theia.arith.enc.unknown, self.onehot(c))
        else:
            c_vec = self.theia.bridge_set(self.theia.arith(f))  # (B, D)
        return self.readout(self.theia.set(c_vec, f))  # (B, 3)


def run(variant: str, steps: int, batch: int, every: int, seed: int) -> list[tuple[int, float, float]]:
    torch.manual_seed(seed)
    net = LookupPath(variant)
    if variant == "muon-tiled":
        opt = MuonAdamW(muon_param_groups(net, muon_lr=0.05, adam_lr=1e-3), ns_bf16=True)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
    base = [g["lr"] for g in opt.param_groups]
    test = sample_records(np.random.default_rng(999), 20_000)
    tv = evaluate_records(test)
    scored = (tv["val_set"] != 2) & (tv["c"] < 20)
    xt, ct = torch.from_numpy(test), torch.from_numpy(tv["c"])
    rng = np.random.default_rng(seed)
    rows, t0 = [], time.perf_counter()
    for step in range(1, steps + 1):
        for g, lr in zip(opt.param_groups, base):
            g["lr"] = lr * min(1.0, step / 50)  # 50-step warmup, as the cpu preset
        x = sample_records(rng, batch)
        v = evaluate_records(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = net(torch.from_numpy(x), torch.from_numpy(v["c"])).float()  # (B, 3)
        loss = F.cross_entropy(logits, torch.from_numpy(v["val_set"]))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if step % every == 0:
            net.eval()
            with torch.no_grad():
                pred = net(xt, ct).argmax(-1).numpy()
            net.train()
            rows.append((step, float((pred == tv["val_set"])[scored].mean()), time.perf_counter() - t0))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = {v: run(v, args.steps, args.batch, args.every, args.seed) for v in args.variants}
    print(f"lookup accuracy on held-out records with c < 20 (known c and S), batch {args.batch}, seed {args.seed}")
    print("| step | " + " | ".join(args.variants) + " |")
    print("|---|" + "---|" * len(args.variants))
    for i, (step, *_rest) in enumerate(results[args.variants[0]]):
        print(f"| {step} | " + " | ".join(f"{results[v][i][1] * 100:.1f}%" for v in args.variants) + " |")
    print("wall seconds per step (evaluations included): " + ", ".join(f"{v} {results[v][-1][2] / args.steps:.3f}" for v in args.variants))


if __name__ == "__main__":
    main()
