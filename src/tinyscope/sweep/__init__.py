"""Sweeps: grids × seeds of any experiment, on local processes or a Ray cluster, resumable,
with a SQLite run index. See docs/sweeps.md."""
from tinyscope.sweep.core import SweepResult, run_specs, run_sweep, threads_per_job
from tinyscope.sweep.grid import RunSpec, SweepSpec, parse_grid
from tinyscope.sweep.index import RunIndex

__all__ = ["RunIndex", "RunSpec", "SweepResult", "SweepSpec", "parse_grid", "run_specs", "run_sweep", "threads_per_job"]
