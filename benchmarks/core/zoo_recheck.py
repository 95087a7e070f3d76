"""Re-evaluate every zoo entry on a full-size fresh evaluation set (the run's own count) drawn
from each seed given, and check each claim it backs (the test suite does this on small sets).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/core/zoo_recheck.py [--seeds 12345 777]

Prints one line per (entry, claim, seed): the value on the fresh set, the value on the run's own
set, and whether the claim's target is met; the last line is the count of rechecks that pass.
"""
from __future__ import annotations

import argparse
import json

from tinyscope.runs import zoo
from tinyscope.runs.claims import RunRecord, all_claims
from tinyscope.runs.rundir import evaluate_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[12345])
    args = ap.parse_args()
    claims = {c.id: c for c in all_claims()}
    passed = total = 0
    for entry in zoo.entries():
        own = json.loads((entry.path / "results.json").read_text())
        own_rec = RunRecord(entry.info["seed"], own)
        for seed in args.seeds:
            fresh = evaluate_run(f"zoo:{entry.name}", seed=seed)
            rec = RunRecord(entry.info["seed"], {"metrics": fresh["metrics"]})
            for cid in entry.info["claims"]:
                c = claims[cid]
                if c.measure is None or not c.measure.final_only:
                    continue
                value = c.measure([{rec.seed: rec}])[rec.seed]
                own_value = c.measure([{own_rec.seed: own_rec}])[own_rec.seed]
                ok = c.target.met(value)
                passed += ok
                total += 1
                print(f"{entry.name:<32} {cid:<48} seed {seed}: fresh {c.format(value)}, own {c.format(own_value)}, "
                      f"target {c.target.describe(c.unit)}: {'met' if ok else 'NOT met'} ({fresh['eval_time']} s)")
    print(f"zoo recheck: {passed}/{total} claim checks met on fresh full-size sets")


if __name__ == "__main__":
    main()
