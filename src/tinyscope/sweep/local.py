"""The local backend: at most N runs at once, each in its own process.

Processes come from a fork server that has already imported torch and every experiment
(``multiprocessing`` "forkserver" with a preload), so a run starts in milliseconds, yet no
process inherits the sweep's threads or state. Each child holds the read end of a pipe whose
write end only the sweep holds: if the sweep is killed, even with SIGKILL, the pipe closes
and the child exits, so a rerun never races a leftover process. On a machine with GPUs the runs
are spawned instead (a fresh interpreter each): CUDA cannot start in a forked child of a process
where anything touched it, and importing torch's GPU-side modules may. With several GPUs, each
run sees one (CUDA_VISIBLE_DEVICES), the least busy at its start.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from collections import deque
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable

Job = dict[str, Any]


def child_main(job: Job, ctl) -> None:
    """Target of a run's process. Defined here, importing the heavy worker module only in the
    child (where the fork server has preloaded it), so the sweep itself never imports it."""
    from tinyscope.sweep.worker import run_child

    run_child(job, ctl)


def context(cuda: bool = False) -> mp.context.BaseContext:
    """The start method of the runs' processes: a preloaded fork server, or ``spawn`` when the
    runs use CUDA (``cuda``) or the platform has no fork server."""
    if not cuda and "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["tinyscope.sweep.worker"])
        return ctx
    return mp.get_context("spawn")


def visible_gpus() -> list[str]:
    """CUDA device ids the runs may use (respecting CUDA_VISIBLE_DEVICES); [] without CUDA."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return (listed or [str(i) for i in range(n)])[:n]


def prestart() -> None:
    """Start the fork server now, so that it imports torch and the experiments while this
    process does its own imports and validation (they overlap on two or more cores)."""
    ctx = context(cuda=bool(visible_gpus()))
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def run_local(jobs: list[Job], n_jobs: int, on_start: Callable[[Job], None],
              on_finish: Callable[[Job, dict], None], poll_s: float = 0.5) -> None:
    """Run ``jobs`` with at most ``n_jobs`` processes; ``on_finish(job, row)`` gets each index row.

    On an exception (KeyboardInterrupt included) the running processes are stopped before it
    propagates; their runs resume from their last checkpoint next time."""
    from tinyscope.sweep.index import run_dir_row

    gpus = visible_gpus()
    ctx = context(cuda=bool(gpus))
    pending: deque[Job] = deque(jobs)
    running: dict[int, tuple[Any, Job, Any]] = {}
    try:
        while pending or running:
            while pending and len(running) < n_jobs:
                job = pending.popleft()
                if gpus:  # spread concurrent runs over the GPUs: the least used one
                    used = [j.get("gpu") for _, j, _ in running.values()]
                    job = {**job, "gpu": min(gpus, key=used.count)}
                (Path(job["run_dir"]) / "error.txt").unlink(missing_ok=True)
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=child_main, args=(job, reader), daemon=True,
                                   name=f"tinyscope-run-{job['spec']['setting']}-s{job['spec']['seed']}")
                proc.start()
                reader.close()
                running[proc.sentinel] = (proc, job, writer)
                on_start(job)
            for sentinel in wait(list(running), timeout=poll_s):
                proc, job, writer = running.pop(sentinel)
                proc.join()
                writer.close()
                on_finish(job, run_dir_row(Path(job["run_dir"]), proc.exitcode))
    finally:
        for proc, _, _writer in running.values():
            proc.terminate()
        for proc, _, writer in running.values():
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
            writer.close()
