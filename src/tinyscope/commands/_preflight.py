"""Checks made before a run starts, while nothing is written yet: what a config asks of this
machine (a device, threads, memory) and of the file system (a run directory it can write).

The config itself is validated when it is built (the study's ``__post_init__`` and
:func:`tinyscope.config.validate`); these checks need the machine, so they belong to the
commands that start runs (``run``, ``sweep``), not to the config. Each raises
:class:`~tinyscope.errors.ConfigError` with one line that names the value and what to do.

Memory estimate (bytes), from a model built on PyTorch's ``meta`` device (shapes, no storage)::

    state       = sum over parameters of numel * (element size * 2 + 8)   weights, gradients, AdamW's two moments
                + sum over buffers of numel * element size
    activations = batch * tokens * sum over matrices (d_out + d_in) * 4 bytes * 2   kept for backward, and their gradients
    data        = batch * tokens * 8 bytes * 3                             tokens, targets, loss mask

``tokens`` is the length of one training example (one drawn from the task). The sum over
matrices counts what every linear map (and embedding) reads and writes per token: a rough,
architecture-blind figure that is right to a small factor for the models here. A run is
refused only when the estimate exceeds everything the machine has (its physical memory, or the
GPU's), so a refusal is never a close call.
"""
from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from tinyscope.errors import ConfigError, TinyscopeError

log = logging.getLogger(__name__)


def check_start(exp: Any, cfg: Any, overrides: list[str] | None, out: str | Path | None,
                resume: bool = False) -> None:
    """Every check before ``tinyscope run`` writes into ``out`` (None: nothing to write yet)."""
    if out is not None:
        check_out(Path(out), resume)
    if exp.trainable:
        check_machine(exp, cfg, overrides)


def check_machine(exp: Any, cfg: Any, overrides: list[str] | None) -> None:
    """Device, threads and memory of a trainable experiment's ``cfg`` on this machine."""
    check_device(cfg.train.device)
    check_threads(cfg.train.threads)
    check_memory(exp, cfg, overrides)


# ----------------------------------------------------------------------------- files
def check_out(out: Path, resume: bool = False) -> None:
    """``out`` is (or can become) a directory this process can write into."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a directory for the run")
    if resume and not (out / "config.json").exists():
        return  # run_experiment says that there is nothing to resume, or starts it
    probe_in = out
    while not probe_in.exists():
        if probe_in.parent == probe_in:
            break
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise ConfigError(f"--out {out}: {probe_in} is a file, not a directory; choose another --out")
    try:  # a real write: access() says yes to root on a read-only or full file system
        fd, name = tempfile.mkstemp(prefix=".tinyscope-write-test-", dir=probe_in)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise ConfigError(f"--out {out} is not writable ({probe_in}: {exc.strerror}); "
                          f"choose a directory you can write to") from None


# ----------------------------------------------------------------------------- device and threads
_DEVICE = re.compile(r"(cpu|cuda|mps)(?::(\d+))?")


def check_device(name: str) -> None:
    """``train.device`` names a device this machine has: auto, cpu, cuda, cuda:N (or mps)."""
    if name == "auto":
        return
    m = _DEVICE.fullmatch(name)
    if m is None:
        raise ConfigError(f"train.device={name!r} is not a device; use auto, cpu, cuda or cuda:N")
    import torch

    kind, index = m[1], m[2]
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"train.device={name!r} but this machine has no CUDA GPU that torch can use; "
                              f"use train.device=cpu or auto")
        if index is not None and int(index) >= torch.cuda.device_count():
            raise ConfigError(f"train.device={name!r} but this machine has {torch.cuda.device_count()} GPU(s) "
                              f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    elif kind == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"train.device={name!r} but Apple's MPS is not available here; use cpu or auto")


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_threads(threads: int | str) -> None:
    """``train.threads`` (0 = torch's default; auto is measured and never above it) is at most
    the cores this process may use: more only slows training, and a huge count crashes the OpenMP runtime."""
    n = cores()
    if threads != "auto" and threads > n:
        raise ConfigError(f"train.threads={threads} exceeds the {n} CPU core(s) this process may use; "
                          f"give at most {n} (0 keeps torch's default)")


# ----------------------------------------------------------------------------- memory
def _unit(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError


def machine_memory(device: str) -> tuple[int | None, str]:
    """Bytes the run's device has in all (None: unknown) and a name for it."""
    import torch

    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        index = int(device.split(":")[1]) if ":" in device else 0
        return int(torch.cuda.get_device_properties(index).total_memory), f"GPU cuda:{index}"
    total = None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
    return total, "this machine"


class _NoEstimate(Exception):
    pass


def _build_on_meta(exp: Any, cfg: Any, overrides: list[str] | None):
    """The task (for real) and the model on the meta device; a failure caused by ``overrides``
    is a :class:`ConfigError`, any other is no estimate."""
    import torch

    try:
        task = exp.build_task(cfg)
    except TinyscopeError:
        raise
    except MemoryError:
        raise ConfigError(f"{exp.name}: building the task ran out of memory; lower the task's sizes") from None
    except Exception as exc:
        _blame(exp, "task", exc, overrides)
    try:
        with torch.device("meta"):
            model = exp.build_model(cfg, task)
    except TinyscopeError:
        raise
    except Exception as exc:
        log.debug("no memory estimate: %s's model does not build on the meta device (%s)", exp.name, exc)
        raise _NoEstimate from None
    return task, model


def _blame(exp: Any, part: str, exc: Exception, overrides: list[str] | None) -> None:
    """A preset builds; with ``overrides`` it does not: the values are at fault, say so. Without
    overrides the failure is a bug and is raised as it is."""
    if not overrides:
        raise exc
    message = " ".join(str(exc).split()) or type(exc).__name__
    raise ConfigError(f"{exp.name} cannot build its {part} with --set {' --set '.join(overrides)}: "
                      f"{type(exc).__name__}: {message}") from None


def estimate_memory(exp: Any, cfg: Any, overrides: list[str] | None = None) -> dict | None:
    """The module docstring's estimate for training ``cfg``: ``{"state", "activations", "data",
    "total"}`` in bytes and ``n_parameters``, ``tokens``; None when it cannot be made."""
    from tinyscope.tasks.base import step_rng

    try:
        task, model = _build_on_meta(exp, cfg, overrides)
    except _NoEstimate:
        return None
    params = list(model.parameters())
    state = sum(p.numel() * (2 * p.element_size() + 8) for p in params)
    state += sum(b.numel() * b.element_size() for b in model.buffers())
    per_token = sum(p.shape[0] + p.shape[-1] for p in params if p.dim() >= 2)
    batch = int(cfg.train.batch_size)
    try:
        # A task whose first draw is costly (rule pools built on first use) states its length.
        known = getattr(task, "example_tokens", None)
        tokens = int(known) if known is not None else int(task.sample(step_rng(cfg.seed, 0), 1).tokens.size)
    except TinyscopeError:
        raise
    except Exception as exc:
        log.debug("no activation estimate: %s's task does not sample one example (%s)", exp.name, exc)
        tokens = 0
    activations = batch * tokens * per_token * 4 * 2
    data = batch * tokens * 8 * 3
    return {"state": state, "activations": activations, "data": data, "total": state + activations + data,
            "n_parameters": sum(p.numel() for p in params), "tokens": tokens, "batch": batch}


def check_memory(exp: Any, cfg: Any, overrides: list[str] | None = None) -> None:
    """Refuse a run whose estimated memory exceeds what its device has in all."""
    est = estimate_memory(exp, cfg, overrides)
    if est is None:
        return
    have, where = machine_memory(cfg.train.device)
    if have is None or est["total"] <= have:
        return
    raise ConfigError(
        f"{exp.name} would need about {_unit(est['total'])} of memory to train ({_unit(est['state'])} for "
        f"{est['n_parameters']:,} parameters with gradients and optimizer state, {_unit(est['activations'])} "
        f"of activations for train.batch_size={est['batch']} x {est['tokens']} tokens), but {where} has "
        f"{_unit(have)}; lower train.batch_size or the model's size")
