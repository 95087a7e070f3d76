"""Phase 1 restart rules of THEIA's chain protocol (Li 2026, seed003-details Sec. 1.6; the code's
``phase1``).

Phase 1 trains the step model in tries of at most ``steps`` steps (150 epochs in the paper), each
with a fresh optimizer and cosine schedule. Counting epochs of ``epoch_steps`` steps and keeping,
per try, the best step accuracy ``best`` and the epoch it last rose by more than ``min_gain``, a
try ends at the first evaluation where

* the step accuracy reaches ``stop_acc`` (99.9%: phase 1 is done), or
* coarse plateau: epoch >= ``coarse_epoch`` (40) and best < ``coarse_acc`` (90%), or
* fine plateau: ``coarse_acc`` <= best < ``stop_acc`` and no gain for ``fine_epochs`` (30) epochs.

Up to ``restarts`` (3) more tries follow, each from the model the previous try selected (the
best step accuracy; the code continues from the last weights), re-initialised from
``restart_seed(seed, k)`` when that model's accuracy is below ``reinit_below`` (85%).

The rule reads an evaluation's step accuracy and the step it was taken at: evaluation ``i`` of
a try (0 at its start) is at step ``i * eval_every``. The count and the per-try state live in the
try's data source (:class:`Phase1Data`), whose ``state_dict`` the Trainer checkpoints after the
step's evaluation, so a resumed try ends where an uninterrupted one would.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def restart_seed(seed: int, k: int) -> int:
    """The seed of phase-1 restart ``k`` of run ``seed``: its initial weights (when it
    re-initialises) and its batches."""
    return int(np.random.SeedSequence([int(seed), 1, int(k)]).generate_state(1)[0])


@dataclass(frozen=True)
class PlateauRule:
    """When a phase-1 try ends (see the module docstring)."""

    epoch_steps: int = 489
    stop_acc: float = 0.999
    coarse_epoch: int = 40
    coarse_acc: float = 0.90
    fine_epochs: int = 30
    min_gain: float = 0.001

    def update(self, state: dict, step: int, acc: float) -> bool:
        """Record an evaluation (``state``: ``best``, ``last_gain_epoch``; changed in place) and
        say whether the try ends here."""
        epoch = step / self.epoch_steps
        if acc > state.get("best", -1.0) + self.min_gain:
            state["best"], state["last_gain_epoch"] = acc, epoch
        best = state["best"]
        if acc >= self.stop_acc:
            return True
        if epoch >= self.coarse_epoch and best < self.coarse_acc:
            return True
        return self.coarse_acc <= best < self.stop_acc and epoch - state["last_gain_epoch"] >= self.fine_epochs


class Phase1Data:
    """A phase-1 try's data: the run's record task (``sample`` and everything else passed
    through) and the try's :class:`PlateauRule` state; :meth:`observe` records one evaluation
    and says whether the try ends."""

    def __init__(self, task, rule: PlateauRule, eval_every: int):
        self.task, self.rule, self.eval_every = task, rule, eval_every
        self.evals = 0
        self.state: dict = {}

    def __getattr__(self, name):
        return getattr(self.__dict__["task"], name)

    def sample(self, rng: np.random.Generator, batch_size: int):
        return self.task.sample(rng, batch_size)

    def observe(self, acc: float) -> bool:
        done = self.rule.update(self.state, self.evals * self.eval_every, acc)
        self.evals += 1
        return done

    def state_dict(self) -> dict:
        return {"evals": self.evals, "plateau": dict(self.state)}

    def load_state_dict(self, state: dict) -> None:
        self.evals, self.state = int(state["evals"]), dict(state["plateau"])
