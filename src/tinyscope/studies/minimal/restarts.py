"""Restarts: training starts again from a fresh initialization when a phase ends without the rule.

What separates the plus-last-even runs that never learn the rule (docs/results/minimal.md): early
in training several even digits fall onto one token embedding with one unembedding row (their
gradients agree while the model cannot yet tell them apart); from then on the model cannot output
one without the others and the two-dimensional geometry sits on a symmetric saddle that the
schedule does not leave. Which initializations fall in is not visible at step 0, so the remedy
is a new draw, not a longer run: the paper trains one seed and keeps it, a choice it leaves open.

Restart ``k`` (1, 2, ...) is a :class:`~tinyscope.runs.experiment.Stage` named ``restart<k>``. Its
``prepare`` measures the model the previous phase selected: when its held-out rule error is at
most ``target`` it is kept, else every weight is drawn afresh from ``restart_seed(seed, k)``,
which also seeds the stage's batches. The stage trains with the main phase's recipe and stops at
its first evaluation that meets the run's stop rule, or, when the run has none, once the expected
generation error (``rule_error_expected``) is at most ``confident``; a kept model that already
meets it stops at step 0, so a seed that learned the rule is not trained again.
"""
from __future__ import annotations

import dataclasses

from tinyscope.runs import restarts
from tinyscope.runs.experiment import Stage
from tinyscope.runs.restarts import restart_seed

__all__ = ["restart_seed", "restart_stages"]


def restart_stages(cfg, evaluate, fresh_model, target: float = 0.01, confident: float = 0.03) -> list[Stage]:
    """``cfg.restarts`` stages after the main phase. evaluate: model -> metrics (the run's
    evaluator); fresh_model: () -> a new model from torch's current RNG state."""
    train = cfg.train
    if train.stop_metric is not None:
        stop = dict(stop_metric=train.stop_metric, stop_threshold=train.stop_threshold, stop_mode=train.stop_mode)
    else:
        stop = dict(stop_metric="rule_error_expected", stop_threshold=confident, stop_mode="min")
    stage_train = dataclasses.replace(train, eval_at_start=True, stop_consecutive=1, patience=0, **stop)
    return restarts.restart_stages(cfg.seed, cfg.restarts, stage_train,
                                   lambda model: evaluate(model)["rule_error"] <= target, fresh_model)
