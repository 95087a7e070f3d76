"""What runs inside a sweep's worker process (local pool or Ray task): one run, with its
thread limit, resumed from its last checkpoint if it was interrupted, its error kept.

Importing this module imports torch and every experiment, so that a fork server that
preloads it starts each run without paying for those imports again.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import traceback
from pathlib import Path
from typing import Any

import torch

from ..experiments import registry
from ..experiments.runner import run_experiment
from ..report.records import read_run
from ..train.checkpoint import atomic_write_json
from .grid import RunSpec
from .index import row_from_record



def _warm_up() -> None:
    """Import what a first run imports lazily (torch._dynamo and torch.distributed at the first
    optimizer step, matplotlib and PIL for RUN/report.html: ~1000 modules, seconds per run) so
    that forked runs inherit it."""
    import torch.distributed  # noqa: F401

    import importlib
    import pkgutil

    import tinyscope.interp

    # the single-run report that run_experiment writes at the end, and the views it draws
    names = ["tinyscope.report.run_report", "PIL.ImageDraw", "PIL.ImageFont"]
    names += [f"tinyscope.interp.{m.name}" for m in pkgutil.iter_modules(tinyscope.interp.__path__)]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that fails here fails again, visibly, in the run
            pass

    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()  # fonts, PIL and the PNG writer: what RUN/report.html needs
    ax.plot([0, 1], [0, 1], label="x")
    ax.legend()
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)
    layer = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    layer(torch.zeros(1, 2)).sum().backward()
    torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)
    opt.step()


try:  # fork-server preload: import every experiment module once and warm up; a failure here
    registry.names()  # must not take the fork server down (each run reports its own error)
    _warm_up()
except Exception:  # noqa: BLE001
    pass

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(n: int) -> None:
    """Use at most ``n`` threads for torch's intra-op pool (and BLAS, for libraries not yet loaded)."""
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    torch.set_num_threads(n)


def _reset_unstarted(run_dir: Path) -> None:
    """A run killed before its first resume checkpoint starts again from step 0: drop what it
    logged, so that metrics.jsonl holds each step once."""
    if (run_dir / "results.json").exists() or (run_dir / "checkpoints" / "resume.safetensors").exists():
        return
    (run_dir / "metrics.jsonl").unlink(missing_ok=True)
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)


def execute(job: dict[str, Any]) -> dict[str, Any]:
    """Run (or resume, or skip if complete) one job; return its index row.

    ``job`` = {"spec": RunSpec as dict, "run_dir": absolute path, "threads": int}. Any
    exception is caught: the traceback goes to RUN/error.txt and the row says "failed"."""
    spec = RunSpec.from_dict(job["spec"])
    run_dir = Path(job["run_dir"])
    if job.get("threads"):
        limit_threads(int(job["threads"]))
    if job.get("gpu") is not None:  # before CUDA is first used in this process
        os.environ["CUDA_VISIBLE_DEVICES"] = str(job["gpu"])
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.txt").unlink(missing_ok=True)
    atomic_write_json(run_dir / "sweep_job.json", {"spec": spec.to_dict(), "setting": dict(spec.grid)})
    _reset_unstarted(run_dir)
    cpu0 = _cpu_seconds()
    try:
        run_experiment(spec.experiment, spec.preset, spec.seed, spec.overrides, run_dir, resume=True, progress=False)
    except Exception:  # noqa: BLE001 - a failed run must not stop the sweep; its error is kept
        (run_dir / "error.txt").write_text(traceback.format_exc())
    atomic_write_json(run_dir / "sweep_job.json", {"spec": spec.to_dict(), "setting": dict(spec.grid),
                                                   "cpu_time": round(_cpu_seconds() - cpu0, 3)})
    return outcome(run_dir)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def outcome(run_dir: Path, exitcode: int | None = None) -> dict[str, Any]:
    """The index row of a finished job, read from its directory; a process that died without
    writing results.json or error.txt is a failure with its exit code."""
    if (run_dir / "config.json").exists():
        row = row_from_record(read_run(run_dir))
    else:
        row = {"status": "incomplete"}
    job_file = run_dir / "sweep_job.json"
    if job_file.exists():
        row["cpu_time"] = json.loads(job_file.read_text()).get("cpu_time")
    if row["status"] == "incomplete":
        cause = f"exit code {exitcode}" if exitcode is not None else "no results"
        if exitcode is not None and exitcode < 0:
            cause = f"killed by signal {-exitcode}"
        row["status"] = "failed"
        row["error"] = f"the run's process ended ({cause}) before writing results.json or error.txt"
    return row


def _exit_when_orphaned(ctl) -> None:
    """Block on the control pipe; the sweep never writes to it, so EOF means it died: stop too."""
    try:
        ctl.recv()
    except (EOFError, OSError):
        pass
    os._exit(75)


def child_main(job: dict[str, Any], ctl) -> None:
    """Entry point of a local-pool process: run the job, but not a moment past the sweep's death."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the sweep, which stops its runs
    threading.Thread(target=_exit_when_orphaned, args=(ctl,), daemon=True).start()
    execute(job)
