"""What an experiment is: a task, a model, a training config and an evaluation, with presets.

Each experiment module declares a config dataclass with fields ``seed``, ``task``, ``model``
and ``train`` (and anything else it needs), a dict of named presets, and how to build the task
and the model and how to evaluate. ``smoke`` finishes in seconds (tests), ``cpu`` in minutes on
a 2-core laptop, ``paper`` uses the paper's own settings.
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable

import torch

from tinyscope.config import apply_overrides
from tinyscope.errors import ConfigError


class Experiment(abc.ABC):
    name: str = ""
    description: str = ""
    paper: str = ""
    config_cls: type = object
    presets: dict[str, Callable[[], Any]] = {}

    # ------------------------------------------------------------ config
    def config(self, preset: str, seed: int | None = None, overrides: list[str] | None = None) -> Any:
        if preset not in self.presets:
            raise ConfigError(f"experiment {self.name!r} has no preset {preset!r}; choose one of {', '.join(self.presets)}")
        cfg = self.presets[preset]()
        if seed is not None:
            cfg = dataclasses.replace(cfg, seed=int(seed))
        return apply_overrides(cfg, overrides)

    # ------------------------------------------------------------ parts
    @abc.abstractmethod
    def build_task(self, cfg: Any) -> Any:
        """The task (data, oracle, metrics) for ``cfg``."""

    @abc.abstractmethod
    def build_model(self, cfg: Any, task: Any) -> torch.nn.Module:
        """A fresh model for ``cfg`` (weights from torch's seeded RNG)."""

    def objective(self, cfg: Any, task: Any):
        """Loss function ``(model, batch_tensors) -> loss``; None = masked next-token CE."""
        return None

    @abc.abstractmethod
    def evaluator(self, cfg: Any, task: Any) -> Callable[[torch.nn.Module], dict]:
        """Cheap evaluation used during training (selection and stopping read its metrics)."""

    def final_evaluation(self, cfg: Any, task: Any, model: torch.nn.Module) -> dict:
        """Evaluation of the selected checkpoint written to results.json."""
        with torch.no_grad():
            return {k: float(v) for k, v in self.evaluator(cfg, task)(model).items()}

    def eval_fingerprint(self, cfg: Any, task: Any) -> str | None:
        fp = getattr(task, "eval_fingerprint", None)
        return fp() if fp else None

    def figures(self, run: Any) -> dict:
        """Named matplotlib Figures for the run report (``run`` is a loaded run)."""
        return {}

    def line(self) -> str:
        return f"{self.name:<44} {', '.join(self.presets):<20} {self.description}"
