import collections

import numpy as np
import pytest

from tinyscope.studies.spatial_induction.evolve import evolve
from tinyscope.studies.spatial_induction.lattice import ELEMENTARY, Lattice, elementary, moore
from tinyscope.studies.spatial_induction.rules import game_of_life, number_of, stavskaya, table_from_number, wolfram
from tinyscope.studies.spatial_induction.symmetry import SymmetryGroup, eca_canonical, eca_classes, wolfram_class


def one_step(rule: int, row: str) -> str:
    x0 = np.array([[int(c) for c in row]], dtype=np.uint8)
    traj = evolve(elementary(len(row)), wolfram(rule), 2, np.random.default_rng(0), x0=x0)
    return "".join(map(str, traj[0, 1]))


def hand_step(rule: int, row: str) -> str:
    """Wolfram's definition written out: bit 4l+2c+r of the rule number, on a ring."""
    n = len(row)
    x = [int(c) for c in row]
    return "".join(str((rule >> (4 * x[i - 1] + 2 * x[i] + x[(i + 1) % n])) & 1) for i in range(n))


def test_rule_110_and_30_rows():
    assert one_step(110, "0001000") == "0011000"
    assert one_step(30, "0001000") == "0011100"
    assert one_step(110, "1000001") == "1000011"
    assert one_step(30, "11010011") == "00011110"
    rng = np.random.default_rng(3)
    for rule in (30, 90, 110, 184):
        row = "".join(map(str, rng.integers(0, 2, 13)))
        assert one_step(rule, row) == hand_step(rule, row)


def test_rule_numbers_round_trip():
    for n in (0, 1, 30, 110, 255):
        assert number_of(wolfram(n)) == n
    assert number_of(table_from_number(12345, 3, 3), 3) == 12345


def test_eca_classes_and_wolfram_counts():
    classes = eca_classes()
    assert len(classes) == 88
    assert collections.Counter(len(v) for v in classes.values()) == {1: 8, 2: 36, 4: 44}
    assert collections.Counter(wolfram_class(c) for c in classes) == {1: 8, 2: 65, 3: 11, 4: 4}
    assert classes[eca_canonical(193)] == [110, 124, 137, 193]
    assert classes[eca_canonical(149)] == [30, 86, 135, 149]
    assert classes[90] == [90, 165]


def test_eca_group_matches_bit_formulas():
    D = {0: 0, 1: 4, 2: 2, 3: 6, 4: 1, 5: 5, 6: 3, 7: 7}
    group = SymmetryGroup(Lattice((3,), ELEMENTARY, 2), "reflection", "complement")
    rng = np.random.default_rng(0)
    for n in rng.integers(0, 256, 20):
        f = wolfram(int(n))
        reflected = np.array([f[D[i]] for i in range(8)])
        complemented = np.array([1 - f[7 - i] for i in range(8)])
        images = {tuple(t) for t in group.orbit(f)}
        assert tuple(reflected) in images and tuple(complemented) in images and tuple(f) in images
        assert len(images) <= 4


def test_group_image_is_the_conjugated_dynamics():
    """Evolving the transformed rule equals transforming the evolved trajectory (2D, D4 x S_2)."""
    from tinyscope.studies.spatial_induction.lattice import VON_NEUMANN
    lat = Lattice((5, 5), VON_NEUMANN, 2)
    group = SymmetryGroup(Lattice((3, 3), VON_NEUMANN, 2), "d4", "complement")
    assert len(group) == 16
    rng = np.random.default_rng(1)
    f = rng.integers(0, 2, 32)
    x0 = rng.integers(0, 2, (1, 5, 5)).astype(np.uint8)
    base = evolve(lat, f, 3, rng, x0=x0)[0]
    from tinyscope.studies.spatial_induction.symmetry import _spatial_maps
    mats = _spatial_maps("d4", 2)
    for index, (src, pi, _) in enumerate(group.elements):
        M = mats[index // 2]

        def transform(x, M=M, pi=pi):
            out = np.empty_like(x)
            for i in range(5):
                for j in range(5):
                    a, b = M @ np.array([i, j])
                    out[a % 5, b % 5] = pi[x[i, j]]
            return out

        moved = evolve(lat, pi[f[src]], 3, rng, x0=transform(x0[0])[None])[0]
        for t in range(3):
            assert np.array_equal(moved[t], transform(base[t]))


def test_stavskaya_and_life():
    p = stavskaya(0.29)
    assert p.shape == (8, 2) and np.allclose(p.sum(-1), 1)
    assert np.isclose(p[0b110, 1], 1.0) and np.isclose(p[0b011, 1], 0.29) and np.isclose(p[0b111, 1], 1.0)
    blinker = np.zeros((1, 5, 5), np.uint8)
    blinker[0, 2, 1:4] = 1
    traj = evolve(moore(5, 5), game_of_life(), 3, np.random.default_rng(0), x0=blinker)
    assert traj[0, 1, 1:4, 2].all() and traj[0, 1].sum() == 3
    assert np.array_equal(traj[0, 2], blinker[0])


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        wolfram(256)
    with pytest.raises(ValueError):
        Lattice((4,), ((0,), (4,)), 2)  # offsets equal modulo the torus
