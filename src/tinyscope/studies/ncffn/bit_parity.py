"""N-bit parity for pure feed-forward stacks (NC-FFN paper, the parity probe).

An input is N bits ``b in {0, 1}^N``, fed to a model as ``x = 1 - 2b in {+1, -1}^N``; the label
is the parity ``y = b_1 xor ... xor b_N`` (1 when the number of ones is odd). The probe asks for
the smallest model that classifies *all* 2^N inputs correctly, so the data is the full
enumeration (:func:`all_bits`); :func:`sample_bits` draws random inputs for larger N.
"""
from __future__ import annotations

import numpy as np

from tinyscope.errors import check


def all_bits(n_bits: int) -> np.ndarray:
    """Every N-bit input, row i holding the binary digits of i (most significant first): (2^N, N) int64."""
    check(1 <= n_bits <= 24, f"n_bits={n_bits} must lie in [1, 24] to enumerate 2^n_bits inputs")
    codes = np.arange(2 ** n_bits, dtype=np.int64)
    shifts = np.arange(n_bits - 1, -1, -1, dtype=np.int64)
    return (codes[:, None] >> shifts) & 1  # (2^N, N)


def sample_bits(rng: np.random.Generator, batch_size: int, n_bits: int) -> np.ndarray:
    """``batch_size`` uniform random N-bit inputs: (B, N) int64."""
    return rng.integers(0, 2, size=(batch_size, n_bits), dtype=np.int64)


def parity(bits: np.ndarray) -> np.ndarray:
    """XOR of each row: (B, N) -> (B,) int64."""
    return np.bitwise_xor.reduce(bits.astype(np.int64), axis=-1)


def signed(bits: np.ndarray) -> np.ndarray:
    """The model's input encoding ``1 - 2b``: 0 -> +1, 1 -> -1 (float32), so parity = sign of the product."""
    return (1 - 2 * bits).astype(np.float32)
