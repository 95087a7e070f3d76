import json
import os
import subprocess
import sys
from pathlib import Path

from tinyscope.runs.rundir import run_experiment

SETTINGS = ["train.steps=60", "train.log_every=10", "train.eval_every=30", "train.checkpoint_every=30"]


def losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(ln)["loss"] for ln in lines if json.loads(ln)["split"] == "train"]


def test_two_process_gloo_ddp_matches_the_single_process_loss(tmp_path):
    single = tmp_path / "single"
    run_experiment("plus-last-even", "smoke", seed=4, overrides=SETTINGS, out=single, progress=False)
    ddp = tmp_path / "ddp"
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "tinyscope.cli", "run", "plus-last-even",
           "--preset", "smoke", "--seed", "4", "--out", str(ddp), "--no-progress"]
    for s in SETTINGS:
        cmd += ["--set", s]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = losses(single), losses(ddp)
    assert len(a) == len(b) == 6
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-4 * max(1.0, abs(x)), (a, b)
    assert json.loads((ddp / "results.json").read_text())["steps"] == 60
