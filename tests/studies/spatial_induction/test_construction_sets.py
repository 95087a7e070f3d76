import numpy as np

from tinyscope.studies.spatial_induction.construction_sets import query_sets, random_subsets
from tinyscope.studies.spatial_induction.evolve import evolve, parent_codes
from tinyscope.studies.spatial_induction.lattice import elementary, von_neumann
from tinyscope.studies.spatial_induction.rules import wolfram
from tinyscope.studies.spatial_induction.serialize import Layout


def slow_sets(layout, traj, T0):
    """Routing and matching sets by direct enumeration of cells."""
    lat = layout.lattice
    N = layout.input_length
    codes = parent_codes(lat, traj)
    cells = [(t, tuple(z)) for t in range(layout.T) for z in np.ndindex(*lat.shape)]
    out = []
    for b in range(len(traj)):
        for n in range(N):
            t, z, is_cell = layout.unrho(n + 1)
            if not is_cell or t < T0:
                continue
            z = tuple(int(a) for a in z)
            # the query token's own cell is z - u_d; U covers its neighbourhood and the target's
            kappa = z[:-1] + (z[-1] - 1,)
            routing = set()
            for base in (kappa, z):
                for d in lat.offsets:
                    c = tuple((a + o) % w for a, o, w in zip(base, d, lat.shape))
                    routing.add(int(layout.rho(t - 1, c)))
            matching = set()
            for (tp, zp) in cells:
                m = int(layout.rho(tp, zp))
                if tp >= 1 and m <= n and codes[(b, tp) + zp] == codes[(b, t) + z]:
                    matching.add(m)
            out.append((b, n, routing, matching, int(traj[(b, t) + z])))
    return out


def check(layout, traj, T0):
    sets = query_sets(layout, traj, T0)
    slow = slow_sets(layout, traj, T0)
    assert len(sets) == len(slow)
    for i, (b, n, routing, matching, target) in enumerate(slow):
        assert (sets.batch[i], sets.pos[i], sets.target[i]) == (b, n, target)
        assert set(np.flatnonzero(sets.routing[i])) == routing
        assert set(np.flatnonzero(sets.matching[i])) == matching
        assert not (sets.matching_pool[i] & sets.matching[i]).any()
        assert not (sets.routing_pool[i] & sets.routing[i]).any()


def test_eca_sets_match_direct_enumeration():
    lat = elementary(6)
    traj = evolve(lat, np.stack([wolfram(110), wolfram(30)]), 5, np.random.default_rng(0))
    check(Layout(lat, 5), traj, 2)


def test_von_neumann_sets_match_direct_enumeration():
    lat = von_neumann(3, 4)
    rng = np.random.default_rng(1)
    tables = rng.integers(0, 2, size=(1, lat.n_configs))
    traj = evolve(lat, tables, 3, rng)
    check(Layout(lat, 3), traj, 2)


def test_random_subsets_draw_from_the_pool_and_flag_small_pools():
    pool = np.zeros((3, 10), dtype=bool)
    pool[0, :6] = True
    pool[1, 2:4] = True
    pool[2, :] = True
    mask, ok = random_subsets(pool, np.array([3, 3, 0]), np.random.default_rng(0))
    assert ok.tolist() == [True, False, True]
    assert mask.sum(1).tolist() == [3, 0, 0]
    assert not (mask & ~pool).any()


def test_partial_agreement_counts_equal_parent_cells_directly():
    """`agreement` is k exactly on the matching precedents, -1 off the completed cells, and
    elsewhere the number of parent cells equal to the target's, counted digit by digit."""
    lat = elementary(6)
    traj = evolve(lat, np.stack([wolfram(110), wolfram(30)]), 5, np.random.default_rng(0))
    layout = Layout(lat, 5)
    sets = query_sets(layout, traj, 2)
    completed = sets.matching | sets.matching_pool
    assert ((sets.agreement == lat.k) == sets.matching).all()
    assert ((sets.agreement < 0) == ~completed).all()
    codes = parent_codes(lat, traj)
    for i in range(0, len(sets), 7):
        t, z, _ = layout.unrho(int(sets.pos[i]) + 1)
        target = np.unravel_index(int(codes[(int(sets.batch[i]), t) + tuple(int(a) for a in z)]), (2,) * lat.k)
        for m in np.flatnonzero(completed[i]):
            tp, zp, _ = layout.unrho(int(m))  # the cell at position m
            key = np.unravel_index(int(codes[(int(sets.batch[i]), tp) + tuple(int(a) for a in zp)]), (2,) * lat.k)
            assert sets.agreement[i, m] == sum(a == b for a, b in zip(key, target))
