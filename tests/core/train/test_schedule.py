"""Learning-rate multipliers against their closed forms."""
import math

import pytest

from tinyscope.errors import ConfigError
from tinyscope.train.schedule import lr_multiplier
from tinyscope.train.trainer import TrainConfig


def test_warmup_is_linear_from_start():
    assert lr_multiplier(0, total=100, warmup_steps=10, warmup_start=0.1) == pytest.approx(0.1)
    assert lr_multiplier(5, total=100, warmup_steps=10, warmup_start=0.1) == pytest.approx(0.55)


def test_cosine_and_linear_end_points():
    assert lr_multiplier(10, total=110, warmup_steps=10, kind="cosine", min_ratio=0.1) == pytest.approx(1.0)
    assert lr_multiplier(60, total=110, warmup_steps=10, kind="cosine", min_ratio=0.1) == pytest.approx(0.55)
    assert lr_multiplier(110, total=110, warmup_steps=10, kind="linear", min_ratio=0.1) == pytest.approx(0.1)


def test_wsd_is_flat_then_a_cosine_over_the_last_fraction():
    total, frac = 1000, 0.25
    m = [lr_multiplier(s, total=total, warmup_steps=100, kind="wsd", min_ratio=0.05, decay_fraction=frac)
         for s in range(total + 1)]
    assert m[50] == pytest.approx(0.5)
    assert all(v == 1.0 for v in m[100:750])
    for s in (750, 875, 1000):
        expect = 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * (s - 750) / 250))
        assert m[s] == pytest.approx(expect)
    assert all(a >= b for a, b in zip(m[750:], m[751:]))


def test_bad_schedule_names_the_field():
    with pytest.raises(ConfigError, match="train.schedule"):
        TrainConfig(schedule="exp")
    with pytest.raises(ConfigError, match="train.decay_fraction"):
        TrainConfig(schedule="wsd", decay_fraction=0)
