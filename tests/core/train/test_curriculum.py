import json

import numpy as np
import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.tasks.base import Batch
from tinyscope.train.curriculum import Curriculum, CurriculumConfig, CurriculumTask, Stage
from tinyscope.train.trainer import TrainConfig, Trainer


def three_stages(**kw) -> Curriculum:
    return Curriculum([Stage("a", 0), Stage("b", 1), Stage("c", 2)], CurriculumConfig(**kw))


def steps(cur: Curriculum, n: int, batch: int = 10) -> None:
    for _ in range(n):
        cur.count(batch)


def test_threshold_advances_and_counts_samples_per_stage():
    cur = three_stages(advance_threshold=0.9)
    steps(cur, 5)
    assert cur.update({"acc": 0.5})["stage"] == 0 and cur.stage == 0
    steps(cur, 3)
    out = cur.update({"acc": 0.95})
    assert out["stage"] == 0 and cur.stage == 1 and out["done"] == 0.0
    steps(cur, 2, batch=7)
    cur.update({"acc": 0.99})
    steps(cur, 4)
    out = cur.update({"acc": 0.91})
    assert cur.done and out["done"] == 1.0 and cur.stage == 2
    assert [r["samples"] for r in cur.summary()] == [80, 14, 40]
    assert [r["end_step"] for r in cur.summary()] == [8, 10, 14]
    assert [r["reason"] for r in cur.summary()] == ["threshold"] * 3
    assert cur.samples == 134


def test_step_budget_advances_but_not_past_the_last_stage():
    cur = three_stages(stage_steps=4, advance_threshold=0.9)
    steps(cur, 4)
    cur.update({"acc": 0.1})
    assert cur.stage == 1 and cur.summary()[0]["reason"] == "budget"
    steps(cur, 4)
    cur.update({"acc": 0.1})
    steps(cur, 40)
    cur.update({"acc": 0.1})
    assert cur.stage == 2 and not cur.done  # the last stage trains until its threshold or train.steps


def test_consecutive_and_min_steps_and_min_mode():
    cur = three_stages(advance_consecutive=2, min_stage_steps=3, advance_metric="loss", advance_mode="min",
                       advance_threshold=0.1)
    steps(cur, 1)
    cur.update({"loss": 0.05})
    cur.update({"loss": 0.05})
    assert cur.stage == 0  # met twice, but only 1 step in the stage
    steps(cur, 2)
    cur.update({"loss": 0.2})
    cur.update({"loss": 0.05})
    assert cur.stage == 0
    cur.update({"loss": 0.01})
    assert cur.stage == 1


def test_no_advance_before_any_training_and_missing_metric_is_an_error():
    cur = three_stages(advance_threshold=0.0)
    cur.update({"acc": 1.0})
    assert cur.stage == 0
    steps(cur, 1)
    with pytest.raises(ConfigError, match="advance_metric"):
        cur.update({"other": 1.0})


def test_state_roundtrip_resumes_the_same_schedule():
    a = three_stages(advance_threshold=0.9, stage_steps=6)
    steps(a, 6)
    a.update({"acc": 0.2})
    steps(a, 2)
    a.update({"acc": 0.93})
    state = json.loads(json.dumps(a.state_dict()))  # survives JSON like the trainer state does
    b = three_stages(advance_threshold=0.9, stage_steps=6)
    b.load_state_dict(state)
    for cur in (a, b):
        steps(cur, 3)
        cur.update({"acc": 0.95})
    assert a.summary() == b.summary() and a.done and b.done
    with pytest.raises(ConfigError, match="stages"):
        Curriculum([Stage("only")]).load_state_dict(state | {"stage": 2})


class StageTask:
    """A toy task whose labels depend on the stage: stage s asks for (x > s), x uniform in 0..3."""

    vocab_size = 4

    def sample(self, rng, batch_size, spec):
        x = rng.integers(0, 4, size=(batch_size, 1))
        return Batch(x, (x > spec).astype(np.int64), np.ones_like(x, dtype=bool), {})


def make_trainer(run_dir, steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(4, 8), torch.nn.Linear(8, 2))
    cur = Curriculum([Stage(str(s), s) for s in range(3)], CurriculumConfig(advance_threshold=0.99))
    task = CurriculumTask(StageTask(), cur)
    xs = torch.arange(4).view(4, 1)

    def evaluate(m):
        acc = float((m(xs).argmax(-1) == (xs > cur.current.spec).long()).float().mean())
        return {"acc": acc} | cur.update({"acc": acc})

    cfg = TrainConfig(steps=steps, batch_size=16, lr=0.05, eval_every=5, checkpoint_every=5, log_every=5,
                      eval_at_start=False, stop_metric="done", stop_mode="max", stop_threshold=1.0)
    return Trainer(model, task, cfg, seed=3, run_dir=run_dir, evaluate=evaluate, progress=False), cur


def test_curriculum_advance_is_resumable_through_the_trainer(tmp_path):
    full, cur_full = make_trainer(tmp_path / "full", 60)
    full.fit()
    assert cur_full.done and [r["reason"] for r in cur_full.summary()] == ["threshold"] * 3
    first_advance = cur_full.summary()[0]["end_step"]

    cut = first_advance + 5  # stop one evaluation after the first advance, then resume
    part, _ = make_trainer(tmp_path / "part", cut)
    part.fit()
    resumed, cur_res = make_trainer(tmp_path / "part", 60)
    assert resumed.resume()
    assert cur_res.stage == 1 and cur_res.step == cut
    resumed.fit()
    assert cur_res.summary() == cur_full.summary()
    for p_full, p_res in zip(full.model.parameters(), resumed.model.parameters()):
        assert torch.allclose(p_full, p_res)


def test_lookahead_steps_train_the_finished_stage_on_the_next_spec_then_advance():
    """lookahead_steps = 3: a stage that meets its threshold stays current for 3 more steps, with
    ``ahead`` the next stage's spec and no decision at evaluations; the 3rd step starts the next
    stage; its samples count in the finished stage; none follow the last stage; resumable midway."""
    cur = three_stages(advance_threshold=0.9, lookahead_steps=3)
    steps(cur, 5)
    assert cur.ahead is None
    cur.update({"acc": 0.95})
    assert cur.stage == 0 and cur.ahead == 1
    steps(cur, 1)
    saved = json.loads(json.dumps(cur.state_dict()))
    assert cur.update({"acc": 0.0})["stage"] == 0 and cur.ahead == 1  # no decision, no reset
    steps(cur, 2)
    assert cur.stage == 1 and cur.ahead is None
    resumed = three_stages(advance_threshold=0.9, lookahead_steps=3)
    resumed.load_state_dict(saved)
    steps(resumed, 2)
    assert resumed.summary() == cur.summary()
    steps(cur, 2)
    cur.update({"acc": 0.95})
    steps(cur, 3)
    cur.update({"acc": 0.95})
    assert cur.done and cur.ahead is None
    rows = cur.summary()
    assert [(r["finish_step"], r["end_step"], r["samples"]) for r in rows] == [(5, 8, 80), (10, 13, 50), (13, 13, 0)]
    with pytest.raises(ConfigError, match="look-ahead"):
        three_stages(lookahead_steps=1).load_state_dict(saved)
    with pytest.raises(ConfigError, match="lookahead_steps"):
        CurriculumConfig(lookahead_steps=-1)


def test_a_first_stage_short_of_its_threshold_asks_for_restarts_then_meets_its_budget():
    """restart_steps = 4, max_restarts = 2: the first stage asks for a restart 4 steps after each
    (re)start while it misses the threshold; after two the budget ends it. Samples of the failed
    starts stay counted; later stages never restart; the counters survive a state round trip."""
    cur = three_stages(advance_threshold=0.9, stage_steps=6, restart_steps=4, max_restarts=2)
    steps(cur, 4)
    assert cur.update({"acc": 0.1})["restarts"] == 0.0 and cur.restart_pending and cur.stage == 0
    cur.restarted()
    assert not cur.restart_pending and cur.summary()[0]["start_step"] == 4
    steps(cur, 3)
    cur.update({"acc": 0.1})
    assert not cur.restart_pending  # 3 steps since the restart
    steps(cur, 1)
    cur.update({"acc": 0.1})
    assert cur.restart_pending
    cur.restarted()
    saved = json.loads(json.dumps(cur.state_dict()))
    steps(cur, 6)
    out = cur.update({"acc": 0.1})
    assert out["restarts"] == 2.0 and not cur.restart_pending and cur.stage == 1  # no restart left: the budget
    row = cur.summary()[0]
    assert (row["reason"], row["restarts"], row["samples"], row["start_step"]) == ("budget", 2, 140, 8)
    steps(cur, 5)
    cur.update({"acc": 0.1})
    assert not cur.restart_pending  # the second stage is not restarted
    again = three_stages(advance_threshold=0.9, stage_steps=6, restart_steps=4, max_restarts=2)
    again.load_state_dict(saved)
    steps(again, 6)
    again.update({"acc": 0.1})
    assert again.summary()[0] == row
    with pytest.raises(ConfigError, match="restart_steps"):
        CurriculumConfig(stage_steps=4, restart_steps=4)
    with pytest.raises(ConfigError, match="without a pending restart"):
        three_stages().restarted()


def make_restarting_trainer(run_dir, steps):
    """A first stage that cannot be met (threshold above 1): restarts every 10 steps, at most 2."""
    from tinyscope.runs.restarts import curriculum_restart

    torch.manual_seed(0)

    def fresh():
        return torch.nn.Sequential(torch.nn.Embedding(4, 8), torch.nn.Linear(8, 2))

    model = fresh()
    cur = Curriculum([Stage(str(s), s) for s in range(3)],
                     CurriculumConfig(advance_threshold=1.5, restart_steps=10, max_restarts=2))
    task = CurriculumTask(StageTask(), cur)
    xs = torch.arange(4).view(4, 1)

    def evaluate(m):
        acc = float((m(xs).argmax(-1) == (xs > cur.current.spec).long()).float().mean())
        return {"acc": acc} | cur.update({"acc": acc})

    cfg = TrainConfig(steps=steps, batch_size=16, lr=0.05, eval_every=5, checkpoint_every=5, log_every=5,
                      eval_at_start=False)
    trainer = Trainer(model, task, cfg, seed=3, run_dir=run_dir, evaluate=evaluate, progress=False,
                      restart=curriculum_restart(3, cur, fresh))
    return trainer, cur, fresh


def test_a_curriculum_restart_draws_fresh_weights_and_fresh_optimizer_state_and_resumes(tmp_path):
    trainer, cur, fresh = make_restarting_trainer(tmp_path / "full", 10)
    trainer.fit()
    assert cur.summary()[0]["restarts"] == 1 and len(trainer.opt.state) == 0  # restarted at step 10
    from tinyscope.runs.restarts import CURRICULUM_SALT, restart_seed

    torch.manual_seed(restart_seed(3, 1, CURRICULUM_SALT))
    expected = fresh()
    assert all(torch.equal(a, b) for a, b in zip(trainer.model.parameters(), expected.parameters()))

    full, cur_full, _ = make_restarting_trainer(tmp_path / "long", 40)
    full.fit()
    assert cur_full.summary()[0]["restarts"] == 2 and cur_full.summary()[0]["samples"] == 40 * 16
    part, _, _ = make_restarting_trainer(tmp_path / "part", 15)
    part.fit()
    resumed, cur_res, _ = make_restarting_trainer(tmp_path / "part", 40)
    assert resumed.resume() and cur_res.summary()[0]["restarts"] == 1
    resumed.fit()
    assert cur_res.summary() == cur_full.summary()
    assert all(torch.equal(a, b) for a, b in zip(full.model.parameters(), resumed.model.parameters()))
