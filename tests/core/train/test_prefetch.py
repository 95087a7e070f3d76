"""train/prefetch.py: the next batch drawn in the background is the same batch, and a stateful
task's saved state is what it would be without prefetching."""
import json
import time

import pytest
import torch

from tinyscope.train import checkpoint as ckpt
from tinyscope.train import machine
from tinyscope.train.prefetch import Prefetcher, PrefetchTrial
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


# ----------------------------------------------------------------------------- train.prefetch=auto
def test_a_trial_alternates_blocks_and_times_all_but_their_first_step():
    trial = PrefetchTrial(block=3, rounds=2)
    modes = []
    for i in range(12):
        modes.append(trial.prefetching)
        trial.record(1.0 + i, counted=i != 4)  # step 4 ends at an evaluation: not timed
    assert modes == [False] * 3 + [True] * 3 + [False] * 3 + [True] * 3 and trial.done
    assert trial.times == {False: [(2 + 3) / 2, (8 + 9) / 2], True: [6.0, (11 + 12) / 2]}


@pytest.mark.parametrize("off, on, expected", [(10.0, 9.0, True), (10.0, 9.3, False), (10.0, 12.0, False)])
def test_prefetch_stays_on_only_where_it_wins_clearly(off, on, expected):
    trial = PrefetchTrial(block=2, rounds=2)
    for seconds in (off, off, on, on, off * 1.5, off * 1.5, on * 2, on * 2):  # the fastest block decides
        trial.record(seconds)
    assert trial.choice() is expected


def test_a_trial_without_timed_blocks_on_one_side_keeps_prefetch_off():
    trial = PrefetchTrial(block=2, rounds=1)
    for _ in range(4):
        trial.record(1.0, counted=False)
    assert trial.done and trial.choice() is False


class _SlowDrawTask(CountingTask):
    """A draw that waits 15 ms without holding the interpreter lock, as an expensive sampler in
    numpy does: drawing it ahead hides it behind the step."""

    def sample(self, rng, batch_size):
        time.sleep(0.015)
        return super().sample(rng, batch_size)


class _SlowModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = tiny_model()

    def forward(self, tokens):  # (B, T) -> (B, T, V)
        time.sleep(0.015)
        return self.net(tokens)


def _auto_run(tmp_path, name, prefetch, monkeypatch):
    monkeypatch.setattr(machine, "measures", lambda steps, world=1: world == 1)  # a short run that still decides
    cfg = TrainConfig(steps=60, batch_size=8, eval_every=30, log_every=10, checkpoint_every=0, precision="fp32",
                      threads=1, prefetch=prefetch)
    model, task = _SlowModel(), _SlowDrawTask()
    out = tmp_path / name
    result = Trainer(model, task, cfg, seed=3, run_dir=out, progress=False).fit()
    log = [{k: v for k, v in json.loads(line).items() if k != "time"} for line in (out / "metrics.jsonl").open()]
    return weights(model), log, result


def test_auto_turns_prefetch_on_where_the_draw_is_slow_and_changes_no_bit(tmp_path, monkeypatch):
    a, log_a, result_a = _auto_run(tmp_path, "auto", "auto", monkeypatch)
    b, log_b, result_b = _auto_run(tmp_path, "off", False, monkeypatch)
    assert result_a.machine["prefetch"] is True and result_b.machine["prefetch"] is False
    assert same(a, b) and log_a == log_b
