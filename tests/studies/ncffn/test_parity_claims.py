"""The parity claims' measures (claims.py): the threshold-parameter ratio, the best accuracy and the
same-size accuracy ratio, on hand-made rows and on a tiny probe."""
import math

import pytest

from tinyscope.studies.ncffn import claims as nc


def _row(basis, width, accuracy, params, seed=0):
    return {"basis": basis, "n_bits": 8, "depth": 1, "width": width, "accuracy": accuracy, "params": params,
            "seed": seed}


def _two_seeds(basis, width, acc0, acc1, params):
    return [_row(basis, width, acc0, params, 0), _row(basis, width, acc1, params, 1)]


def test_parity_measures():
    rows = (_two_seeds("gelu", 2, 0.9, 0.8, 20) + _two_seeds("gelu", 4, 1.0, 0.9, 40) +
            _two_seeds("swiglu", 3, 1.0, 1.0, 60) + _two_seeds("bilinear", 4, 0.6, 0.6, 50) +
            _two_seeds("nc_bool", 2, 0.8, 0.8, 20) + _two_seeds("nc_bool", 4, 1.0, 0.7, 40) +
            _two_seeds("nc", 2, 1.0, 0.7, 20))
    # half of the seeds: gelu solves at 40, swiglu at 60, nc_bool at 40; bilinear never
    assert nc.efficiency_ratio(rows) == pytest.approx(40 / 40)
    assert nc.efficiency_ratio(rows, share=1.0) == math.inf  # nc_bool never solves with both seeds
    assert nc.best_accuracy(rows, "nc") == 1.0 and nc.mean_accuracy(rows, "gelu", 2) == pytest.approx(0.85)
    assert nc.same_size_accuracy_ratio(rows) == pytest.approx(0.85 / 0.85)  # nc solves at width 2 in 1 of 2
    assert nc.same_size_accuracy_ratio(_two_seeds("nc", 2, 0.9, 0.9, 20) + _two_seeds("gelu", 2, 1, 1, 20)) == 0.0
    assert math.isinf(nc.efficiency_ratio(_two_seeds("gelu", 2, 1.0, 1.0, 20) + _two_seeds("swiglu", 2, 1, 1, 30) +
                                          _two_seeds("bilinear", 2, 1, 1, 30) + _two_seeds("nc_bool", 2, .9, .9, 20)))


def test_a_tiny_parity_probe_runs_through_the_measures():
    from tinyscope.studies.ncffn.parity_bases import train_parity_batch

    rows = train_parity_batch("nc_bool", 2, 1, [2, 4], [0, 1], max_steps=50) + \
        train_parity_batch("gelu", 2, 1, [1, 2], [0, 1], max_steps=50)
    assert {r["basis"] for r in rows} == {"nc_bool", "gelu"} and all(r["params"] > 0 for r in rows)
    assert nc.efficiency_ratio(rows, others=("gelu",)) >= 0.0
