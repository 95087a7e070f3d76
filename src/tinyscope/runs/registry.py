"""The registry of named experiments.

Every study package under :mod:`tinyscope.studies` registers its experiments when the modules it
lists in ``EXPERIMENT_MODULES`` are imported; :func:`get` and :func:`names` discover and import
them all first. The core reaches a study only through this discovery, never by a static import.

A study also declares its experiments statically in ``tinyscope/studies/<study>/catalog.py``
(``EXPERIMENTS``: name, presets, description, as :meth:`Experiment.line` prints them; and
``COMMANDS``: the commands its ``cli.py`` adds, with their help), so that ``tinyscope list`` and
``tinyscope --help`` answer without importing torch or any experiment module (:func:`catalog`,
:func:`study_commands`).
The catalogs are generated from the registry (:func:`write_catalogs`, ``python
scripts/write_catalogs.py``) and a test keeps them equal to it; a study without a catalog is
listed by importing its experiments.
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
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


def line(name: str, presets: "tuple[str, ...] | list[str]", description: str) -> str:
    """The line `tinyscope list` prints for one experiment."""
    return f"{name:<44} {', '.join(presets):<20} {description}"


CATALOG_MODULE = "catalog"


def catalog() -> list[tuple[str, tuple[str, ...], str]]:
    """``(name, presets, description)`` of every experiment, sorted by name, from the studies'
    static catalogs (light modules: no torch, no experiment module), importing the experiments
    of a study only where it has no catalog."""
    rows = []
    for study in study_names():
        try:
            declared = importlib.import_module(f"{STUDIES_PACKAGE}.{study}.{CATALOG_MODULE}").EXPERIMENTS
        except ModuleNotFoundError as exc:
            if exc.name != f"{STUDIES_PACKAGE}.{study}.{CATALOG_MODULE}":
                raise
            declared = [(e.name, tuple(e.presets), e.description) for e in experiments() if e.study == study]
        rows += [(name, tuple(presets), description) for name, presets, description in declared]
    return sorted(rows)


def study_cli(study: str) -> str | None:
    """``tinyscope.studies.<study>.cli`` when the study adds commands of its own, else None."""
    name = f"{STUDIES_PACKAGE}.{study}.cli"
    return name if importlib.util.find_spec(name) is not None else None


def registered_commands(study: str) -> list[tuple[str, str]]:
    """``(command, help)`` of each command the study's cli module registers (importing it)."""
    import argparse

    module = study_cli(study)
    if module is None:
        return []
    sub = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(module).register(sub)
    return [(a.dest, a.help or "") for a in sub._choices_actions]


def study_commands() -> dict[str, list[tuple[str, str]] | None]:
    """Per study with a cli module, its commands as its catalog declares them (``COMMANDS``;
    nothing imported), or None where the catalog declares none (the module must be imported)."""
    found = {}
    for study in study_names():
        if study_cli(study) is None:
            continue
        try:
            declared = getattr(importlib.import_module(f"{STUDIES_PACKAGE}.{study}.{CATALOG_MODULE}"), "COMMANDS", None)
        except ModuleNotFoundError:
            declared = None
        found[study] = [tuple(c) for c in declared] if declared is not None else None
    return found


def catalog_source(study: str) -> str:
    """The text of ``studies/<study>/catalog.py`` from the registry and the study's cli module."""
    rows = [(e.name, tuple(e.presets), e.description) for e in experiments() if e.study == study]
    body = "".join(f"    ({name!r}, {presets!r},\n     {description!r}),\n" for name, presets, description in rows)
    text = (f'"""The experiments of this study as `tinyscope list` prints them, and the commands its cli module\n'
            f'adds, read without importing either (generated by `python scripts/write_catalogs.py`; a test\n'
            f'keeps it equal to the registry and the cli module)."""\n'
            f"EXPERIMENTS = (\n{body})\n")
    if study_cli(study) is not None:
        commands = "".join(f"    ({name!r}, {help_!r}),\n" for name, help_ in registered_commands(study))
        text += f"COMMANDS = (\n{commands})\n"
    return text


def write_catalogs() -> list[str]:
    """Write every study's ``catalog.py`` from the registry; returns the files changed."""
    from pathlib import Path

    changed = []
    root = Path(importlib.import_module(STUDIES_PACKAGE).__path__[0])
    for study in study_names():
        path = root / study / f"{CATALOG_MODULE}.py"
        text = catalog_source(study)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(str(path))
    return changed


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


def _import_error_of(name: str) -> str | None:
    """Why experiment ``name`` is missing when a study that declares it in its catalog failed
    to import (an installation or a bug, not a misspelt name)."""
    for study in study_names():
        errors = [e for key, e in IMPORT_ERRORS.items() if key == study or key.startswith(f"{STUDIES_PACKAGE}.{study}.")]
        if not errors:
            continue
        try:
            declared = importlib.import_module(f"{STUDIES_PACKAGE}.{study}.{CATALOG_MODULE}").EXPERIMENTS
        except Exception:  # noqa: BLE001 - no catalog: cannot tell, the plain message stands
            continue
        if any(row[0] == name for row in declared):
            return f"study {study!r} failed to import ({errors[0]})"
    return None


def get(name: str) -> "Experiment":
    _load_all()
    if name not in _REGISTRY:
        broken = _import_error_of(name)
        if broken:
            raise ConfigError(f"experiment {name!r} is not available: {broken}")
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown experiment {name!r}{hint}; `tinyscope list` shows all {len(_REGISTRY)}")
    return _REGISTRY[name]
