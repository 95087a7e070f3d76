"""Sweeps on the local process pool, with the plus-last-even smoke preset cut to a few steps."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinyscope.errors import ConfigError
from tinyscope.sweep import RunIndex, SweepSpec, parse_grid, run_sweep, threads_per_job
from tinyscope.sweep.grid import split_values

SHORT = ["train.steps=40", "train.eval_every=20", "train.checkpoint_every=20", "train.log_every=20",
         "eval.n_generated=4"]


def test_grid_parsing_and_expansion():
    assert split_values("[1,1],[4,1], 3") == ["[1,1]", "[4,1]", "3"]
    grid = parse_grid(["train.lr=3e-3,1e-2", "model.n_heads=[1],[2]"])
    runs = SweepSpec("plus-last-even", "smoke", [1, 2], grid).expand()
    assert len(runs) == 8 and len({r.rel_path for r in runs}) == 8
    assert runs[0].overrides == ["train.lr=3e-3", "model.n_heads=[1]"] and runs[0].seed == 1
    with pytest.raises(ConfigError, match="--seeds"):
        parse_grid(["seed=1,2"])
    with pytest.raises(ConfigError, match="model has no field 'd_modle'"):  # fails before any run starts
        SweepSpec("plus-last-even", "smoke", [1], {"model.d_modle": ["2", "4"]}).validate()
    assert threads_per_job(2, cores=16) == 8 and threads_per_job(4, cores=2) == 1


def test_2x2x2_sweep_with_two_jobs_completes_and_is_indexed(tmp_path):
    spec = SweepSpec("plus-last-even", "smoke", [1, 2],
                     parse_grid(["train.lr=3e-3,1e-2", "train.weight_decay=0,0.01"]), SHORT)
    res = run_sweep(spec, tmp_path, jobs=2, progress=False)
    assert (res.total, res.done, res.skipped, res.failed) == (8, 8, 0, [])
    with RunIndex(tmp_path, readonly=True) as index:
        cols, rows = index.query()
    assert len(rows) == 8 and {r["status"] for r in rows} == {"done"}
    for r in rows:
        results = json.loads((tmp_path / r["path"] / "results.json").read_text())
        assert r["steps"] == 40 and r["tokens"] == 40 * 32 * 8 and r["attempts"] == 1 and r["cpu_time"] > 0
        assert json.loads(r["metrics"])["rule_error"] == results["metrics"]["rule_error"]
        assert r["rule_error"] == results["metrics"]["rule_error"]
    again = run_sweep(spec, tmp_path, jobs=2, progress=False)  # nothing left to do
    assert (again.done, again.skipped) == (0, 8)


def test_runs_are_spawned_where_gpus_are_visible(tmp_path, monkeypatch):
    """CUDA cannot start in a child forked from a process where it was touched, so a sweep that
    hands out GPUs starts its runs with spawn (checked here on CPU, pretending one GPU is visible)."""
    import tinyscope.sweep.local as local

    assert local.context(cuda=True).get_start_method() == "spawn"
    assert local.context().get_start_method() in ("forkserver", "spawn")
    started = []
    real = local.context
    monkeypatch.setattr(local, "visible_gpus", lambda: ["0"])
    monkeypatch.setattr(local, "context", lambda cuda=False: started.append(cuda) or real(cuda))
    spec = SweepSpec("plus-last-even", "smoke", [3], {}, SHORT + ["train.device=cpu"])
    res = run_sweep(spec, tmp_path, jobs=1, progress=False)
    assert (res.done, res.failed) == (1, []) and started and all(started)
    job = json.loads(next(tmp_path.rglob("sweep_job.json")).read_text())
    assert job["spec"]["seed"] == 3


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path):
    spec = SweepSpec("plus-last-even", "smoke", [5], parse_grid(["train.device=cpu,cuda:99"]), SHORT)
    res = run_sweep(spec, tmp_path, jobs=2, progress=False)
    assert res.done == 1 and len(res.failed) == 1 and "cuda_99" in res.failed[0][0]
    err = (tmp_path / res.failed[0][0] / "error.txt").read_text()
    assert "Traceback" in err and "cuda" in err
    with RunIndex(tmp_path, readonly=True) as index:
        _, rows = index.query(order="status")
    assert [r["status"] for r in rows] == ["done", "failed"] and "cuda" in rows[1]["error"]


def _wait_for(cond, timeout=300.0):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout:
            raise AssertionError("timed out")
        time.sleep(0.1)


def test_killed_sweep_reruns_only_what_was_missing(tmp_path):
    common = ["train.steps=200", "train.eval_every=100", "train.checkpoint_every=50", "train.log_every=50",
              "eval.n_generated=4"]
    cmd = [sys.executable, "-m", "tinyscope.cli", "sweep", "plus-last-even", "--preset", "smoke", "--seeds", "1", "2",
           "3", "--jobs", "1", "--out", str(tmp_path), "--no-progress"] + [a for s in common for a in ("--set", s)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first, second = tmp_path / "runs/default/s1", tmp_path / "runs/default/s2"
    try:
        _wait_for(lambda: (second / "checkpoints" / "resume.safetensors").exists() or proc.poll() is not None)
    finally:
        proc.send_signal(signal.SIGKILL)  # no chance to clean up: the worker must notice by itself
        proc.wait()
    assert (first / "results.json").exists() and not (second / "results.json").exists()
    done_mtime = (first / "results.json").stat().st_mtime_ns
    log = second / "metrics.jsonl"
    time.sleep(1.0)
    size = log.stat().st_size
    time.sleep(1.5)
    assert log.stat().st_size == size, "the orphaned run kept training after its sweep was killed"
    assert not (second / "results.json").exists()

    res = run_sweep(SweepSpec("plus-last-even", "smoke", [1, 2, 3], {}, common), tmp_path, jobs=1, progress=False)
    assert (res.skipped, res.done, res.failed) == (1, 2, [])
    assert (first / "results.json").stat().st_mtime_ns == done_mtime
    records = [json.loads(ln) for ln in log.read_text().splitlines()]
    keys = [(r["step"], r["split"]) for r in records]
    assert len(keys) == len(set(keys)) and max(k[0] for k in keys) == 200  # resumed, each step logged once
    with RunIndex(tmp_path, readonly=True) as index:
        _, rows = index.query()
    assert [(Path(r["path"]).name, r["status"], r["attempts"]) for r in rows] == \
        [("s1", "done", 1), ("s2", "done", 2), ("s3", "done", 1)]
