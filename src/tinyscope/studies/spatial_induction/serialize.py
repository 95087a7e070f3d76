"""Row-terminated serialization and the layout map rho (Sec. 3.2, App. C.1, App. I.1).

Tokens: cell states are 0..V-1, ``ROW_SEP = V``, ``TIME_SEP = V + 1`` (vocabulary V + 2, also in
1D where ROW_SEP never occurs). ``token_ids="authors"`` uses the public code's ids instead, so
streams and embeddings can be exchanged with it: in 1D one separator, TIME_SEP = V (vocabulary
V + 1); in 2D TIME_SEP = V and ROW_SEP = V + 1 (vocabulary V + 2). One step is emitted in row-major order (last axis fastest) with a
ROW_SEP after each innermost row except the last, which gets a TIME_SEP; the final TIME_SEP of
the stream is omitted (App. I.1), so the stream has N - 1 tokens, N = T (|G| + |G|/W_d).

rho(t, z) = t (|G| + |G|/W_d) + rho_G(z) + r(z)     (Eq. 2)

The model reads ``stream[:-1]`` and predicts ``stream[1:]``: input position n predicts stream
token n + 1, so a cell target (t, z) is predicted at input position rho(t, z) - 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyscope.errors import check
from tinyscope.studies.spatial_induction.lattice import Lattice

TOKEN_IDS = ("tinyscope", "authors")


@dataclass(frozen=True)
class Layout:
    """Stream layout of a trajectory of ``T`` steps on ``lattice`` with separator ids ``token_ids``."""

    lattice: Lattice
    T: int
    token_ids: str = "tinyscope"

    def __post_init__(self):
        check(self.token_ids in TOKEN_IDS, f"token_ids={self.token_ids!r} must be one of {', '.join(TOKEN_IDS)}")

    @property
    def V(self) -> int:
        return self.lattice.V

    @property
    def authors(self) -> bool:
        return self.token_ids == "authors"

    @property
    def row_sep(self) -> int:
        return self.lattice.V + 1 if self.authors else self.lattice.V

    @property
    def time_sep(self) -> int:
        return self.lattice.V if self.authors else self.lattice.V + 1

    @property
    def vocab_size(self) -> int:
        """V + 2; V + 1 for the authors' 1D streams, which have no ROW_SEP."""
        return self.lattice.V + (1 if self.authors and self.lattice.dim == 1 else 2)

    @property
    def step_tokens(self) -> int:
        """|G| + |G| / W_d tokens per time step."""
        return self.lattice.volume + self.lattice.n_rows

    @property
    def stream_length(self) -> int:
        """N - 1: the stream without its final TIME_SEP."""
        return self.T * self.step_tokens - 1

    @property
    def input_length(self) -> int:
        """Model context: stream_length - 1 positions (input = stream[:-1])."""
        return self.stream_length - 1

    # -------------------------------------------------------------- rho and its inverse
    def rho(self, t: np.ndarray | int, z: np.ndarray | tuple) -> np.ndarray:
        """Stream position of cell (t, z); ``z`` has the spatial coordinates on its last axis."""
        z = np.asarray(z, dtype=np.int64)
        shape = np.asarray(self.lattice.shape)
        strides = np.concatenate([np.cumprod(shape[::-1])[::-1][1:], [1]])
        flat = (z * strides).sum(-1)  # rho_G(z)
        row = flat // self.lattice.row_length  # r(z)
        return np.asarray(t, dtype=np.int64) * self.step_tokens + flat + row

    def cell_positions(self) -> np.ndarray:
        """rho of every cell as an array (T, *shape)."""
        grid = np.indices((self.T, *self.lattice.shape))  # (1 + d, T, *shape)
        return self.rho(grid[0], np.moveaxis(grid[1:], 0, -1))

    def unrho(self, n: np.ndarray | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inverse of rho: (t, z, is_cell) for stream positions ``n``; z (..., d), and where
        ``is_cell`` is False (a separator) t and z are the virtual address (tau, kappa) of
        App. C.1: the successor cell's step and its z - u_d, with last coordinate -1 (not wrapped)."""
        n = np.asarray(n, dtype=np.int64)
        W = self.lattice.row_length
        t, within = np.divmod(n, self.step_tokens)
        row, col = np.divmod(within, W + 1)
        is_cell = col < W
        # a separator at (row, W) is followed by cell (row + 1, 0): virtual col -1 of row + 1
        sep_next_row = row + 1
        sep_t = t + (sep_next_row == self.lattice.n_rows)
        sep_row = sep_next_row % self.lattice.n_rows
        t_out = np.where(is_cell, t, sep_t)
        row_out = np.where(is_cell, row, sep_row)
        col_out = np.where(is_cell, col, -1)
        lead = np.stack(np.unravel_index(row_out, self.lattice.shape[:-1]), -1) if self.lattice.dim > 1 \
            else np.zeros((*n.shape, 0), dtype=np.int64)
        z = np.concatenate([lead, col_out[..., None]], axis=-1)
        return t_out, z, is_cell

    # -------------------------------------------------------------- streams
    def serialize(self, traj: np.ndarray) -> np.ndarray:
        """Token streams (B, N - 1) int64 of trajectories (B, T, *shape)."""
        B = traj.shape[0]
        check(traj.shape[1:] == (self.T, *self.lattice.shape),
              f"trajectories of shape {traj.shape[1:]} do not match T={self.T}, grid {self.lattice.shape}")
        R, W = self.lattice.n_rows, self.lattice.row_length
        grid = np.empty((B, self.T, R, W + 1), dtype=np.int64)
        grid[..., :W] = traj.reshape(B, self.T, R, W)
        grid[..., W] = self.row_sep
        grid[:, :, R - 1, W] = self.time_sep
        return grid.reshape(B, -1)[:, :-1]

    def deserialize(self, stream: np.ndarray) -> np.ndarray:
        """Trajectories (B, T, *shape) from streams (B, N - 1) (inverse of :meth:`serialize`)."""
        stream = np.asarray(stream)
        check(stream.shape[-1] == self.stream_length,
              f"streams of length {stream.shape[-1]} do not match the layout's {self.stream_length}")
        pos = self.cell_positions()  # (T, *shape)
        return stream[:, pos].astype(np.uint8)

    def is_cell_position(self) -> np.ndarray:
        """(N - 1,) bool: stream positions holding a cell token."""
        out = np.zeros(self.stream_length, dtype=bool)
        out[self.cell_positions().ravel()] = True
        return out

    def target_steps(self) -> np.ndarray:
        """(N - 2,) int: for input position n, the time step of the cell it predicts, -1 for separators."""
        steps = np.full(self.stream_length, -1, dtype=np.int64)
        pos = self.cell_positions()
        steps[pos] = np.arange(self.T).reshape(-1, *(1,) * self.lattice.dim)
        return steps[1:]

    def eval_mask(self, T0: int) -> np.ndarray:
        """(N - 2,) bool: input positions whose target is a cell at t >= T0 (App. I.3)."""
        return self.target_steps() >= T0

    def to_stream(self, cell_values: np.ndarray, fill=0) -> np.ndarray:
        """Place per-cell arrays (B, T, *shape, ...) at the input position predicting each cell:
        (B, N - 2, ...), ``fill`` at positions that predict a separator (or cell (0, 0))."""
        B = cell_values.shape[0]
        extra = cell_values.shape[2 + self.lattice.dim:]
        out = np.full((B, self.input_length, *extra), fill, dtype=cell_values.dtype)
        pos = self.cell_positions().ravel() - 1  # (T |G|,)
        flat = cell_values.reshape(B, -1, *extra)
        keep = pos >= 0
        out[:, pos[keep]] = flat[:, keep]
        return out
