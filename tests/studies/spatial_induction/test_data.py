"""Evolution, serialization (rho), coverage and the Bayes predictor against slow direct counts."""
import numpy as np
import pytest

from tinyscope.studies.spatial_induction.bayes import posterior_predictive, stream_predictive
from tinyscope.studies.spatial_induction.coverage import is_covered
from tinyscope.studies.spatial_induction.evolve import evolve, parent_codes
from tinyscope.studies.spatial_induction.lattice import VON_NEUMANN, Lattice, elementary, von_neumann
from tinyscope.studies.spatial_induction.rules import dirichlet_tables, random_deterministic, wolfram
from tinyscope.studies.spatial_induction.serialize import Layout


def slow_evolve(lat: Lattice, table, x0, T, uniforms=None):
    """Cell-by-cell loop of Definition 1 (inverse-CDF sampling with the given uniforms)."""
    states = [x0.copy()]
    for t in range(1, T):
        prev, nxt = states[-1], np.empty_like(x0)
        for z in np.ndindex(*lat.shape):
            code = 0
            for d in lat.offsets:
                code = code * lat.V + prev[tuple((a + b) % w for a, b, w in zip(z, d, lat.shape))]
            if uniforms is None:
                nxt[z] = table[code]
            else:
                nxt[z] = int(np.searchsorted(np.cumsum(table[code])[:-1], uniforms[t - 1][z], side="right"))
        states.append(nxt)
    return np.stack(states)


@pytest.mark.parametrize("lat", [elementary(9, 2), elementary(7, 3), von_neumann(4, 5, 2)])
def test_evolve_matches_cell_loop(lat):
    rng = np.random.default_rng(0)
    tables = random_deterministic(rng, 3, lat.V, lat.k)
    traj = evolve(lat, tables, 5, rng)
    for b in range(3):
        assert np.array_equal(traj[b], slow_evolve(lat, tables[b], traj[b, 0], 5))


def test_stochastic_evolve_matches_cell_loop_and_is_reproducible():
    lat = von_neumann(3, 4, 2)
    tables = dirichlet_tables(np.random.default_rng(1), 2, 2, 5)
    a = evolve(lat, tables, 4, np.random.default_rng(7))
    b = evolve(lat, tables, 4, np.random.default_rng(7))
    assert a.tobytes() == b.tobytes()
    g = np.random.default_rng(7)
    x0 = g.integers(0, 2, size=(2, 3, 4), dtype=np.uint8)
    uniforms = [g.random(size=(2, 3, 4)) for _ in range(3)]
    for i in range(2):
        ref = slow_evolve(lat, tables[i], x0[i], 4, [u[i] for u in uniforms])
        assert np.array_equal(a[i], ref)


@pytest.mark.parametrize("shape,T,N", [((16,), 10, 170), ((32,), 12, 396), ((6, 6), 12, 504)])
def test_stream_lengths_of_table_4(shape, T, N):
    offsets = VON_NEUMANN if len(shape) == 2 else ((-1,), (0,), (1,))
    layout = Layout(Lattice(shape, offsets, 2), T)
    assert layout.stream_length == N - 1 and layout.input_length == N - 2


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_rho_round_trip_and_serialization(shape):
    offsets = tuple(tuple(1 if i == j else 0 for i in range(len(shape))) for j in range(len(shape))) + ((0,) * len(shape),)
    lat = Lattice(shape, offsets, 3)
    layout = Layout(lat, 3)
    traj = np.random.default_rng(0).integers(0, 3, (2, 3, *shape)).astype(np.uint8)
    stream = layout.serialize(traj)
    # direct emission: row-major, ROW_SEP after each row, TIME_SEP after the last, final one dropped
    W = shape[-1]
    expect = []
    for t in range(3):
        rows = traj[0, t].reshape(-1, W)
        for r, row in enumerate(rows):
            expect += list(row) + [layout.time_sep if r == len(rows) - 1 else layout.row_sep]
    assert stream[0].tolist() == expect[:-1]
    assert np.array_equal(layout.deserialize(stream), traj)
    seen = set()
    for t in range(3):
        for z in np.ndindex(*shape):
            n = int(layout.rho(t, z))
            assert stream[0, n] == traj[0, t][z]
            tt, zz, is_cell = layout.unrho(n)
            assert is_cell and tt == t and tuple(zz) == z
            seen.add(n)
    assert len(seen) == 3 * lat.volume
    # separators: the virtual address is (successor's step, successor's z - u_d)
    for n in range(layout.stream_length):
        if n not in seen:
            tt, zz, is_cell = layout.unrho(n)
            assert not is_cell and zz[-1] == -1
            succ = tuple(zz[:-1]) + (0,)
            assert int(layout.rho(tt, succ)) == n + 1


def test_eval_mask_scores_cells_from_T0():
    layout = Layout(elementary(4), 4)
    mask = layout.eval_mask(2)
    targets = np.arange(layout.stream_length)[1:]
    expect = [(n // 5 >= 2) and (n % 5 < 4) for n in targets]
    assert mask.tolist() == expect


def slow_bayes(lat, traj, alpha):
    """Direct Python count of Theorem 3 at every cell, in stream order."""
    B, T = traj.shape[:2]
    codes = parent_codes(lat, traj)
    probs = np.full((*traj.shape, lat.V), 1.0 / lat.V)
    ncs = np.zeros(traj.shape, int)
    cells = [(t, z) for t in range(T) for z in np.ndindex(*lat.shape)]
    for b in range(B):
        for i, (t, z) in enumerate(cells):
            if t == 0:
                continue
            c = codes[b, t][z]
            earlier = [(tt, zz) for tt, zz in cells[:i] if tt >= 1 and codes[b, tt][zz] == c]
            n_cy = np.array([sum(traj[b, tt][zz] == y for tt, zz in earlier) for y in range(lat.V)])
            ncs[b, t][z] = len(earlier)
            probs[b, t][z] = (n_cy + alpha) / (len(earlier) + lat.V * alpha)
    return probs, ncs


@pytest.mark.parametrize("lat", [elementary(6, 3), von_neumann(3, 3, 2)])
def test_bayes_equals_direct_count(lat):
    rng = np.random.default_rng(5)
    traj = evolve(lat, dirichlet_tables(rng, 3, lat.V, lat.k, 0.5), 5, rng)
    pred = posterior_predictive(lat, traj, alpha=0.7)
    probs, ncs = slow_bayes(lat, traj, 0.7)
    assert np.allclose(pred.probs, probs)
    assert np.array_equal(pred.n_c, ncs)
    assert np.array_equal(pred.resolvable[:, 1:], ncs[:, 1:] > 0) and not pred.resolvable[:, 0].any()


def test_bayes_is_exact_on_covered_deterministic_rule():
    lat = elementary(16)
    rng = np.random.default_rng(0)
    x = evolve(lat, np.stack([wolfram(110)] * 64), 10, rng)
    x = x[is_covered(lat, x, 4)]
    assert len(x) > 5
    layout = Layout(lat, 10)
    probs, resolvable = stream_predictive(layout, x, alpha=0.0)
    stream = layout.serialize(x)
    mask = layout.eval_mask(4)
    assert resolvable[:, mask].all()
    assert np.array_equal(probs[:, mask].argmax(-1), stream[:, 1:][:, mask])
    assert np.allclose(probs[:, mask].max(-1), 1.0)


def test_coverage_filter_contexts_contain_every_configuration():
    from tinyscope.studies.spatial_induction.task import CellularConfig, CellularTask

    for cfg in (CellularConfig(), CellularConfig(neighbourhood="von_neumann", grid=[6, 6], T=9, T0=8,
                                                 symmetry_spatial="none", holdout=[])):
        task = CellularTask(cfg)
        ev = task.eval_set("val")
        traj = ev.meta["traj"]
        lat = task.lattice
        for b in range(0, len(traj), 37):
            codes = parent_codes(lat, traj[b:b + 1, :cfg.T0])[0, 1:]
            assert set(codes.ravel().tolist()) == set(range(lat.n_configs))
        assert np.array_equal(task.eval_set("val").tokens, CellularTask(cfg).eval_set("val").tokens)
