"""Intervals over seeds for the parity probe: exact binomial intervals, threshold parameters and
their bootstrap, the efficiency ratio."""
import math

import pytest

from tinyscope.studies.ncffn.parity_stats import (
    cell_rows,
    cells,
    clopper_pearson,
    efficiency_ratio,
    solve_rates,
    threshold_params,
)


def _rows(basis, solved_by_width, params_per_width=10, n=8, depth=1):
    """solved_by_width: width -> list of per-seed solved flags."""
    return [{"basis": basis, "n_bits": n, "depth": depth, "width": w, "seed": s, "params": params_per_width * w,
             "accuracy": 1.0 if ok else 0.75} for w, flags in solved_by_width.items() for s, ok in enumerate(flags)]


def test_clopper_pearson_against_closed_forms():
    # k = 0 and k = n have closed forms: hi = 1 - (a/2)^(1/n), lo = (a/2)^(1/n)
    assert clopper_pearson(0, 5) == pytest.approx((0.0, 1 - 0.025 ** (1 / 5)))
    assert clopper_pearson(5, 5) == pytest.approx((0.025 ** (1 / 5), 1.0))
    lo, hi = clopper_pearson(3, 5)
    assert 0.146 < lo < 0.147 and 0.947 < hi < 0.948  # the standard table value (0.1466, 0.9473)


def test_threshold_params_reads_the_share_of_seeds():
    rows = _rows("gelu", {2: [1, 0, 0, 0], 3: [1, 1, 0, 0], 4: [1, 1, 1, 1]})
    assert threshold_params(rows, "gelu", 0.25)["params"] == 20
    t = threshold_params(rows, "gelu", 0.5)
    assert (t["params"], t["width"], t["n_seeds"]) == (30, 3, 4)
    assert t["lo"] <= 30 <= t["hi"] and t["lo"] >= 20 and t["hi"] <= 40
    assert math.isinf(threshold_params(_rows("gelu", {2: [0, 0]}), "gelu", 0.5)["params"])
    rates = solve_rates(rows, "gelu")
    assert [(r["width"], r["k"], r["n"]) for r in rates] == [(2, 1, 4), (3, 2, 4), (4, 4, 4)]
    assert rates[2]["hi"] == 1.0 and rates[0]["lo"] > 0


def test_a_sure_result_has_a_point_interval():
    rows = _rows("nc_bool", {2: [0] * 5, 4: [1] * 5}) + _rows("gelu", {4: [0] * 5, 6: [1] * 5})
    r = efficiency_ratio(rows, "nc_bool", ("gelu",))
    assert (r["ratio"], r["lo"], r["hi"]) == pytest.approx((40 / 60, 40 / 60, 40 / 60))


def test_efficiency_ratio_interval_and_edge_cases():
    rows = _rows("nc_bool", {2: [1, 1, 0, 0, 1], 4: [1] * 5}) + _rows("gelu", {3: [1, 0, 0, 1, 0], 5: [1] * 5}) + \
        _rows("swiglu", {4: [0] * 5}, params_per_width=15)
    r = efficiency_ratio(rows, "nc_bool", ("gelu", "swiglu"))
    assert r["ratio"] == pytest.approx(20 / 50)  # nc_bool solves 3/5 at width 2; gelu 2/5 at 3, so 5
    assert r["lo"] <= r["ratio"] <= r["hi"] and r["lo"] == pytest.approx(20 / 50) and r["hi"] > 0.5
    never = _rows("nc_bool", {2: [0] * 3}) + _rows("gelu", {2: [1] * 3})
    assert math.isinf(efficiency_ratio(never, "nc_bool", ("gelu",))["ratio"])
    alone = _rows("nc_bool", {2: [1] * 3}) + _rows("gelu", {2: [0] * 3})
    assert efficiency_ratio(alone, "nc_bool", ("gelu",))["ratio"] == 0.0
    with pytest.raises(Exception, match="same seeds"):
        efficiency_ratio(_rows("nc_bool", {2: [1] * 3}) + _rows("gelu", {2: [1] * 2}), "nc_bool", ("gelu",))


def test_cells_split_the_rows():
    rows = _rows("gelu", {2: [1]}, n=4) + _rows("gelu", {2: [1]}, n=6, depth=2)
    assert cells(rows) == [(4, 1), (6, 2)] and len(cell_rows(rows, 6, 2)) == 1
