import math
from pathlib import Path

import numpy as np

from tinyscope.report.records import RunRecord
from tinyscope.studies.log_icot.scaling import fit_exponent, samples_to_99, scaling_figure, scaling_points


def test_fit_recovers_a_power_law_and_its_interval_covers_it():
    ns = [10, 20, 30, 40, 60] * 3
    rng = np.random.default_rng(0)
    samples = [5.0 * n ** 2.3 * math.exp(rng.normal(0, 0.1)) for n in ns]
    fit = fit_exponent(ns, samples)
    assert abs(fit.exponent - 2.3) < 0.15
    assert fit.lo < 2.3 < fit.hi and fit.hi - fit.lo < 0.5
    exact = fit_exponent([10, 20, 40], [100.0, 400.0, 1600.0])
    assert abs(exact.exponent - 2.0) < 1e-9 and abs(exact.hi - exact.lo) < 1e-6


def test_unreached_runs_are_counted_not_fitted():
    fit = fit_exponent([10, 20, 40, 60], [100.0, 200.0, 400.0, math.inf])
    assert fit.n_runs == 3 and fit.n_unreached == 1 and abs(fit.exponent - 1.0) < 1e-9
    assert math.isnan(fit_exponent([10, 10], [5.0, 6.0]).exponent)  # one n: no slope
    assert samples_to_99({"samples": 640.0, "curriculum_done": 0.0}) == math.inf
    assert samples_to_99({"samples": 640.0, "curriculum_done": 1.0}) == 640.0


def _record(exp: str, n: int, seed: int, samples: float, done: float) -> RunRecord:
    return RunRecord(Path(f"/x/{exp}/{n}/s{seed}"), exp, "cpu", seed, {"task.n": n, "task.k": 8}, status="done",
                     metrics={"samples": samples, "curriculum_done": done})


def test_points_by_curriculum_and_the_figure_draws():
    runs = [_record("parity-cot", n, s, 10.0 * n ** 2, 1.0) for n in (10, 20, 40) for s in (0, 1)]
    runs += [_record("parity-logicot", n, 0, 30.0 * n ** 2.5, float(n < 40)) for n in (10, 20, 40)]
    runs.append(_record("parity-direct", 10, 0, 1.0, 1.0))
    other_k = _record("parity-cot", 30, 0, 5.0, 1.0)
    other_k.config["task.k"] = 16
    points = scaling_points(runs + [other_k])
    assert sorted(points) == ["CoT, k = 16", "CoT, k = 8", "Log-ICoT, k = 8"] and len(points["CoT, k = 8"][0]) == 6
    assert points["Log-ICoT, k = 8"][1][-1] == math.inf
    fig = scaling_figure(runs)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(label.startswith("CoT, k = 8: b = 2.00") for label in labels)
    assert any("1 never reached 99%" in label for label in labels)
    assert any(label.startswith("CoT, k = 16: no fit") for label in
               [t.get_text() for t in scaling_figure(runs + [other_k]).axes[0].get_legend().get_texts()])
