"""Restarts of a circuit run: a fresh draw of every weight when a phase ends without an exact step.

Why (docs/results/circuits.md, arithmetic): besides the sub-problem imbalance that
``task.subproblem_balance`` removes, some initialisations end in a routing the straight-through
estimators do not leave: W_Q switched off at both operators (the operator's attention row is 0,
and through the quadratic units the gradient at 0 is ``2 b_in``, about 0 from the zero bias), or
W_K hiding some literals from the operator's bag, so two bags with different results coincide.
Such a run plateaus; ``train.patience`` ends its phase and restart ``k`` draws every weight (and
the stage's batches) from :func:`restart_seed`. A phase whose selected model already reduces every
checked training and depth-1 expression exactly is kept, and its stage stops at step 0.

Restart ``k`` (1, 2, ...) is a :class:`~tinyscope.runs.experiment.Stage` named ``restart<k>``; it
trains with the main phase's recipe, stopping at its first exact evaluation.
"""
from __future__ import annotations

import dataclasses
from functools import partial

from tinyscope.runs import restarts
from tinyscope.runs.experiment import Stage

SALT = (7,)  # this study's restart stream
restart_seed = partial(restarts.restart_seed, salt=SALT)


def restart_stages(cfg, evaluate, fresh_model) -> list[Stage]:
    """``cfg.restarts`` stages after the main phase. evaluate: model -> metrics with
    ``step_exact``; fresh_model: () -> a new model drawn from torch's current RNG state."""
    stage_train = dataclasses.replace(cfg.train, eval_at_start=True, stop_consecutive=1)
    return restarts.restart_stages(cfg.seed, cfg.restarts, stage_train,
                                   lambda model: evaluate(model)["step_exact"] >= 1.0, fresh_model, SALT)
