"""Restart stages: training starts again from a fresh draw of every weight when a phase ends
without what it was for.

Restart ``k`` (1, 2, ...) of a run of seed ``seed`` is a :class:`~tinyscope.runs.experiment.Stage`
named ``restart<k>``. Its ``prepare`` judges the model the previous phase selected with
``solved(model)`` (in eval mode, without gradients): a solved model is kept (the stage's own
stop rule then ends it at step 0); otherwise every weight is drawn afresh by ``fresh_model()``
under ``torch.manual_seed(restart_seed(seed, k))``, the seed that also draws the stage's batches.
A study says what "solved" means and which recipe a restart trains with (the studies'
``restarts.py``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from tinyscope.runs.experiment import Stage
from tinyscope.train.trainer import TrainConfig


def restart_seed(seed: int, k: int, salt: tuple[int, ...] = ()) -> int:
    """The seed of restart ``k`` of run ``seed`` (a 32-bit integer); ``salt`` keeps two studies'
    streams apart."""
    return int(np.random.SeedSequence([int(seed), int(k), *salt]).generate_state(1)[0])


def restart_stages(seed: int, n: int, stage_train: TrainConfig, solved: Callable[[torch.nn.Module], bool],
                   fresh_model: Callable[[], torch.nn.Module], salt: tuple[int, ...] = ()) -> list[Stage]:
    """``n`` restart stages training with ``stage_train`` (see the module docstring)."""
    def prepare_for(k: int):
        @torch.no_grad()
        def prepare(model: torch.nn.Module) -> None:
            was_training = model.training
            model.eval()
            keep = solved(model)
            model.train(was_training)
            if keep:
                return
            torch.manual_seed(restart_seed(seed, k, salt))
            model.load_state_dict(fresh_model().to(next(model.parameters()).device).state_dict())
        return prepare

    return [Stage(f"restart{k}", stage_train, prepare=prepare_for(k), seed=restart_seed(seed, k, salt))
            for k in range(1, n + 1)]


CURRICULUM_SALT = (1,)  # keeps a curriculum's restart draws apart from restart stages' (salt ())


def curriculum_restart(seed: int, curriculum, fresh_model: Callable[[], torch.nn.Module]
                       ) -> Callable[[torch.nn.Module], bool]:
    """The Trainer's ``restart`` rule for a curriculum with ``restart_steps`` (see
    :mod:`tinyscope.train.curriculum`): when a restart is pending, every weight of the model is
    drawn afresh by ``fresh_model()`` under ``restart_seed(seed, k)`` for restart ``k`` (torch's
    global RNG is left as it was) and the curriculum is told; returns whether it restarted."""
    def restart(model: torch.nn.Module) -> bool:
        if not curriculum.restart_pending:
            return False
        k = curriculum.records[0].restarts + 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(restart_seed(seed, k, CURRICULUM_SALT))
            fresh = fresh_model()
        model.load_state_dict(fresh.state_dict())
        curriculum.restarted()
        return True
    return restart

