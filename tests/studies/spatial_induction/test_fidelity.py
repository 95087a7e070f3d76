"""Coverage filter that keeps the rule, feasibility, App. I.1 pools and the authors' token ids."""
import numpy as np
import pytest

from tinyscope.studies.spatial_induction.coverage import context_covered, cover, feasibility, is_covered
from tinyscope.studies.spatial_induction.evolve import evolve
from tinyscope.studies.spatial_induction.lattice import ELEMENTARY, VON_NEUMANN, Lattice
from tinyscope.studies.spatial_induction.pools import StratifiedPools, water_fill
from tinyscope.studies.spatial_induction.rules import numbers_of, wolfram
from tinyscope.studies.spatial_induction.serialize import Layout
from tinyscope.studies.spatial_induction.symmetry import SymmetryGroup
from tinyscope.studies.spatial_induction.task import CellularConfig, CellularTask

VN = Lattice((6, 6), VON_NEUMANN, 2)


@pytest.fixture(autouse=True)
def _fresh_pool_cache(tmp_path, monkeypatch):
    from tinyscope.studies.spatial_induction import pools

    monkeypatch.setenv("TINYSCOPE_CACHE", str(tmp_path / "cache"))
    pools._build.cache_clear()
VN_GROUP = SymmetryGroup(Lattice((3, 3), VON_NEUMANN, 2), "none", "complement")


def test_cover_keeps_each_rule_and_redraws_only_the_initial_state():
    lat = Lattice((16,), ELEMENTARY, 2)
    tables = np.stack([wolfram(r) for r in (110, 30, 90, 184)] * 8)
    traj, ok = cover(lat, tables, 10, 4, np.random.default_rng(0), tries=64)
    assert ok.all() and is_covered(lat, traj, 4).all()
    again = evolve(lat, tables, 10, None, x0=traj[:, 0])  # each row is its own rule's trajectory
    assert np.array_equal(again, traj)


def test_feasibility_is_a_property_of_the_rule_and_excludes_constant_rules():
    rng = np.random.default_rng(1)
    balanced = np.stack([rng.permutation(np.repeat([0, 1], 16)) for _ in range(6)])
    tables = np.concatenate([np.zeros((1, 32), np.int64), np.ones((1, 32), np.int64), balanced])
    ok, witness = feasibility(VN, tables, 6, tries=32)
    assert not ok[:2].any() and ok[2:].all()  # a constant rule's context never shows 32 configurations
    assert context_covered(VN, tables[2:], witness[2:], 6).all()
    ok2, witness2 = feasibility(VN, tables[::-1], 6, tries=32)  # batch order does not matter
    assert np.array_equal(ok2[::-1], ok) and np.array_equal(witness2[::-1][2:], witness[2:])
    x = evolve(VN, tables[2:], 6, None, x0=witness[2:])
    assert np.array_equal(context_covered(VN, tables[2:], witness[2:], 6), is_covered(VN, x, 6))


def test_eca_test_set_weights_rules_uniformly_over_the_feasible_pool():
    """The old filter redrew the rule with x0, weighting each rule by its acceptance rate; now
    every feasible test rule is equally likely (counts within 4 sd of the uniform n / R)."""
    task = CellularTask(CellularConfig(n_val=8, n_test=3000))
    pool = task.eval_pool("test")
    assert set(pool.tolist()) <= set(task.pool("test").tolist()) and len(pool) >= 20
    ev = task.eval_set("test")
    assert is_covered(task.lattice, ev.meta["traj"], task.cfg.T0).all()
    numbers = numbers_of(ev.meta["tables"], 2)
    counts = np.array([(numbers == r).sum() for r in pool])
    expect = len(numbers) / len(pool)
    assert set(numbers.tolist()) == set(pool.tolist())
    assert np.abs(counts - expect).max() < 4 * np.sqrt(expect)


def test_water_fill_caps_large_strata_in_whole_orbits():
    assert water_fill([2, 64, 992, 9920, 71920, 402752, 10**6], 12003, 2) == [2, 64, 992, 2736, 2736, 2736, 2737]
    with pytest.raises(Exception, match="needs more rules"):
        water_fill([1, 2], 3)


def test_stratified_pools_have_the_asked_sizes_disjoint_orbits_and_feasible_held_out_rules():
    sizes = (2001, 200, 200)
    pools = StratifiedPools(VN, VN_GROUP, 6, sizes, seed=0, tries=32)
    got = {s: pools.rules(s) for s in ("train", "val", "test")}
    assert tuple(len(got[s]) for s in ("train", "val", "test")) == sizes
    assert [sum(pools.strata[s]) for s in ("train", "val", "test")] == list(sizes)
    canon = {}
    for s, numbers in got.items():
        tables = pools.draw(np.random.default_rng(0), 400, s)
        assert set(numbers_of(tables, 2).tolist()) <= set(numbers.tolist())
        orbit = numbers_of(VN_GROUP.orbit(tables), 2)  # (G, n): pools are closed under the group
        assert set(orbit.ravel().tolist()) <= set(numbers.tolist())
        canon[s] = set(orbit.min(0).tolist())
    assert not (canon["train"] & canon["val"]) and not (canon["train"] & canon["test"]) and not (canon["val"] & canon["test"])
    assert pools.strata["val"] == pools.strata["test"]  # symmetric held-out strata
    held = pools.draw(np.random.default_rng(1), 300, "test")
    assert feasibility(VN, held, 6, tries=32)[0].all()  # every member of a held-out orbit
    assert pools.strata["train"][0] == 2 and pools.strata["val"][0] == 0  # the two constant rules train only
    w = pools.stratum_weights("train")
    assert w["32-0"] == pytest.approx(2 / 2001)
    again = StratifiedPools(VN, VN_GROUP, 6, sizes, seed=0, tries=32)
    assert np.array_equal(again.rules("test"), got["test"])


def test_stratified_pools_are_deterministic_from_the_seed_not_the_cache(tmp_path, monkeypatch):
    from tinyscope.studies.spatial_induction import pools as mod

    monkeypatch.setenv("TINYSCOPE_CACHE", str(tmp_path))
    mod._build.cache_clear()
    a = StratifiedPools(VN, VN_GROUP, 6, (301, 40, 40), seed=5, tries=16)
    assert list(tmp_path.glob("sih_pools/*.npz"))
    mod._build.cache_clear()
    b = StratifiedPools(VN, VN_GROUP, 6, (301, 40, 40), seed=5, tries=16)  # from the cache file
    monkeypatch.setenv("TINYSCOPE_CACHE", str(tmp_path / "other"))
    mod._build.cache_clear()
    c = StratifiedPools(VN, VN_GROUP, 6, (301, 40, 40), seed=5, tries=16)  # rebuilt
    d = StratifiedPools(VN, VN_GROUP, 6, (301, 40, 40), seed=6, tries=16)
    for s in ("train", "val", "test"):
        assert np.array_equal(a.rules(s), b.rules(s)) and np.array_equal(a.rules(s), c.rules(s))
    assert not np.array_equal(a.rules("test"), d.rules("test"))


def test_authors_token_ids():
    one = Layout(Lattice((4,), ELEMENTARY, 2), 3, "authors")
    assert (one.time_sep, one.vocab_size) == (2, 3)
    traj = np.array([[[0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 1]]], dtype=np.uint8)
    assert one.serialize(traj).tolist() == [[0, 1, 1, 0, 2, 1, 1, 0, 0, 2, 0, 0, 0, 1]]
    assert np.array_equal(one.deserialize(one.serialize(traj)), traj)
    two, ours = Layout(Lattice((3, 3), VON_NEUMANN, 2), 2, "authors"), Layout(Lattice((3, 3), VON_NEUMANN, 2), 2)
    assert (two.time_sep, two.row_sep, two.vocab_size) == (2, 3, 4) and (ours.time_sep, ours.row_sep) == (3, 2)
    grid = np.array([[[[0, 1, 0], [1, 1, 0], [0, 0, 1]], [[1, 0, 0], [0, 0, 0], [1, 1, 1]]]], dtype=np.uint8)
    assert two.serialize(grid).tolist() == [[0, 1, 0, 3, 1, 1, 0, 3, 0, 0, 1, 2, 1, 0, 0, 3, 0, 0, 0, 3, 1, 1, 1]]
    assert np.array_equal(two.deserialize(two.serialize(grid)), grid)
    from tinyscope.runs import registry

    exp = registry.get("sih-eca-dedicated-det")
    with pytest.raises(Exception, match="token_ids=authors"):  # the model must read the 1D stream's 3 ids
        exp.config("smoke", 0, ["task.token_ids=authors"])
    cfg = exp.config("smoke", 0, ["task.token_ids=authors", "model.vocab_size=3"])
    batch = exp.build_task(cfg).sample(np.random.default_rng(0), 4)
    assert batch.tokens.max() == 2 and (batch.targets == 2).any()
    with pytest.raises(Exception, match="token_ids"):
        CellularConfig(token_ids="theirs")
