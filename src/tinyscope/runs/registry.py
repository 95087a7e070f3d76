"""The registry of named experiments.

Every study package under :mod:`tinyscope.studies` registers its experiments when the modules it
lists in ``EXPERIMENT_MODULES`` are imported; :func:`get` and :func:`names` discover and import
them all first. The core reaches a study only through this discovery, never by a static import.
"""
from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import TYPE_CHECKING

from tinyscope.errors import ConfigError

if TYPE_CHECKING:  # the registry itself stays light: `tinyscope --help` must not import torch
    from tinyscope.runs.experiment import Experiment

STUDIES_PACKAGE = "tinyscope.studies"
_REGISTRY: dict[str, "Experiment"] = {}
# Modules that failed to import, with the error: one broken study must not hide the others;
# `tinyscope list` reports these and the test suite requires the dict to stay empty.
IMPORT_ERRORS: dict[str, str] = {}
_loaded = False


def register(exp: "Experiment") -> "Experiment":
    if exp.name in _REGISTRY and type(_REGISTRY[exp.name]) is not type(exp):
        raise ValueError(f"experiment {exp.name!r} registered twice")
    _REGISTRY[exp.name] = exp
    return exp


def study_names() -> list[str]:
    """The study packages under ``tinyscope.studies``, sorted."""
    pkg = importlib.import_module(STUDIES_PACKAGE)
    return sorted(info.name for info in pkgutil.iter_modules(pkg.__path__) if info.ispkg)


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for study in study_names():
        try:
            modules = getattr(importlib.import_module(f"{STUDIES_PACKAGE}.{study}"), "EXPERIMENT_MODULES",
                              ("experiment",))
        except Exception as exc:  # reported by `tinyscope list`; fatal in the tests
            IMPORT_ERRORS[study] = f"{type(exc).__name__}: {exc}"
            continue
        for module in modules:
            name = f"{STUDIES_PACKAGE}.{study}.{module}"
            try:
                importlib.import_module(name)
            except Exception as exc:
                IMPORT_ERRORS[name] = f"{type(exc).__name__}: {exc}"
    _loaded = True


def names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def experiments() -> list["Experiment"]:
    """Every registered experiment, sorted by name."""
    return [_REGISTRY[n] for n in names()]


def get(name: str) -> "Experiment":
    _load_all()
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown experiment {name!r}{hint}; `tinyscope list` shows all {len(_REGISTRY)}")
    return _REGISTRY[name]
