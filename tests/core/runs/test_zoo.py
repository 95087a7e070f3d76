"""Every zoo entry re-evaluates on a fresh evaluation set (`tinyscope eval zoo:NAME --seed 12345`)
and still meets each claim it backs, within the claim's recheck slack; the zoo stays under its
size limit and each entry is a loadable run directory with its weights only.
(`benchmarks/core/zoo_recheck.py` does the same on full-size fresh sets.)"""
from __future__ import annotations

import pytest

from tinyscope.runs import zoo
from tinyscope.runs.claims import RunRecord, all_claims
from tinyscope.runs.rundir import evaluate_run

ENTRIES = zoo.entries()
CLAIMS = {c.id: c for c in all_claims()}


def test_the_zoo_is_small_and_holds_weights_only():
    assert sum(e.size_bytes for e in ENTRIES) < zoo.ZOO_LIMIT_BYTES
    for e in ENTRIES:
        files = {p.relative_to(e.path).as_posix() for p in e.path.rglob("*") if p.is_file()}
        assert {"config.json", "results.json", "zoo.json", "README.md", "checkpoints/best.safetensors"} <= files
        assert not {f for f in files if f.startswith("checkpoints/") and f != "checkpoints/best.safetensors"}


def test_every_met_claim_in_a_ledger_names_an_existing_zoo_entry():
    from tinyscope.runs import ledger, registry

    names = {e.name for e in ENTRIES}
    for study in registry.study_names():
        for cid, rec in ledger.read_ledger(study)["claims"].items():
            if rec.get("zoo"):
                assert rec["zoo"] in names, f"{cid} is backed by zoo:{rec['zoo']}, which is missing"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_zoo_entry_rechecks_its_claims_on_a_fresh_set(entry):
    backed = [CLAIMS[c] for c in entry.info["claims"]]
    assert backed, f"zoo:{entry.name} backs no claim"
    checkable = [c for c in backed if c.measure is not None and c.measure.final_only]
    assert checkable, f"zoo:{entry.name} backs no claim a fresh evaluation can recheck"
    n = min((c.recheck_n for c in checkable if c.recheck_n), default=None)
    fresh = evaluate_run(f"zoo:{entry.name}", seed=12345, n=n)
    assert fresh["eval_fingerprint"] is None or fresh["eval_fingerprint"] != entry.info.get("eval_fingerprint")
    record = RunRecord(entry.info["seed"], {"metrics": fresh["metrics"]})
    for c in checkable:
        value = c.measure([{record.seed: record}])[record.seed]
        assert c.target.met(value, slack=c.recheck_slack), \
            f"zoo:{entry.name} on a fresh set: {c.id} = {c.format(value)}, target {c.target.describe(c.unit)}"
