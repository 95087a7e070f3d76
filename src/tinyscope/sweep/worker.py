"""What runs inside a sweep's worker process (local pool or Ray task): one run, with its
thread limit, resumed from its last checkpoint if it was interrupted, its error kept.

Importing this module imports torch and every experiment, so that a fork server that
preloads it starts each run without paying for those imports again.
"""
from __future__ import annotations

import importlib
import io
import os
import pkgutil
import shutil
import signal
import threading
import traceback
from pathlib import Path
from typing import Any

import torch

from tinyscope import interp
from tinyscope.runs import registry
from tinyscope.runs.rundir import run_experiment
from tinyscope.sweep.grid import RunSpec
from tinyscope.sweep.index import run_dir_row
from tinyscope.train.checkpoint import atomic_write_json

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

    ``job`` = {"spec": RunSpec as dict, "run_dir": absolute path, "threads": int, "report": the
    RUN/report.html mode of `run_experiment` (auto | full | quick | none), "gpu": optional id}. Any
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
        run_experiment(spec.experiment, spec.preset, spec.seed, spec.overrides, run_dir, resume=True, progress=False,
                       report=job.get("report", "auto"))
    except Exception:  # noqa: BLE001 - a failed run must not stop the sweep; its error is kept
        (run_dir / "error.txt").write_text(traceback.format_exc())
    atomic_write_json(run_dir / "sweep_job.json", {"spec": spec.to_dict(), "setting": dict(spec.grid),
                                                   "cpu_time": round(_cpu_seconds() - cpu0, 3)})
    return run_dir_row(run_dir)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _exit_when_orphaned(ctl) -> None:
    """Block on the control pipe; the sweep never writes to it, so EOF means it died: stop too."""
    try:
        ctl.recv()
    except (EOFError, OSError):
        pass
    os._exit(75)


def run_child(job: dict[str, Any], ctl) -> None:
    """Body of a local-pool process: run the job, but not a moment past the sweep's death."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the sweep, which stops its runs
    threading.Thread(target=_exit_when_orphaned, args=(ctl,), daemon=True).start()
    execute(job)


def _warm_up() -> None:
    """Import what a first run imports lazily (torch._dynamo and torch.distributed at the first
    optimizer step, matplotlib, PIL and the views for RUN/report.html: ~1000 modules, seconds
    per run), so that forked runs inherit it. One torch thread here: a thread pool created in
    the fork server would not survive the fork (OpenMP is not fork-safe)."""
    torch.set_num_threads(1)
    names = ["torch.distributed", "tinyscope.report.run_report", "PIL.ImageDraw", "PIL.ImageFont"]
    names += [f"tinyscope.interp.{m.name}" for m in pkgutil.iter_modules(interp.__path__)]
    registry.names()  # every study's experiment modules
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that fails here fails again, visibly, in the run
            pass
    from tinyscope.interp.mpl import plt

    fig, ax = plt.subplots()  # fonts, PIL and the PNG writer
    ax.plot([0, 1], [0, 1], label="x")
    ax.legend()
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)
    layer = torch.nn.Linear(2, 2)  # an optimizer step
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    layer(torch.zeros(1, 2)).sum().backward()
    torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)
    opt.step()


try:  # fork-server preload: import every experiment module once and warm up; a failure here
    registry.names()  # must not take the fork server down (each run reports its own error)
    _warm_up()
except Exception:  # noqa: BLE001
    pass
