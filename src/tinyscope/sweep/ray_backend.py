"""The Ray backend: the same jobs as Ray tasks, on a running cluster (``--address``) or on a
local Ray instance started for the sweep.

Each task asks for as many CPUs as its thread limit and sets that limit itself; Ray reuses
its worker processes between tasks, so torch and the experiments are imported once per
worker, not once per run. The run directories must be
on a filesystem that the workers and the driver share (any path works on a single machine).
At most ``n_jobs`` tasks are in flight, so the progress display tells what is running.
"""
from __future__ import annotations

from typing import Any, Callable

from tinyscope.errors import TinyscopeError

Job = dict[str, Any]


def _ray():
    try:
        import ray
    except ImportError:
        raise TinyscopeError("--backend ray needs Ray: pip install 'tinyscope[ray]' (or pip install 'ray[default]')") from None
    return ray


def _execute(job: Job) -> dict:
    from tinyscope.sweep.worker import execute

    return execute(job)


def run_ray(jobs: list[Job], n_jobs: int, on_start: Callable[[Job], None], on_finish: Callable[[Job, dict], None],
            address: str | None = None, threads: int = 1, poll_s: float = 1.0) -> None:
    ray = _ray()
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=n_jobs * threads, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
    task = ray.remote(num_cpus=threads)(_execute)
    pending = list(jobs)
    in_flight: dict[Any, Job] = {}
    try:
        while pending or in_flight:
            while pending and len(in_flight) < n_jobs:
                job = pending.pop(0)
                in_flight[task.remote(job)] = job
                on_start(job)
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=poll_s)
            for ref in done:
                job = in_flight.pop(ref)
                try:
                    row = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - the worker died (e.g. out of memory)
                    row = {"status": "failed", "error": f"the Ray task failed: {type(exc).__name__}: {exc}"}
                on_finish(job, row)
    finally:
        for ref in in_flight:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()
