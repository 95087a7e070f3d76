"""Deprecated alias of :mod:`tinyscope.runs.rundir` (the module moved when the code was laid out
as one package per study). ``from tinyscope.experiments.runner import load_run`` keeps working
and warns; import from ``tinyscope.runs`` instead."""
import warnings

from tinyscope.runs.rundir import Run, build, evaluate_run, load_run, read_config, run_experiment

warnings.warn("tinyscope.experiments.runner is deprecated; import from tinyscope.runs.rundir "
              "(`from tinyscope.runs.rundir import load_run`)", DeprecationWarning, stacklevel=2)

__all__ = ["Run", "build", "evaluate_run", "load_run", "read_config", "run_experiment"]
