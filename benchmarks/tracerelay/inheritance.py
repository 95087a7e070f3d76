"""Equal Repeats with and without phase inheritance (paper Fig. 2/5): the validation
curves of the two `cpu` runs, their wall time, and the figure. Target: test accuracy at
T = 256 >= 98% with inheritance and about 51% (chance-level, as in the paper) without.

    OMP_NUM_THREADS=1 tinyscope run tracerelay-equal-repeats --preset cpu --seed 42 --out RUNS/on
    OMP_NUM_THREADS=1 tinyscope run tracerelay-equal-repeats-no-inheritance --preset cpu --seed 42 --out RUNS/off
    .venv/bin/python benchmarks/tracerelay/inheritance.py --on RUNS/on --off RUNS/off --png docs/results/figures/tracerelay_inheritance.png

Prints, per validation point, acc@256 and the ID mean (32-256) of both runs, then each run's
final test numbers and training-loop minutes, then the figure's path (last).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from tinyscope.studies.tracerelay.figures import curves_figure


def history(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines() if ln.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--on", type=Path, required=True, help="run directory with phase inheritance")
    ap.add_argument("--off", type=Path, required=True, help="run directory of the no-inheritance ablation")
    ap.add_argument("--png", type=Path, default=Path("tracerelay_inheritance.png"))
    args = ap.parse_args()
    runs = {"on": history(args.on), "off": history(args.off)}
    evals = {k: {r["step"]: r for r in v if r.get("split") == "eval"} for k, v in runs.items()}
    print(f"{'update':>7} | {'on acc@256':>10} {'on ID mean':>10} | {'off acc@256':>11} {'off ID mean':>11}")
    for step in sorted(set(evals["on"]) | set(evals["off"])):
        cells = []
        for k in ("on", "off"):
            r = evals[k].get(step)
            cells.append(f"{100 * r['acc@256']:10.1f} {100 * r['id_acc']:10.1f}" if r else f"{'':>10} {'':>10}")
        print(f"{step:7d} | {cells[0]} | {cells[1]}")
    for k, path in (("on", args.on), ("off", args.off)):
        res_path = path / "results.json"
        if not res_path.exists():
            print(f"{k}: still training")
            continue
        res = json.loads(res_path.read_text())
        m = res["metrics"]
        print(f"{k}: test acc@256 {100 * m['acc@256']:.2f}%, acc@1024 {100 * m['acc@1024']:.2f}%, ID mean "
              f"{100 * m['id_acc']:.2f}%; selected update {res['selected_step']} of {res['steps']} "
              f"({res['stopped']}), {res['wall_time'] / 60:.1f} min training loop")
    fig = curves_figure(runs)
    args.png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.png, dpi=120)
    print(f"figure: {args.png}")


if __name__ == "__main__":
    main()
