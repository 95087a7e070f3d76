"""Best-checkpoint selection and stopping rules, with state that survives a resume.

* Selection keeps the evaluation with the best ``metric`` (min or max); on an exact tie the
  ``tie_break`` metric decides (e.g. TraceRelay: ID accuracy, then the lower cross-entropy);
  the earlier step wins a complete tie.
* Threshold stop: ``metric`` meets ``threshold`` on ``consecutive`` evaluations in a row
  (TraceRelay: two consecutive ID means >= 99%).
* Patience stop: ``patience`` evaluations without an improvement larger than ``min_delta``.
* Gate: at the first evaluation at or after ``gate_step``, a run whose best ``gate_metric`` so far
  has not met ``gate_threshold`` stops (a try that a restart rule then replaces).
"""
from __future__ import annotations

from tinyscope.errors import ConfigError


def _better(a: float, b: float, mode: str) -> bool:
    return a < b if mode == "min" else a > b


def meets(value: float, threshold: float, mode: str) -> bool:
    return value <= threshold if mode == "min" else value >= threshold


def _get(metrics: dict, name: str) -> float:
    if name not in metrics:
        raise ConfigError(f"metric {name!r} is not among the evaluation's metrics: {', '.join(metrics) or 'none'}")
    return float(metrics[name])


class Selection:
    def __init__(self, metric: str | None, mode: str = "min", tie_break: str | None = None, tie_mode: str = "min"):
        self.metric, self.mode, self.tie_break, self.tie_mode = metric, mode, tie_break, tie_mode
        self.best_step: int | None = None
        self.best_metrics: dict = {}

    def update(self, step: int, metrics: dict) -> bool:
        """Record an evaluation; returns True when it becomes the selected one."""
        if not metrics:
            return False
        if self.metric is None:  # no rule: the latest evaluation is selected
            self.best_step, self.best_metrics = step, dict(metrics)
            return True
        value = _get(metrics, self.metric)
        if self.best_step is None:
            better = True
        else:
            best = self.best_metrics[self.metric]
            if value == best and self.tie_break is not None:
                better = _better(_get(metrics, self.tie_break), self.best_metrics[self.tie_break], self.tie_mode)
            else:
                better = _better(value, best, self.mode)
        if better:
            self.best_step, self.best_metrics = step, dict(metrics)
        return better

    def state(self) -> dict:
        return {"best_step": self.best_step, "best_metrics": self.best_metrics}

    def load(self, state: dict) -> None:
        self.best_step, self.best_metrics = state["best_step"], state["best_metrics"]


GATE_REASON = "gate:"  # how the stop reason of a try the gate stopped begins


def stopped_at_gate(reason: str | None) -> bool:
    """Whether a phase whose stop reason (``TrainResult.stopped``) is ``reason`` was stopped by its gate."""
    return reason is not None and reason.startswith(GATE_REASON)


class StopRules:
    def __init__(self, metric: str | None, threshold: float, mode: str, consecutive: int,
                 patience_metric: str | None, patience_mode: str, patience: int, min_delta: float,
                 gate_metric: str | None = None, gate_mode: str = "max", gate_step: int = 0,
                 gate_threshold: float = 0.0):
        self.metric, self.threshold, self.mode, self.consecutive = metric, threshold, mode, consecutive
        self.gate_metric, self.gate_mode = gate_metric, gate_mode
        self.gate_step, self.gate_threshold = gate_step if gate_metric is not None else 0, gate_threshold
        self.gate_best: float | None = None
        self.patience_metric, self.patience_mode = patience_metric, patience_mode
        self.patience, self.min_delta = patience, min_delta
        self.hits = 0
        self.since_improvement = 0
        self.best: float | None = None
        self.reason: str | None = None

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    def update(self, metrics: dict) -> str | None:
        if not metrics:
            return None
        if self.gate_step:
            value = _get(metrics, self.gate_metric)
            if self.gate_best is None or _better(value, self.gate_best, self.gate_mode):
                self.gate_best = value
        if self.metric is not None:
            value = _get(metrics, self.metric)
            met = meets(value, self.threshold, self.mode)
            self.hits = self.hits + 1 if met else 0
            if self.hits >= self.consecutive:
                self.reason = f"{self.metric} {'<=' if self.mode == 'min' else '>='} {self.threshold} on {self.hits} consecutive evaluations"
        if self.patience and self.patience_metric is not None and self.reason is None:
            value = _get(metrics, self.patience_metric)
            improved = self.best is None or (
                value < self.best - self.min_delta if self.patience_mode == "min" else value > self.best + self.min_delta)
            if improved:
                self.best, self.since_improvement = value, 0
            else:
                self.since_improvement += 1
                if self.since_improvement >= self.patience:
                    self.reason = f"no improvement of {self.patience_metric} for {self.patience} evaluations"
        return self.reason

    def gate(self, step: int) -> str | None:
        """Stop at the gate when the best ``gate_metric`` so far misses ``gate_threshold``."""
        if not self.gate_step or step < self.gate_step or self.reason is not None:
            return self.reason
        if self.gate_best is None or not meets(self.gate_best, self.gate_threshold, self.gate_mode):
            best = "nothing" if self.gate_best is None else f"{self.gate_best:.4g}"
            self.reason = (f"{GATE_REASON} best {self.gate_metric} {best} by step {step} misses "
                           f"{'<=' if self.gate_mode == 'min' else '>='} {self.gate_threshold}")
        return self.reason

    def state(self) -> dict:
        return {"hits": self.hits, "since_improvement": self.since_improvement, "best": self.best, "reason": self.reason,
                "gate_best": self.gate_best}

    def load(self, state: dict) -> None:
        self.hits, self.since_improvement = state["hits"], state["since_improvement"]
        self.best, self.reason = state["best"], state["reason"]
        self.gate_best = state.get("gate_best")  # absent from checkpoints written before the gate
