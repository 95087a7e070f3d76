"""The registry of named experiments. Every module of ``tinyscope.experiments`` registers its
experiments on import; :func:`get` and :func:`names` import them all first."""
from __future__ import annotations

import importlib
import pkgutil

from ..errors import ConfigError
from .base import Experiment

_REGISTRY: dict[str, Experiment] = {}
_INFRA = {"base", "registry", "runner"}
# Modules that failed to import, with the error: one broken experiment module must not hide the
# others; `tinyscope list` reports these and the test suite requires the dict to stay empty.
IMPORT_ERRORS: dict[str, str] = {}


def register(exp: Experiment) -> Experiment:
    if exp.name in _REGISTRY and type(_REGISTRY[exp.name]) is not type(exp):
        raise ValueError(f"experiment {exp.name!r} registered twice")
    _REGISTRY[exp.name] = exp
    return exp


def _load_all() -> None:
    from .. import experiments as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in _INFRA and info.name not in IMPORT_ERRORS:
            try:
                importlib.import_module(f"{pkg.__name__}.{info.name}")
            except Exception as exc:  # reported by `tinyscope list`; fatal in the tests
                IMPORT_ERRORS[info.name] = f"{type(exc).__name__}: {exc}"


def names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get(name: str) -> Experiment:
    _load_all()
    if name not in _REGISTRY:
        import difflib

        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown experiment {name!r}{hint}; `tinyscope list` shows all {len(_REGISTRY)}")
    return _REGISTRY[name]
