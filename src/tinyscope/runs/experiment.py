"""The Experiment contract: a task, a model, a training config and an evaluation, with presets,
and everything a run of it offers (views, analyses, report sections, tables, claims).

Every experiment of every study subclasses :class:`Experiment` and declares, in one place:

* identity: ``name``, ``description``, ``citation`` (the paper) and ``study`` (the package name
  under ``tinyscope.studies``);
* configuration: ``config_cls`` (a dataclass with fields ``seed``, ``task``, ``model``, ``train``
  and whatever else it needs) and ``presets`` — ``smoke`` finishes in seconds (tests), ``cpu`` in
  minutes on a 2-core laptop, ``paper`` uses the paper's own settings (for a GPU);
* the parts: :meth:`build_task`, :meth:`build_model`, :meth:`objective`, :meth:`evaluator` (cheap,
  during training) and :meth:`final_evaluation` (pure: it measures the selected checkpoint and
  changes nothing);
* training: ``trainable`` (False for compiled models, which are written, not trained) and
  :meth:`stages` (further training phases after the main one, each run by the Trainer with its own
  checkpoints);
* what a run offers: :meth:`views` (`tinyscope viz`), :meth:`analyses` and :meth:`analyze`
  (`tinyscope analyze`), :meth:`report_sections` (RUN/report.html), :meth:`tables`
  (`tinyscope report --table`) and :meth:`claims` (`tinyscope claims`, `tinyscope reproduce`),
  and :meth:`next_commands` (what `tinyscope run` suggests once it has finished).

Shared code asks the run's experiment what to do; it never asks which paper a run belongs to.
"""
from __future__ import annotations

import abc
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import torch

from tinyscope.config import apply_overrides
from tinyscope.errors import ConfigError
from tinyscope.tasks.base import FixedEvalSet, Task

if TYPE_CHECKING:  # annotations only: the run and figure types live above this module
    from matplotlib.figure import Figure

    from tinyscope.report.tables import TableLayout
    from tinyscope.runs.claims import Claim
    from tinyscope.runs.rundir import Run
    from tinyscope.train.trainer import TrainConfig, TrainResult

Config = Any  # a preset's dataclass instance (``Experiment.config_cls``)
Evaluator = Callable[[torch.nn.Module], dict]
Objective = Callable[[torch.nn.Module, dict], torch.Tensor]


@dataclass(frozen=True)
class Citation:
    """The paper an experiment reproduces."""

    authors: str  # "" where the paper text we reproduce from does not name them
    title: str
    year: int
    venue: str = ""  # e.g. "arXiv 2604.11284"

    def __str__(self) -> str:
        venue = f" {self.venue}." if self.venue else ""
        authors = f"{self.authors} " if self.authors else ""
        return f"{authors}({self.year}). {self.title}.{venue}"


@dataclass(frozen=True)
class ViewOptions:
    """What a user may choose about the views of a run (``tinyscope viz`` flags).

    sequence: a token sequence to trace through the model, tokens separated by spaces;
    focus / focus_position: the query token and position a view centres on;
    head: the attention head drawn. A study ignores what does not apply to it."""

    sequence: str | None = None
    focus: str | None = None
    focus_position: int | None = None
    head: int = 0


@dataclass(frozen=True)
class View:
    """One figure a run offers: ``draw()`` returns a matplotlib Figure (drawn on demand).

    name: file stem (``RUN/figures/<name>.png``); label: the paper figure it reproduces
    (``"Fig. 5"``) or a short title; caption: what it shows; table: the same content as text,
    when it has one (``tinyscope viz --only NAME`` prints it)."""

    name: str
    label: str
    caption: str
    draw: Callable[[], "Figure"]
    table: Callable[[], str] | None = None


@dataclass(frozen=True)
class ReportSection:
    """A section of RUN/report.html: views drawn when the page is written, and image files the
    run directory already holds (``(name, caption, path)``; PNG or GIF)."""

    heading: str
    views: Sequence[View] = ()
    images: Sequence[tuple[str, str, Path]] = ()


@dataclass(frozen=True)
class AnalysisOptions:
    """``tinyscope analyze`` flags: which analyses, on how many fresh examples, from which seed,
    and ``settings``: ``KEY=VALUE`` assignments (``--set``) to the keys the experiment's
    :meth:`Experiment.analysis_settings` names (set sizes other than ``n``)."""

    only: tuple[str, ...] = ()
    n: int = 2000
    seed: int = 42
    progress: bool = False
    settings: tuple[str, ...] = ()


@dataclass
class AnalysisResult:
    """Numbers (JSON-ready), figures and a caption per figure name."""

    numbers: dict
    figures: dict[str, "Figure"] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stage:
    """A training phase after the main one (``cfg.train``), run by the Trainer.

    name:      the stage's run directory ``RUN/stages/<name>/`` (checkpoints/, metrics.jsonl,
               resume; a file name: letters, digits, ``_ . -``);
    train:     its TrainConfig (steps, optimizer, schedule, evaluation, selection, stopping);
    objective: its loss ``(model, batch) -> loss`` (None: the main phase's);
    evaluate:  its evaluation during training (None: the main phase's);
    previous:  receives the previous phase's ``TrainResult`` (its stop reason, selected and last
               metrics) before ``prepare`` runs, on a fresh start and on a resume alike (a
               restart reads there whether the previous start was stopped at its gate);
    prepare:   runs on the model before the stage's Trainer is built, on a fresh start and on
               a resume alike (freeze or unfreeze a part, re-initialise a head). Every module
               exists from ``build_model`` on, so every phase's checkpoints load by name;
    task:      what draws its training data, ``sample(rng, batch_size) -> Batch`` (None: the
               run's task); the Trainer checkpoints its ``state_dict`` when it has one;
    seed:      the seed of its per-step data ``step_rng(seed, step)`` (None: the run's seed).

    A stage starts from the model the previous phase selected (``train.select_metric``; None:
    its last evaluation, or its last step when it evaluates nothing); the last stage's selected
    model is the one the final evaluation measures and ``load_run`` returns."""

    name: str
    train: "TrainConfig"
    objective: Objective | None = None
    evaluate: Evaluator | None = None
    prepare: Callable[[torch.nn.Module], None] | None = None
    task: Task | None = None
    previous: Callable[["TrainResult"], None] | None = None
    seed: int | None = None

    def __post_init__(self):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name) or self.name in (".", ".."):
            raise ConfigError(f"stage name {self.name!r} must be a file name of letters, digits, '_', '.' or '-'")


class Experiment(abc.ABC):
    name: str = ""
    description: str = ""
    citation: Citation | None = None
    study: str = ""
    config_cls: type = object
    presets: Mapping[str, Callable[[], Config]] = {}
    trainable: bool = True

    # ------------------------------------------------------------ config
    def config(self, preset: str, seed: int | None = None, overrides: list[str] | None = None) -> Config:
        if preset not in self.presets:
            raise ConfigError(f"experiment {self.name!r} has no preset {preset!r}; choose one of {', '.join(self.presets)}")
        cfg = self.presets[preset]()
        if seed is not None:
            cfg = dataclasses.replace(cfg, seed=int(seed))
        return apply_overrides(cfg, overrides)

    # ------------------------------------------------------------ parts
    @abc.abstractmethod
    def build_task(self, cfg: Config) -> Task:
        """The task (data, oracle, metrics) for ``cfg``."""

    @abc.abstractmethod
    def build_model(self, cfg: Config, task: Task) -> torch.nn.Module:
        """A fresh model for ``cfg`` (weights from torch's seeded RNG)."""

    def objective(self, cfg: Config, task: Task) -> Objective | None:
        """Loss function ``(model, batch_tensors) -> loss``; None = masked next-token CE."""
        return None

    @abc.abstractmethod
    def evaluator(self, cfg: Config, task: Task) -> Evaluator:
        """Cheap evaluation used during training (selection and stopping read its metrics)."""

    def final_evaluation(self, cfg: Config, task: Task, model: torch.nn.Module) -> dict:
        """Evaluation of the selected checkpoint written to results.json. Pure: it must leave
        every parameter and buffer of ``model`` as it found them."""
        with torch.no_grad():
            return {k: float(v) for k, v in self.evaluator(cfg, task)(model).items()}

    def fresh_eval_config(self, cfg: Config, seed: int, n: int | None = None) -> Config:
        """``cfg`` with its final evaluation set drawn afresh from ``seed`` (``n`` examples, or
        the run's own count when None), held out exactly as the run's own test set is (the same
        held-out rules, lengths, depths or splits) and the model unchanged, so that
        `tinyscope eval RUN --seed S` rechecks a claim on data the run never saw."""
        raise ConfigError(f"experiment {self.name} cannot draw a fresh evaluation set yet")

    def write_compiled(self, cfg: Config, out: Path) -> dict:
        """Write the run directory of a compiled (``trainable = False``) model into ``out`` and
        return its results.json; `tinyscope reproduce` reaches compiled models through this."""
        raise ConfigError(f"{self.name} is compiled, not trained, and declares no way to write it")

    def write_run_files(self, cfg: Config, task: Task, out: Path) -> None:
        """Files a run keeps beside its config that its training needs again (a tokenizer learned
        from the user's corpus), written into the run directory ``out`` before training starts
        (by rank 0 only); none by default."""
        return None

    def eval_fingerprint(self, cfg: Config, task: Task) -> str | None:
        """A hash of the fixed evaluation set, saved with the results (None: no fixed set)."""
        return task.eval_fingerprint() if isinstance(task, FixedEvalSet) else None

    def stages(self, cfg: Config, task: Task) -> list[Stage]:
        """Training phases after the main one; none by default."""
        return []

    def id_max_length(self, cfg: Config) -> int | None:
        """The longest input seen in training, the in-distribution edge of a length curve
        (sweep reports mark lengths above it as out of distribution); None: not length-indexed."""
        return None

    # ------------------------------------------------------------ what a run offers
    def views(self, run: "Run", options: ViewOptions = ViewOptions()) -> list[View]:
        """Every figure `tinyscope viz` draws for ``run`` (only those that apply to it)."""
        return []

    def report_sections(self, run: "Run", full: bool = True) -> list[ReportSection]:
        """Sections of RUN/report.html after the summary, results and config; ``full=False`` is
        the quick page of a smoke run. Default: every view, in one section."""
        views = self.views(run)
        return [ReportSection("Figures", views)] if views else []

    def analyses(self) -> tuple[str, ...]:
        """Names of the analyses `tinyscope analyze` can run on a run of this experiment."""
        return ()

    def analysis_settings(self) -> dict[str, object]:
        """The keys `tinyscope analyze --set KEY=VALUE` may change, with their defaults (none here)."""
        return {}

    def analyze(self, run: "Run", options: AnalysisOptions) -> AnalysisResult:
        """Run the analyses ``options.only`` (all when empty) on ``run``."""
        raise ConfigError(f"experiment {self.name} declares no analyses")

    def tables(self) -> list["TableLayout"]:
        """The paper tables this experiment's runs fill (`tinyscope report --table`)."""
        return []

    def claims(self) -> list["Claim"]:
        """The paper's claims this experiment owns (``studies/<study>/claims.py``; see
        :mod:`tinyscope.runs.claims`), listed by `tinyscope claims` and run by `tinyscope reproduce`."""
        return []

    def next_commands(self, run: str) -> list[str]:
        """The two or three commands that make sense once `tinyscope run` has written ``run`` (a
        shell-quoted path), printed after it. Default, from what the experiment offers, the
        first three of: ``viz`` (it declares views), ``analyze`` (analyses), ``eval --seed`` (a
        fresh evaluation set), ``reproduce STUDY`` (claims); a study overrides it to name its own
        (``tinyscope movie RUN``)."""
        offered = [(type(self).views is not Experiment.views, f"tinyscope viz {run}"),
                   (bool(self.analyses()), f"tinyscope analyze {run}"),
                   (type(self).fresh_eval_config is not Experiment.fresh_eval_config,
                    f"tinyscope eval {run} --seed 1"),
                   (bool(self.claims()), f"tinyscope reproduce {self.study}")]
        return [command for offers, command in offered if offers][:3]

    def line(self) -> str:
        from tinyscope.runs.registry import line

        return line(self.name, tuple(self.presets), self.description)
