"""Cellular-automaton in-context learning (the spatial-induction-heads paper, Sec. 3, App. C, D, I).

Data API (numpy only)::

    lat = Lattice((16,), ELEMENTARY, V=2)                   # torus, neighbourhood, states
    traj = evolve(lat, tables, T, rng)                       # (B, T, *shape) uint8
    layout = Layout(lat, T); stream = layout.serialize(traj) # (B, N-1) tokens, rho / unrho
    pred = posterior_predictive(lat, traj, alpha=1.0)        # Theorem 3 at every cell
"""
from .bayes import Predictive, kgram_counts, posterior_predictive, stream_predictive, true_predictive
from .coverage import context_coverage, is_covered, rejection_sample
from .evolve import evolve, parent_codes, random_initial, step
from .lattice import ELEMENTARY, MOORE, NEIGHBOURHOODS, VON_NEUMANN, Lattice, elementary, moore, von_neumann
from .rules import (as_stochastic, dirichlet_tables, game_of_life, number_of, numbers_of, random_deterministic,
                    stavskaya, table_from_number, wolfram)
from .serialize import Layout
from .splits import EnumeratedSplits, HashedSplits
from .symmetry import SymmetryGroup, eca_canonical, eca_classes, eca_group, wolfram_class
from .task import CellularConfig, CellularTask

__all__ = [n for n in dir() if not n.startswith("_")]
