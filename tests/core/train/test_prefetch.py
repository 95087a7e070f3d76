"""train/prefetch.py: the next batch drawn in the background is the same batch, and a stateful
task's saved state is what it would be without prefetching."""
import json

import pytest

from tinyscope.train import checkpoint as ckpt
from tinyscope.train.prefetch import Prefetcher
from tinyscope.train.trainer import TrainConfig, Trainer

from .tiny import CountingTask, same, tiny_model, weights


def test_get_returns_the_batch_drawn_ahead_or_draws_it():
    calls = []

    def draw(step):
        calls.append(step)
        return step * 10

    p = Prefetcher(draw)
    p.ahead(1)
    assert p.get(1) == 10 and calls == [1]
    p.ahead(2)
    assert p.get(3) == 30 and calls == [1, 2, 3]  # a pending draw of another step is dropped
    p.close()
    off = Prefetcher(draw, enabled=False)
    off.ahead(4)
    assert calls == [1, 2, 3] and off.get(4) == 40


def test_an_error_of_a_draw_ahead_is_raised_where_the_batch_is_taken():
    def draw(step):
        raise RuntimeError(f"bad step {step}")

    p = Prefetcher(draw)
    p.ahead(5)
    with pytest.raises(RuntimeError, match="bad step 5"):
        p.get(5)
    p.close()


def _run(tmp_path, name, prefetch):
    cfg = TrainConfig(steps=20, batch_size=16, eval_every=7, log_every=5, checkpoint_every=4, precision="fp32",
                      threads=1, prefetch=prefetch)
    model, task = tiny_model(), CountingTask()
    out = tmp_path / name
    Trainer(model, task, cfg, seed=11, run_dir=out, evaluate=lambda m: {"drawn": task.drawn}, progress=False).fit()
    log = [{k: v for k, v in json.loads(line).items() if k != "time"} for line in (out / "metrics.jsonl").open()]
    state = ckpt.load_tensors(out / "checkpoints" / "resume.safetensors")[1]["trainer"]
    return weights(model), log, state


def test_training_with_prefetch_equals_training_without(tmp_path):
    a, log_a, state_a = _run(tmp_path, "on", True)
    b, log_b, state_b = _run(tmp_path, "off", False)
    assert same(a, b) and log_a == log_b
    assert state_a["task_state"] == state_b["task_state"] == {"drawn": 20}
    assert [r["drawn"] for r in log_a if r["split"] == "eval"] == [0, 7, 14, 20]  # never a batch ahead at an evaluation
