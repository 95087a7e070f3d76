"""The Ray backend runs the same sweep on a local Ray instance (needs `pip install ray`)."""
import json

from tinyscope.sweep import RunIndex, SweepSpec, parse_grid, run_sweep


def test_ray_backend_runs_the_sweep_on_a_local_instance(tmp_path):
    try:
        import ray  # noqa: F401
    except ImportError as exc:  # not a skip: the backend is part of the package's promise
        raise AssertionError("the Ray test needs Ray: pip install 'tinyscope[ray]' (or `pip install ray`)") from exc
    spec = SweepSpec("plus-last-even", "smoke", [1, 2], parse_grid(["train.lr=3e-3,1e-2"]),
                     ["train.steps=20", "train.eval_every=10", "train.checkpoint_every=10", "train.log_every=10",
                      "eval.n_generated=4"])
    res = run_sweep(spec, tmp_path, jobs=2, backend="ray", progress=False)
    assert (res.total, res.done, res.failed) == (4, 4, [])
    with RunIndex(tmp_path, readonly=True) as index:
        _, rows = index.query()
    assert [r["status"] for r in rows] == ["done"] * 4
    for r in rows:
        results = json.loads((tmp_path / r["path"] / "results.json").read_text())
        assert r["rule_error"] == results["metrics"]["rule_error"] and r["steps"] == 20
    assert run_sweep(spec, tmp_path, jobs=2, backend="ray", progress=False).skipped == 4  # no Ray start needed
