"""A reusable, resumable training curriculum: a list of stages, each left when a validation metric
reaches a threshold or when the stage's step budget runs out, with the samples used per stage.

The curriculum plugs into the foundation :class:`~tinyscope.train.trainer.Trainer` without a
driver: wrap the task in :class:`CurriculumTask` (its ``sample`` draws the current stage's data
and counts samples), call :meth:`Curriculum.update` from the evaluator with the evaluation's
metrics, and let the Trainer checkpoint :meth:`CurriculumTask.state_dict` with its own state
(it saves a task's ``state_dict`` when the task has one), so a resumed run continues in the same
stage with the same counters.

With ``lookahead_steps`` = N, a non-final stage that is over (threshold or budget) trains N more
steps before the next stage starts, drawn with :attr:`Curriculum.ahead` set to the next stage's
spec: the task decides what such a step draws (Log-ICoT: the next stage's token layout, so that a
layer is trained on the inputs it will see once it is frozen). Evaluations during them make no
decision.

With ``restart_steps`` = R and ``max_restarts`` = M, a first stage still short of its threshold
R steps after it started (or last restarted) asks for a restart (:attr:`Curriculum.restart_pending`):
the experiment draws every weight afresh, the Trainer gives the optimizer fresh state, and
:meth:`Curriculum.restarted` starts the stage's step count (and budget) again. Samples drawn before
a restart stay counted in the stage's samples: a restarted run pays for its failed starts. The
first stage is the one an explicit chain of thought trains from random weights, where a slow
search for the parity pairs can stall for a whole budget while a fresh draw finds them (Log-ICoT,
docs/results/log_icot.md); later stages start from trained layers and are not restarted.

Metrics added to each evaluation by :meth:`Curriculum.metrics`: ``stage`` (index of the stage that
was evaluated), ``progress`` (stage + the advance metric: increases through the curriculum, a
selection metric), ``done`` (1 once the last stage met its threshold: a stop metric), ``samples``
(all samples drawn) and ``stage_samples``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from tinyscope.errors import check, check_choice


@dataclass
class CurriculumConfig:
    advance_metric: str = "acc"          # evaluation metric compared with the threshold
    advance_threshold: float = 0.99
    advance_mode: Literal["max", "min"] = "max"
    advance_consecutive: int = 1         # evaluations in a row that must meet the threshold
    stage_steps: int = 0                 # step budget of each non-final stage; 0 = none (threshold only)
    min_stage_steps: int = 0             # steps a stage trains before it may advance
    lookahead_steps: int = 0             # steps a finished non-final stage trains on, drawn with the next
                                         # stage's spec as ``Curriculum.ahead``, before the next stage starts
    restart_steps: int = 0               # a first stage short of its threshold this many steps after its
                                         # start is started again from fresh weights (0 = never; see below)
    max_restarts: int = 0                # restarts allowed; then the stage's budget applies as usual

    def __post_init__(self):
        check(self.advance_consecutive >= 1, f"curriculum.advance_consecutive={self.advance_consecutive} must be >= 1")
        check(self.stage_steps >= 0, f"curriculum.stage_steps={self.stage_steps} must be >= 0 (0 = no budget)")
        check(self.min_stage_steps >= 0, f"curriculum.min_stage_steps={self.min_stage_steps} must be >= 0")
        check(self.lookahead_steps >= 0, f"curriculum.lookahead_steps={self.lookahead_steps} must be >= 0")
        check(self.restart_steps >= 0 and self.max_restarts >= 0,
              f"curriculum.restart_steps={self.restart_steps} and curriculum.max_restarts={self.max_restarts} "
              f"must be >= 0")
        check(not (self.restart_steps and self.stage_steps and self.restart_steps >= self.stage_steps),
              f"curriculum.restart_steps={self.restart_steps} must be below curriculum.stage_steps="
              f"{self.stage_steps}, or the budget ends the first stage before a restart is due")
        check_choice("curriculum.advance_mode", self.advance_mode, ("max", "min"))


@dataclass
class Stage:
    """One stage: a name and what the data sampler needs (e.g. the removed thinking tokens)."""

    name: str
    spec: Any = None


@dataclass
class StageRecord:
    stage: int
    start_step: int
    end_step: int | None = None
    samples: int = 0
    reason: str | None = None            # "threshold" | "budget" once the stage is over
    finish_step: int | None = None       # step at which it was over; end_step follows its look-ahead steps
    restarts: int = 0                    # fresh starts of the weights within the stage (the first only)


class Curriculum:
    """Which stage is current, when to move on, and how many samples each stage used."""

    def __init__(self, stages: list[Stage], cfg: CurriculumConfig | None = None):
        check(len(stages) >= 1, "a curriculum needs at least one stage")
        self.stages, self.cfg = list(stages), cfg or CurriculumConfig()
        self.stage = 0
        self.step = 0                     # steps drawn so far (one ``count`` call per step)
        self.hits = 0
        self.done = False
        self.lookahead_left = 0           # look-ahead steps still to train before the next stage
        self.restart_pending = False      # set by update(); cleared by restarted()
        self.records: list[StageRecord] = [StageRecord(0, 0)]

    @property
    def current(self) -> Stage:
        return self.stages[self.stage]

    @property
    def is_last(self) -> bool:
        return self.stage == len(self.stages) - 1

    @property
    def ahead(self) -> Any:
        """The next stage's spec while the current stage trains its look-ahead steps, else None."""
        return self.stages[self.stage + 1].spec if self.lookahead_left else None

    def count(self, n_samples: int) -> None:
        """Record one training step that drew ``n_samples`` samples of the current stage (its
        look-ahead steps included); the last look-ahead step starts the next stage."""
        self.step += 1
        self.records[-1].samples += int(n_samples)
        if self.lookahead_left:
            self.lookahead_left -= 1
            if not self.lookahead_left:
                self._advance()

    def _met(self, metrics: dict) -> bool:
        if self.cfg.advance_metric not in metrics:
            check(False, f"curriculum.advance_metric={self.cfg.advance_metric!r} is not among the evaluation's "
                         f"metrics: {', '.join(metrics)}")
        value = float(metrics[self.cfg.advance_metric])
        return value >= self.cfg.advance_threshold if self.cfg.advance_mode == "max" else value <= self.cfg.advance_threshold

    def update(self, metrics: dict) -> dict:
        """Take an evaluation of the current stage; advance if it is due. Returns :meth:`metrics`
        of the evaluated stage (read before any advance)."""
        out = self.metrics(metrics)
        if self.done or self.lookahead_left:
            return out
        record = self.records[-1]
        in_stage = self.step - record.start_step
        self.hits = self.hits + 1 if self._met(metrics) else 0
        if self.hits >= self.cfg.advance_consecutive and in_stage >= self.cfg.min_stage_steps and self.step > 0:
            self._finish("threshold")
        elif self._restart_due(in_stage):
            self.restart_pending = True
        elif self.cfg.stage_steps and in_stage >= self.cfg.stage_steps and not self.is_last:
            self._finish("budget")
        out["done"] = float(self.done)
        return out

    def _restart_due(self, in_stage: int) -> bool:
        c = self.cfg
        return (c.restart_steps > 0 and self.stage == 0 and in_stage >= c.restart_steps
                and self.records[0].restarts < c.max_restarts)

    def restarted(self) -> None:
        """The weights were drawn afresh for a pending restart: the first stage starts its step
        count again (its samples so far stay counted)."""
        check(self.restart_pending, "Curriculum.restarted() without a pending restart")
        record = self.records[0]
        record.restarts += 1
        record.start_step = self.step
        self.hits = 0
        self.restart_pending = False

    def _finish(self, reason: str) -> None:
        record = self.records[-1]
        record.finish_step, record.reason = self.step, reason
        self.hits = 0
        if self.is_last:
            record.end_step, self.done = self.step, True
        elif self.cfg.lookahead_steps:
            self.lookahead_left = self.cfg.lookahead_steps
        else:
            self._advance()

    def _advance(self) -> None:
        self.records[-1].end_step = self.step
        self.stage += 1
        self.records.append(StageRecord(self.stage, self.step))

    def metrics(self, metrics: dict) -> dict:
        value = float(metrics.get(self.cfg.advance_metric, 0.0))
        if self.cfg.advance_mode == "min":
            value = 1.0 / (1.0 + max(value, 0.0))
        return {"stage": float(self.stage), "progress": self.stage + value, "done": float(self.done),
                "samples": float(self.samples), "stage_samples": float(self.records[-1].samples),
                "restarts": float(self.records[0].restarts)}

    @property
    def samples(self) -> int:
        return sum(r.samples for r in self.records)

    def summary(self) -> list[dict]:
        return [{"stage": r.stage, "name": self.stages[r.stage].name, "start_step": r.start_step,
                 "finish_step": r.finish_step, "end_step": r.end_step, "samples": r.samples, "reason": r.reason,
                 "restarts": r.restarts}
                for r in self.records]

    # ----------------------------------------------------------------- resume
    def state_dict(self) -> dict:
        return {"stage": self.stage, "step": self.step, "hits": self.hits, "done": self.done,
                "lookahead_left": self.lookahead_left, "records": [vars(r).copy() for r in self.records]}

    def load_state_dict(self, state: dict) -> None:
        check(0 <= state["stage"] < len(self.stages),
              f"the saved curriculum is at stage {state['stage']}, but this one has {len(self.stages)} stages")
        self.stage, self.step, self.hits, self.done = state["stage"], state["step"], state["hits"], state["done"]
        self.lookahead_left = int(state.get("lookahead_left", 0))  # absent from checkpoints before look-ahead steps
        check(0 <= self.lookahead_left <= self.cfg.lookahead_steps and not (self.lookahead_left and self.is_last),
              f"the saved curriculum has {self.lookahead_left} look-ahead steps left; this one allows "
              f"{self.cfg.lookahead_steps} and none in its last stage")
        self.records = [StageRecord(**r) for r in state["records"]]


class CurriculumTask:
    """A task whose ``sample`` draws the current stage's data: ``draw(rng, batch_size, stage.spec)``.

    Everything else (attributes of the wrapped task) is forwarded, so evaluators and figures see
    the wrapped task unchanged.
    """

    def __init__(self, task: Any, curriculum: Curriculum,
                 draw: Callable[[np.random.Generator, int, Any], Any] | None = None):
        self.task, self.curriculum = task, curriculum
        self._draw = draw or (lambda rng, b, spec: task.sample(rng, b, spec))

    def sample(self, rng: np.random.Generator, batch_size: int):
        batch = self._draw(rng, batch_size, self.curriculum.current.spec)
        self.curriculum.count(batch_size)
        return batch

    def state_dict(self) -> dict:
        return {"curriculum": self.curriculum.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.curriculum.load_state_dict(state["curriculum"])

    def __getattr__(self, name: str):
        if name in ("task", "curriculum", "_draw"):
            raise AttributeError(name)
        return getattr(self.task, name)
