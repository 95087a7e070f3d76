"""Tori, neighbourhoods and the base-V code of a neighbourhood configuration (Sec. 3.1).

A torus G = [W_1] x ... x [W_d] is given by its ``shape``. A neighbourhood is an ordered list of
k offsets delta_1..delta_k in Z^d; the parent configuration of cell (t, z) is
P_{t,z} = (x_{t-1, z+delta_1}, ..., x_{t-1, z+delta_k}) and its code is the base-V number with
delta_1 the most significant digit, so the elementary code is ``i = 4 l + 2 c + r`` (Wolfram).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyscope.errors import check

ELEMENTARY: tuple[tuple[int, ...], ...] = ((-1,), (0,), (1,))
#: von Neumann offsets in the order north, west, centre, east, south (REFERENCE.md).
VON_NEUMANN: tuple[tuple[int, ...], ...] = ((-1, 0), (0, -1), (0, 0), (0, 1), (1, 0))
#: Moore offsets in row-major order of (a, b), a, b in {-1, 0, 1}.
MOORE: tuple[tuple[int, ...], ...] = tuple((a, b) for a in (-1, 0, 1) for b in (-1, 0, 1))

NEIGHBOURHOODS = {"elementary": ELEMENTARY, "von_neumann": VON_NEUMANN, "moore": MOORE}


@dataclass(frozen=True)
class Lattice:
    """A torus ``shape`` with ``V`` states and an ordered neighbourhood ``offsets``.

    ``n_configs`` = V^k; ``volume`` = |G|; the successor offset u_d is the last unit vector.
    """

    shape: tuple[int, ...]
    offsets: tuple[tuple[int, ...], ...] = ELEMENTARY
    V: int = 2

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(w) for w in self.shape))
        object.__setattr__(self, "offsets", tuple(tuple(int(a) for a in o) for o in self.offsets))
        check(len(self.shape) >= 1, "lattice shape must have at least one axis")
        check(all(w >= 2 for w in self.shape), f"lattice shape {self.shape}: every side must be >= 2")
        check(self.V >= 2, f"V={self.V} states: need at least 2")
        check(len(self.offsets) >= 1, "a neighbourhood needs at least one offset")
        check(all(len(o) == self.dim for o in self.offsets),
              f"offsets {self.offsets} must each have {self.dim} coordinates for shape {self.shape}")
        wrapped = {tuple(a % w for a, w in zip(o, self.shape)) for o in self.offsets}
        check(len(wrapped) == self.k, f"offsets {self.offsets} are not distinct modulo {self.shape}")

    @property
    def dim(self) -> int:
        return len(self.shape)

    @property
    def k(self) -> int:
        return len(self.offsets)

    @property
    def n_configs(self) -> int:
        return self.V ** self.k

    @property
    def volume(self) -> int:
        return int(np.prod(self.shape))

    @property
    def row_length(self) -> int:
        """W_d, the length of an innermost row."""
        return self.shape[-1]

    @property
    def n_rows(self) -> int:
        """|G| / W_d rows per time step."""
        return self.volume // self.row_length

    def config_codes(self, x: np.ndarray) -> np.ndarray:
        """Codes of the parent configurations read from states ``x`` of shape (..., *shape).

        ``out[..., z]`` = sum_j V^(k-1-j) x[..., z + delta_j] (indices modulo the torus).
        """
        axes = tuple(range(x.ndim - self.dim, x.ndim))
        code = np.zeros(x.shape, dtype=np.int64)
        for delta in self.offsets:
            shifted = np.roll(x, shift=tuple(-a for a in delta), axis=axes)  # shifted[z] = x[z + delta]
            code *= self.V
            code += shifted
        return code

    def decode(self, code: np.ndarray | int) -> np.ndarray:
        """Digits (..., k) of configuration codes, delta_1 first."""
        code = np.asarray(code, dtype=np.int64)
        powers = self.V ** np.arange(self.k - 1, -1, -1)
        return (code[..., None] // powers) % self.V

    def routing_set(self) -> list[tuple[int, ...]]:
        """U = D_K u (D_K + u_d) (Definition 2), each offset reduced to (-W/2, W/2]."""
        succ = (0,) * (self.dim - 1) + (1,)
        out = []
        for o in list(self.offsets) + [tuple(a + b for a, b in zip(o, succ)) for o in self.offsets]:
            red = tuple(((a + w // 2 - 1) % w) - (w // 2 - 1) for a, w in zip(o, self.shape))
            if red not in out:
                out.append(red)
        return out


def elementary(width: int, V: int = 2) -> Lattice:
    return Lattice((width,), ELEMENTARY, V)


def von_neumann(height: int, width: int, V: int = 2) -> Lattice:
    return Lattice((height, width), VON_NEUMANN, V)


def moore(height: int, width: int, V: int = 2) -> Lattice:
    return Lattice((height, width), MOORE, V)
