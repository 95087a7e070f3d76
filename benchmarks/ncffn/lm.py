"""NC-FFN language modelling comparison at equal parameters: GELU vs NC-FFN vs NC-FFN + quantifiers.

    OMP_NUM_THREADS=1 python benchmarks/ncffn/lm.py [--preset cpu] [--out runs] [--seed 0] [--set KEY=VALUE ...]

Trains (or, when finished, reloads) one ``ncffn-lm`` run per variant, then prints the
comparison table last: held-out loss (and its gap to GELU; target: NC + quantifiers within 2%),
top-1 accuracy at the licensed words (than / by / nor) and at the unlicensed ``and``, parameter
counts, and for the quantified model the half-life summary and the licensor-detector table.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.ncffn.legibility import format_detectors, licensor_detectors, unit_trace

VARIANTS = {
    "gelu": ["model.ffn=gelu"],
    "nc": ["model.ffn=nc"],
    "nc+quant": ["model.ffn=nc", "quant.layers=0,1"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--out", default="runs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = {}
    for name in args.variants.split(","):
        out = Path(args.out) / f"ncffn-lm-{args.preset}-{name.replace('+', '-')}-s{args.seed}"
        if (out / "results.json").exists():
            results[name] = json.loads((out / "results.json").read_text())
        else:
            results[name] = run_experiment("ncffn-lm", args.preset, args.seed, VARIANTS[name] + args.overrides, out,
                                           resume=(out / "config.json").exists(), progress=False)
        print(f"{name}: {json.dumps(results[name]['metrics'])}", flush=True)
    base = results.get("gelu", {}).get("metrics", {}).get("val_loss")
    keys = ["val_loss", "licensed_acc", "licensed_acc_bayes", "licensed_pair_acc", "acc_than", "acc_by", "acc_nor",
            "acc_or", "and_acc"]
    keys = [k for k in keys if all(k in r["metrics"] for r in results.values())]  # text files: loss only
    if "nc+quant" in results:
        qdir = Path(args.out) / f"ncffn-lm-{args.preset}-nc-quant-s{args.seed}"
        run = load_run(qdir)
        if "slot" in run.task.eval_set().meta:
            ev = run.task.eval_set()
            table = licensor_detectors(run.model, ev, top=3)
            print("\nlicensor detectors in the quantifier blocks (fire: membership on the licensor minus elsewhere;"
                  " carry: state before the licensed word minus before the twin's 'and')")
            print(format_detectors(table))
            kinds = {"comparative": 1, "passive participle": 2, "negative polarity (neither)": 3}
            for name, rows in table.items():
                if not rows:
                    continue
                r = rows[0]
                row, col = [int(v[0]) for v in (ev.meta["slot"] == kinds[name]).nonzero()]
                start = int(ev.meta["licensor_pos"][row, col])
                while start > 0 and run.task.vocab[ev.tokens[row, start - 1]] != ".":
                    start -= 1
                trace = unit_trace(run.model, ev.tokens[row], r["layer"], r["unit"], run.task.vocab)
                words = " ".join(f"{w}[{m:.2f}|{st:.2f}]" for w, m, st in trace[start:col + 2])
                print(f"  {name}: layer {r['layer']} {r['kind']} unit {r['unit']}, word[membership|state]: {words}")
    print(f"\nncffn-lm {args.preset}, seed {args.seed}: equal-parameter comparison")
    print(f"{'variant':<10} {'params':>8} " + " ".join(f"{k:>17}" for k in keys) + f" {'loss vs gelu':>13}")
    for name, res in results.items():
        m = res["metrics"]
        gap = f"{100 * (m['val_loss'] / base - 1):+.2f}%" if base else "-"
        print(f"{name:<10} {int(m['params_total']):>8} " + " ".join(f"{m.get(k, float('nan')):>17.4f}" for k in keys)
              + f" {gap:>13}")
    q = results.get("nc+quant", {}).get("metrics", {})
    if q:
        print(f"quantifier half-lives: median {q['half_life_median']:.2f} tokens "
              f"(exist {q.get('half_life_median_exist', float('nan')):.2f}, prop {q.get('half_life_median_prop', float('nan')):.2f}); "
              f"latch units (half-life >= latch_half_life): {int(q['n_latch'])} of {int(q['n_quantifier_units'])}")


if __name__ == "__main__":
    main()
