"""Property-based fuzzing of ``--set KEY=VALUE`` (issue 20): whatever text a user gives for
whatever field, the result is a valid config or one ConfigError line, never another exception.

For a few experiments' smoke presets every field of the config is found by walking the
dataclasses, and hypothesis draws a text for it by the field's declared type: integers (huge,
negative, NaN, infinities, fractions, digits with junk), floats, booleans, choices, lists (comma
separated and JSON) and strings, plus text of any kind. A config that is accepted must be
valid by :func:`tinyscope.config.validate` (finite floats, whole integers, 32-bit seeds) and
survive the trip through config.json (``to_dict`` -> JSON -> ``from_dict``), so that a resume
reads the run it wrote. With moderate values, an accepted config must also get through the
checks made before a run starts (task built, model built on the meta device, memory
estimated) with nothing worse than a ConfigError line.
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyscope.commands._preflight import check_machine
from tinyscope.config import SEED_MAX, from_dict, is_seed_field, to_dict, validate
from tinyscope.errors import ConfigError
from tinyscope.runs.registry import get

EXPERIMENTS = ["plus-last-even", "tracerelay-dyck", "circuit-boolean", "parity-cot"]
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
BUILD = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))


def fields_of(cfg, prefix: str = "") -> list[tuple[str, typing.Any, typing.Any]]:
    """(dotted key, declared type, preset value) of every leaf field of a config dataclass."""
    hints = typing.get_type_hints(type(cfg))
    out = []
    for f in dataclasses.fields(cfg):
        if not f.init:
            continue
        value, key = getattr(cfg, f.name), f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            out += fields_of(value, f"{key}.")
        else:
            out.append((key, hints[f.name], value))
    return out


def unwrap(tp):
    """(optional?, the type inside Optional)."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return True, rest[0] if len(rest) == 1 else typing.Any
    return False, tp


JUNK = st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "1e400", "-1e400", "1e-400", "0x10", "1_000",
                        "3.5", "-0", "1e3", "true", "none", "null", "[", "[]", "[1,", "{}", "[[1]]", "a=b",
                        "\u00e9", "9" * 40, "-" + "9" * 40, "1,2", " 7 "]) | st.text(max_size=12)


def ints(small: bool):
    if small:
        return st.integers(-3, 64).map(str)
    return st.one_of(st.integers().map(str), st.integers(-2**70, 2**70).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr), JUNK)


def floats(small: bool):
    if small:
        return st.floats(-2.0, 2.0, allow_nan=False).map(repr)
    return st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers().map(str), JUNK)


def text_for(tp, value, small: bool = False) -> st.SearchStrategy[str]:
    """Texts a user might type for a field of type ``tp`` (``small``: values of a sane size)."""
    optional, tp = unwrap(tp)
    origin = typing.get_origin(tp)
    extra = [st.just("none")] if optional else []
    if tp is bool:
        base = st.sampled_from(["true", "false", "1", "0", "yes", "off", "maybe", "2", "True"])
    elif tp is int:
        base = ints(small)
    elif tp is float:
        base = floats(small)
    elif origin is typing.Literal:
        choices = [str(c) for c in typing.get_args(tp)]
        base = st.sampled_from(choices) | (st.sampled_from(choices).map(str.upper) if not small else st.nothing())
    elif origin in (list, tuple):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        elem = text_for(args[0], None, small) if args else st.text(max_size=4)
        items = st.lists(elem, max_size=4)
        base = st.one_of(items.map(",".join), items.map(lambda xs: "[" + ",".join(xs) + "]"))
    elif tp is str:
        base = st.text(max_size=16) if not small else st.sampled_from([str(value)] if value is not None else ["x"])
    else:
        base = st.text(max_size=8)
    return st.one_of(base, *extra) if small else st.one_of(base, JUNK, *extra)


def assignment(exp_name: str, small: bool):
    cfg = get(exp_name).config("smoke")
    fields = fields_of(cfg)
    return st.sampled_from(fields).flatmap(
        lambda f: text_for(f[1], f[2], small).map(lambda text: f"{f[0]}={text}"))


def accepted_or_one_line(exp_name: str, overrides: list[str]):
    """The config, or None after checking that the refusal is one ConfigError line."""
    exp = get(exp_name)
    try:
        cfg = exp.config("smoke", None, overrides)
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message, f"{overrides}: a ConfigError of more than one line: {message!r}"
        return None
    validate(cfg)  # accepted means valid
    assert_valid_values(cfg)
    again = from_dict(exp.config_cls, json.loads(json.dumps(to_dict(cfg))))  # config.json and back
    assert to_dict(again) == to_dict(cfg), overrides
    return cfg


def assert_valid_values(cfg, prefix: str = "") -> None:
    """An independent statement of what validate promises (so that a broken validate fails here)."""
    for key, _, value in fields_of(cfg, prefix):
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, float):
                assert math.isfinite(v), f"{key}={v} accepted"
            if is_seed_field(key.rsplit(".", 1)[-1]) and isinstance(v, int):
                assert 0 <= v <= SEED_MAX, f"{key}={v} accepted"


@pytest.mark.parametrize("exp_name", EXPERIMENTS)
def test_any_set_value_gives_a_valid_config_or_one_config_error_line(exp_name):
    @FUZZ
    @given(st.lists(assignment(exp_name, small=False), min_size=1, max_size=3))
    def check(overrides):
        accepted_or_one_line(exp_name, overrides)

    check()


@pytest.mark.parametrize("exp_name", EXPERIMENTS)
def test_an_accepted_config_passes_the_start_checks_or_gives_one_config_error_line(exp_name):
    """Moderate values: the config builds its task and (meta) model, or says in one line why not."""
    @BUILD
    @given(assignment(exp_name, small=True))
    def check(override):
        cfg = accepted_or_one_line(exp_name, [override])
        if cfg is None:
            return
        try:
            check_machine(get(exp_name), cfg, [override])
        except ConfigError as exc:
            assert "\n" not in str(exc), str(exc)

    check()


@pytest.mark.parametrize("text, accepted", [
    ("100", 100), ("1e3", 1000), (" 7 ", 7), ("1_000", 1000), ("9" * 30, int("9" * 30)),
    ("nan", None), ("inf", None), ("-inf", None), ("1e400", None), ("3.5", None), ("true", None), ("", None),
])
def test_integer_fields_take_whole_numbers_only(text, accepted):
    exp = get("plus-last-even")
    if accepted is None:
        with pytest.raises(ConfigError, match=r"train.steps=.* is not an integer"):
            exp.config("smoke", None, [f"train.steps={text}"])
    elif accepted > 2**63 - 1:
        with pytest.raises(ConfigError, match="64 bits"):
            exp.config("smoke", None, [f"train.steps={text}"])
    else:
        assert exp.config("smoke", None, [f"train.steps={text}"]).train.steps == accepted


@pytest.mark.parametrize("key", ["model.init_std", "train.lr", "train.stop_threshold", "train.min_delta"])
@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400"])
def test_non_finite_floats_are_refused_in_every_float_field(key, text):
    with pytest.raises(ConfigError) as exc:
        get("plus-last-even").config("smoke", None, [f"{key}={text}"])
    assert key in str(exc.value)


@pytest.mark.parametrize("seed", [-1, SEED_MAX + 1, 10**23])
def test_seeds_outside_32_bits_are_refused(seed):
    with pytest.raises(ConfigError, match="is not a seed"):
        get("plus-last-even").config("smoke", seed)
    assert get("plus-last-even").config("smoke", SEED_MAX).seed == SEED_MAX
