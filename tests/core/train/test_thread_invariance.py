"""Same seed, threads 1 and 2: the same checkpoint bytes and metrics (plus-last-even smoke).

Not every model is thread-invariant: torch's CPU layer-norm backward (the weight and bias
gradients, summed over rows split by thread) and matmuls with a long inner dimension (split
across threads) round differently on 2 threads. ``threads=auto`` therefore never picks a count
whose warm-up gradients differ from one thread's (tests/core/train/test_machine.py)."""
import json

from tinyscope.runs.rundir import run_experiment


def _run(tmp_path, threads):
    out = tmp_path / f"t{threads}"
    run_experiment("plus-last-even", "smoke", seed=2, out=out, progress=False, report="none",
                   overrides=[f"train.threads={threads}", "train.steps=60", "train.checkpoint_every=30"])
    ckpts = {p.name: p.read_bytes() for p in sorted((out / "checkpoints").glob("step_*.safetensors"))}
    log = [{k: v for k, v in json.loads(line).items() if k != "time"} for line in (out / "metrics.jsonl").open()]
    return ckpts, log, json.loads((out / "results.json").read_text())


def test_one_and_two_threads_give_the_same_bytes(tmp_path):
    c1, log1, r1 = _run(tmp_path, 1)
    c2, log2, r2 = _run(tmp_path, 2)
    assert list(c1) == ["step_000000.safetensors", "step_000030.safetensors", "step_000060.safetensors"]
    assert c1 == c2 and log1 == log2 and r1["metrics"] == r2["metrics"]
    assert (r1["machine"]["threads"], r2["machine"]["threads"]) == (1, 2)
