"""Run a sweep: expand the grid, skip complete runs, resume interrupted ones, keep the index.

Layout of a sweep folder::

    sweep.json          the latest invocation (experiment, preset, seeds, grid, --set values)
    index.sqlite        the run index (see :mod:`tinyscope.sweep.index`)
    runs/<setting>/s<seed>/   one run directory each (config.json, metrics.jsonl, results.json,
                        checkpoints/, sweep_job.json, and error.txt when it failed)
    report/             written by `tinyscope report DIR`

Rerunning the same command is how a sweep is resumed: runs with results.json are skipped,
others restart from their last resume checkpoint (``run_experiment(..., resume=True)``),
and runs that failed are tried again.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tqdm.auto import tqdm

from tinyscope.errors import ConfigError, TinyscopeError
from tinyscope.sweep.grid import RunSpec, SweepSpec
from tinyscope.sweep.index import RunIndex, first_line
from tinyscope.train.checkpoint import atomic_write_json

log = logging.getLogger(__name__)
BACKENDS = ("local", "ray")
RUN_REPORTS = ("auto", "full", "quick", "none")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def threads_per_job(n_jobs: int, cores: int | None = None) -> int:
    """Threads for each of ``n_jobs`` concurrent runs so that together they use the cores once."""
    return max(1, (cores or available_cores()) // max(1, n_jobs))


def default_threads(n_jobs: int) -> int:
    """:func:`threads_per_job`, capped by ``OMP_NUM_THREADS`` when the environment sets it (on a
    shared machine the cores are not all ours, and busy-waiting thread pools then crawl)."""
    n = threads_per_job(n_jobs)
    cap = os.environ.get("OMP_NUM_THREADS", "")
    return min(n, int(cap)) if cap.isdigit() and int(cap) > 0 else n


@contextlib.contextmanager
def sweep_lock(folder: Path) -> Iterator[None]:
    """Refuse a second sweep writing into the same folder at the same time."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(folder / ".sweep.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TinyscopeError(f"another sweep is writing into {folder}; wait for it or choose another --out") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass
class SweepResult:
    total: int
    skipped: int = 0                                   # complete before this invocation
    done: int = 0                                      # completed by this invocation
    failed: list[tuple[str, str]] = field(default_factory=list)   # (run path, error's last line)
    wall_time: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


def run_sweep(spec: SweepSpec, out: str | Path, jobs: int = 1, backend: str = "local", address: str | None = None,
              threads: int | None = None, progress: bool = True, run_report: str = "auto") -> SweepResult:
    """Run every (grid point, seed) of ``spec`` into ``out``; see the module docstring.

    ``run_report`` is each run's RUN/report.html mode (auto | full | quick | none), as in
    `tinyscope run`; "quick" or "none" saves time in large sweeps."""
    check_options(jobs, backend, address, run_report)
    if backend == "local":  # the fork server imports torch while the grid is validated
        from tinyscope.sweep.local import prestart

        prestart()
    runs = spec.validate()
    return run_specs(runs, out, {**asdict(spec)}, desc=f"sweep {spec.experiment}", jobs=jobs, backend=backend,
                     address=address, threads=threads, progress=progress, run_report=run_report)


def check_options(jobs: int, backend: str, address: str | None, run_report: str) -> None:
    if backend not in BACKENDS:
        raise ConfigError(f"--backend {backend!r} is not known; choose one of {', '.join(BACKENDS)}")
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs} must be >= 1")
    if run_report not in RUN_REPORTS:
        raise ConfigError(f"--run-report {run_report!r} is not known; choose one of {', '.join(RUN_REPORTS)}")
    if address and backend != "ray":
        raise ConfigError("--address is for --backend ray")


def run_specs(runs: list[RunSpec], out: str | Path, record: dict, desc: str, jobs: int = 1, backend: str = "local",
              address: str | None = None, threads: int | None = None, progress: bool = True,
              run_report: str = "auto") -> SweepResult:
    """Run validated ``runs`` (of any experiments) into the sweep folder ``out``: skip complete
    runs, resume interrupted ones, keep the index; ``record`` describes the invocation
    (written to sweep.json) and ``desc`` labels the progress bar."""
    check_options(jobs, backend, address, run_report)
    if backend == "local":
        from tinyscope.sweep.local import prestart

        prestart()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    threads = threads or default_threads(jobs)
    t0 = time.perf_counter()
    with sweep_lock(out), RunIndex(out) as index:
        atomic_write_json(out / "sweep.json", {**record, "jobs": jobs, "backend": backend, "threads": threads,
                                               "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        todo: list[RunSpec] = []
        for r in runs:
            index.register(r.rel_path, r.experiment, r.preset, r.seed, r.overrides)
            if (out / r.rel_path / "results.json").exists():
                if index.db.execute("SELECT status FROM runs WHERE path=?", (r.rel_path,)).fetchone()[0] != "done":
                    index.scan(out / r.rel_path)
            else:
                todo.append(r)
        result = SweepResult(total=len(runs), skipped=len(runs) - len(todo))
        counts = {"running": 0, "failed": 0}
        bar = tqdm(total=len(runs), initial=result.skipped, desc=desc, unit="run",
                   disable=not (progress and sys.stderr.isatty()), dynamic_ncols=True)
        bar.set_postfix(running=0, failed=0)

        def on_start(job: dict) -> None:
            index.mark_running(_rel(job))
            counts["running"] += 1
            bar.set_postfix(running=counts["running"], failed=counts["failed"])

        def on_finish(job: dict, row: dict[str, Any]) -> None:
            rel = _rel(job)
            index.record_finish(rel, row)
            counts["running"] -= 1
            if row["status"] == "done":
                result.done += 1
                log.info("[%d/%d] done %s (%d running, %d failed)", result.skipped + result.done + len(result.failed),
                         len(runs), rel, counts["running"], counts["failed"])
            else:
                counts["failed"] += 1
                result.failed.append((rel, first_line(row.get("error"))))
                log.warning("run %s failed: %s", rel, first_line(row.get("error")))
            bar.update(1)
            bar.set_postfix(running=counts["running"], failed=counts["failed"])

        job_dicts = [{"spec": r.to_dict(), "run_dir": str((out / r.rel_path).resolve()), "threads": threads,
                      "report": run_report} for r in todo]
        try:
            if not job_dicts:
                pass
            elif backend == "local":
                from tinyscope.sweep.local import run_local

                run_local(job_dicts, jobs, on_start, on_finish)
            else:
                from tinyscope.sweep.ray_backend import run_ray

                run_ray(job_dicts, jobs, on_start, on_finish, address=address, threads=threads)
        finally:
            bar.close()
            # runs stopped by an interruption are no longer running: say so in the index
            index.db.execute("UPDATE runs SET status='incomplete' WHERE status='running'")
            index.db.commit()
    result.wall_time = time.perf_counter() - t0
    return result


def _rel(job: dict) -> str:
    return RunSpec.from_dict(job["spec"]).rel_path
