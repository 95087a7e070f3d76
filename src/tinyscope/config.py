"""Configs are nested dataclasses validated in ``__post_init__``.

This module turns them into JSON and back, and applies ``--set a.b=value`` overrides with
the value parsed by the field's declared type. Every failure is a :class:`ConfigError` that
names the key, the value and what is allowed.
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import Any

from tinyscope.errors import ConfigError


def to_dict(cfg: Any) -> dict:
    """Plain-JSON view of a (nested) config dataclass."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            return True, args[0] if len(args) == 1 else typing.Union[tuple(args)]
    return False, tp


def _to_int(value: Any, key: str) -> int:
    """An integer from an int, an integral float (``1e4``) or its text; NaN, infinities, fractions,
    booleans and text that is not a number are refused."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}={value!r} is not an integer")
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str):
        try:
            return int(text.replace("_", ""), 10)  # exact, whatever the number of digits
        except ValueError:
            pass
    try:
        f = float(text)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{key}={value!r} is not an integer") from None
    if not math.isfinite(f) or f != int(f):
        raise ConfigError(f"{key}={value!r} is not an integer (a whole number, e.g. {key}=100)")
    return int(f)


def _to_float(value: Any, key: str) -> float:
    """A float from a number or its text (NaN and infinities pass here; :func:`validate` refuses them)."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}={value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{key}={value!r} is not a number") from None


def coerce(tp: Any, value: Any, key: str) -> Any:
    """Convert a JSON value (or a string from the command line) to the declared type ``tp``."""
    optional, inner = _is_optional(tp)
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null")):
        if optional or tp is Any:
            return None
        raise ConfigError(f"{key} cannot be None")
    tp = inner
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping of fields of {tp.__name__}, got {value!r}")
        return from_dict(tp, value, prefix=key)
    if origin in (list, tuple):
        args = typing.get_args(tp)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{key}={value!r} is not a valid list: {exc.msg}") from None
            else:
                value = [v for v in text.split(",") if v.strip() != ""]
        if not isinstance(value, (list, tuple)):
            value = [value]
        elem = args[0] if args else Any
        items = [coerce(elem, v, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not allowed; choose one of {', '.join(map(repr, allowed))}")
        return value
    if origin is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{key}={value!r} is not a JSON object: {exc.msg}") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{key}={value!r} is not a boolean; use true or false")
    if tp is int:
        return _to_int(value, key)
    if tp is float:
        return _to_float(value, key)
    if tp is str:
        return str(value)
    return value


def from_dict(cls: type, data: dict, prefix: str = "") -> Any:
    """Build ``cls`` from a mapping, rejecting unknown keys and coercing each value."""
    hints = _field_types(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = [k for k in data if k not in names]
    if unknown:
        where = prefix or cls.__name__
        raise ConfigError(f"unknown key {prefix + '.' if prefix else ''}{unknown[0]} in {where}; allowed: {', '.join(names)}")
    kwargs = {k: coerce(hints[k], v, f"{prefix + '.' if prefix else ''}{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError, ArithmeticError, LookupError) as exc:  # a study's check that is not a ConfigError
        raise ConfigError(f"{prefix or cls.__name__}: {exc}") from None


def _split(assignment: str) -> tuple[str, str]:
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r} must look like key=value, e.g. train.lr=3e-4")
    key, text = assignment.split("=", 1)
    return key.strip(), text.strip()


def _set_in(data: dict, cfg: Any, path: list[str], text: str, full_key: str) -> None:
    """Parse ``text`` by the type of field ``path`` of ``cfg`` and store it in ``data`` (its dict view)."""
    names = [f.name for f in dataclasses.fields(cfg) if f.init]
    head = path[0]
    if head not in names:
        where = full_key[: len(full_key) - len(".".join(path))].rstrip(".") or "the config"
        raise ConfigError(f"unknown config key {full_key!r}: {where} has no field {head!r}; allowed: {', '.join(names)}")
    current = getattr(cfg, head)
    if len(path) == 1:
        data[head] = coerce(_field_types(type(cfg))[head], text, full_key)
    elif dataclasses.is_dataclass(current):
        _set_in(data[head], current, path[1:], text, full_key)
    else:
        raise ConfigError(f"unknown config key {full_key!r}: {head} is a value, not a group of fields")


def apply_overrides(cfg: Any, assignments: list[str] | None) -> Any:
    """Return a copy of ``cfg`` with every ``"a.b=value"`` applied, validated once at the end
    (so that overrides which only make sense together, like two widths, can be given together),
    and checked by :func:`validate` (with or without overrides)."""
    if assignments:
        data = dataclasses.asdict(cfg)
        for assignment in assignments:
            key, text = _split(assignment)
            _set_in(data, cfg, key.split("."), text, key)
        cfg = from_dict(type(cfg), data)
    validate(cfg)
    return cfg


SEED_MAX = 2**32 - 1  # seeds are 32-bit: numpy and torch take them, and so does anything derived from them
INT_MAX = 2**63 - 1   # what a tensor size or an index can hold


def is_seed_field(name: str) -> bool:
    """A field holds a seed when it is named ``seed`` or ends in ``_seed`` (``eval_seed``)."""
    return name == "seed" or name.endswith("_seed")


def check_seed(key: str, seed: int | None) -> None:
    """A seed given on the command line (``--seed``) lies in ``[0, SEED_MAX]`` (None: none given)."""
    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"{key} {seed} is not a seed; seeds are integers from 0 to {SEED_MAX}")


def validate(cfg: Any, prefix: str = "") -> None:
    """The checks every config shares, whatever its study, after the study's own ``__post_init__``:

    * a float is finite (NaN or an infinity means nothing as a rate, a scale or a threshold);
    * a field declared ``int`` holds an int (not a bool or a float), of at most 64 bits;
    * a seed (:func:`is_seed_field`) lies in ``[0, SEED_MAX]``;

    recursively through nested configs, lists and mappings. Raises :class:`ConfigError` naming
    the first offending key. Configs loaded from an existing run directory are not checked
    (:func:`from_dict` alone), so that old runs always load."""
    hints = _field_types(type(cfg))
    for f in dataclasses.fields(cfg):
        _validate_value(hints.get(f.name, Any), getattr(cfg, f.name), f"{prefix}{f.name}", f.name)


def _validate_value(tp: Any, value: Any, key: str, name: str) -> None:
    if value is None:
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        validate(value, prefix=f"{key}.")
        return
    _, tp = _is_optional(tp)
    origin = typing.get_origin(tp)
    if isinstance(value, (list, tuple)):
        args = typing.get_args(tp) if origin in (list, tuple) else ()
        elem = args[0] if len(args) == 1 or (len(args) == 2 and args[1] is Ellipsis) else Any
        for i, v in enumerate(value):
            _validate_value(elem, v, f"{key}[{i}]", name)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _validate_value(Any, v, f"{key}.{k}", str(k))
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}={value} is not a finite number; give a number such as {key}=0.5")
    if tp is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{key}={value!r} is not an integer")
    if isinstance(value, int) and not isinstance(value, bool):
        if is_seed_field(name) and not 0 <= value <= SEED_MAX:
            raise ConfigError(f"{key}={value} is not a seed; seeds are integers from 0 to {SEED_MAX}")
        if abs(value) > INT_MAX:
            raise ConfigError(f"{key}={value} does not fit in 64 bits")
