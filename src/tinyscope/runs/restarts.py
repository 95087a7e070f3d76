"""Restart stages: training starts again from a fresh draw of every weight when a phase ends
without what it was for.

Restart ``k`` (1, 2, ...) of a run of seed ``seed`` is a :class:`~tinyscope.runs.experiment.Stage`
named ``restart<k>``. Its ``prepare`` judges the model the previous phase selected with
``solved(model)`` (in eval mode, without gradients): a solved model is kept (the stage's own
stop rule then ends it at step 0); otherwise every weight is drawn afresh by ``fresh_model()``
under ``torch.manual_seed(restart_seed(seed, k))``, the seed that also draws the stage's batches.
A study says what "solved" means and which recipe a restart trains with (the studies'
``restarts.py``). :func:`gated_restart_stages` decides early instead: the main phase's gate
(``train.gate_step``) abandons a start that misses it, and the next restart trains a fresh one.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import torch

from tinyscope.errors import check
from tinyscope.runs.experiment import Stage
from tinyscope.train.stopping import stopped_at_gate
from tinyscope.train.trainer import TrainConfig, TrainResult


def restart_seed(seed: int, k: int, salt: tuple[int, ...] = ()) -> int:
    """The seed of restart ``k`` of run ``seed`` (a 32-bit integer); ``salt`` keeps two studies'
    streams apart."""
    return int(np.random.SeedSequence([int(seed), int(k), *salt]).generate_state(1)[0])


def _keep_or_redraw(seed: int, k: int, salt: tuple[int, ...], solved: Callable[[torch.nn.Module], bool],
                    fresh_model: Callable[[], torch.nn.Module], kept: list[bool] | None = None):
    """The ``prepare`` of restart ``k``: keep a solved model, else draw every weight afresh under
    ``restart_seed(seed, k, salt)``; the decision is appended to ``kept`` when given."""
    @torch.no_grad()
    def prepare(model: torch.nn.Module) -> None:
        was_training = model.training
        model.eval()
        keep = solved(model)
        model.train(was_training)
        if kept is not None:
            kept.append(keep)
        if keep:
            return
        torch.manual_seed(restart_seed(seed, k, salt))
        model.load_state_dict(fresh_model().to(next(model.parameters()).device).state_dict())
    return prepare


def restart_stages(seed: int, n: int, stage_train: TrainConfig, solved: Callable[[torch.nn.Module], bool],
                   fresh_model: Callable[[], torch.nn.Module], salt: tuple[int, ...] = ()) -> list[Stage]:
    """``n`` restart stages training with ``stage_train`` (see the module docstring)."""
    return [Stage(f"restart{k}", stage_train, prepare=_keep_or_redraw(seed, k, salt, solved, fresh_model),
                  seed=restart_seed(seed, k, salt)) for k in range(1, n + 1)]


KEPT = "restart_kept"  # the metric a gated restart stage adds: 1 when it kept the previous start


def gated_restart_stages(seed: int, n: int, train: TrainConfig, evaluate: Callable[[torch.nn.Module], dict],
                         fresh_model: Callable[[], torch.nn.Module], fresh_task: Callable[[], object] | None = None,
                         salt: tuple[int, ...] = ()) -> list[Stage]:
    """Fresh starts for a run whose main phase ``train`` has a gate (``train.gate_step``): a start
    whose best ``gate_metric`` misses ``gate_threshold`` by the gate step is abandoned there.

    Restart ``k`` (1 .. ``n``) keeps the previous phase's selected model unless that phase was
    stopped by its gate (``Stage.previous`` reads the stop reason): a start that passed the gate
    trained its whole schedule and is kept whatever its gate metric reads at the end (the stage
    stops at step 0 on its ``restart_kept`` metric), and so is a restart that kept one. Otherwise
    it trains a fresh draw from ``restart_seed(seed, k, salt)`` with the main phase's recipe, gated
    as the main phase except for restart ``n``, which trains its whole schedule whatever it
    reaches. ``evaluate`` is the run's evaluator; ``fresh_task`` gives each stage a task with its
    own training state (a step-driven curriculum starts over), None: the run's task. The samples
    of abandoned starts stay in the run's record."""
    check(train.gate_step > 0 and train.gate_metric is not None,
          "gated restarts need a gate on the main phase (train.gate_step, train.gate_metric)")
    stages = []
    for k in range(1, n + 1):
        kept: list[bool] = []
        passed: list[bool] = []  # whether the previous phase went past its gate

        def stage_evaluate(model: torch.nn.Module, kept=kept) -> dict:
            return {**evaluate(model), KEPT: float(bool(kept) and kept[-1])}

        def note_previous(result: TrainResult, passed=passed) -> None:
            passed.append(not stopped_at_gate(result.stopped))

        def solved(model: torch.nn.Module, passed=passed) -> bool:
            check(bool(passed), "a gated restart needs the previous phase's result (Stage.previous) before prepare")
            return passed[-1]

        stage_train = dataclasses.replace(train, eval_at_start=True, stop_metric=KEPT, stop_threshold=1.0,
                                          stop_mode="max", stop_consecutive=1,
                                          gate_step=train.gate_step if k < n else 0)
        stages.append(Stage(f"restart{k}", stage_train, evaluate=stage_evaluate, previous=note_previous,
                            prepare=_keep_or_redraw(seed, k, salt, solved, fresh_model, kept),
                            task=None if fresh_task is None else fresh_task(), seed=restart_seed(seed, k, salt)))
    return stages


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

