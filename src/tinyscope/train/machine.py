"""Precision and intra-op threads chosen for the machine, by capability and by measurement.

API (what the trainer and ``tinyscope run --dry-run`` use):

* ``choose_precision(requested, device) -> "fp32" | "bf16"``: ``fp32`` and ``bf16`` are kept as
  asked; ``auto`` is ``bf16`` on CUDA (when the GPU supports it) and on a CPU that computes
  bfloat16 natively (AVX-512 BF16 or AMX, :func:`bf16_native`) *and* where a bf16 matmul times
  faster than an fp32 one (:func:`bf16_matmul_speedup`, measured once per process, cached);
  ``fp32`` otherwise. On a CPU this is a *candidate*: the trainer keeps bf16 only when the
  model's own warm-up steps run faster with it (:func:`precision_candidates`), so a run is never
  slower than fp32 because of its precision.
* ``choose_threads(requested, steps, time_step=None) -> int``: an integer >= 1 is kept, ``0``
  keeps torch's current count, ``auto`` picks the fastest of :func:`thread_candidates` by
  ``time_step(n)`` (seconds of one warm-up step on ``n`` threads), preferring fewer threads
  unless more are at least :data:`CLEAR_WIN` faster.
* ``thread_cap()``: the most threads ``auto`` may use: the cores this process may run on
  (``os.sched_getaffinity``), and ``OMP_NUM_THREADS`` when the environment sets it (a sweep's
  share of the cores, or the user's).
* ``measures(steps, world)``: whether ``auto`` measures at all. The rule: a run of fewer than
  :data:`AUTO_MIN_STEPS` steps, or one of several processes, does not measure: it takes one
  thread and fp32 on a CPU (bf16 on CUDA), so smoke runs pay nothing for the choice.
* ``describe(precision, threads, compile, device, steps, world=1, prefetch=False) -> str``: one line saying
  what a run with these settings would use, without measuring (for ``--dry-run``).
"""
from __future__ import annotations

import functools
import os
import time
from typing import Callable

import torch

PRECISIONS = ("auto", "fp32", "bf16")
AUTO_MIN_STEPS = 500      # shorter runs do not spend warm-up steps measuring
CLEAR_WIN = 1.15          # more threads must be this much faster (a loaded machine is noisy)
PRECISION_CLEAR_WIN = 1.3  # bf16 must be this much faster than fp32 over the warm-up steps (it also rounds differently)
BF16_MATMUL_MIN_SPEEDUP = 1.5  # a bf16 matmul this much faster than fp32 makes bf16 a candidate on a CPU


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_cap() -> int:
    """The most intra-op threads ``threads=auto`` may use: :func:`cores`, capped by
    ``OMP_NUM_THREADS`` when that is set to a positive integer."""
    n = cores()
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    return max(1, min(n, int(env))) if env.isdigit() and int(env) > 0 else n


def measures(steps: int, world: int = 1) -> bool:
    """Whether ``auto`` settings are decided by timing warm-up steps (see the module docstring)."""
    return world == 1 and steps >= AUTO_MIN_STEPS


# ----------------------------------------------------------------------------- precision
def _device_type(device) -> str:
    return device.type if isinstance(device, torch.device) else torch.device(device).type


def bf16_native() -> bool:
    """The CPU has bfloat16 arithmetic instructions (AVX-512 BF16 or AMX tiles)."""
    cpu = getattr(torch, "cpu", None)
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        probe = getattr(cpu, name, None)
        try:
            if probe is not None and probe():
                return True
        except RuntimeError:
            pass
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


@functools.cache
def bf16_matmul_speedup(n: int = 256, reps: int = 5) -> float:
    """fp32 time / bf16 time of an (n, n) @ (n, n) CPU matmul on the current threads, over
    ``reps`` interleaved timings, the fastest of each; measured once per process (cached)."""
    g = torch.Generator().manual_seed(0)
    a32, b32 = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)  # (n, n) each
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(2):  # warm the kernels (oneDNN builds its bf16 kernel on first use)
        a32 @ b32, a16 @ b16
    for _ in range(reps):
        for name, (a, b) in (("fp32", (a32, b32)), ("bf16", (a16, b16))):
            t0 = time.perf_counter()
            for _ in range(4):
                a @ b
            times[name].append(time.perf_counter() - t0)
    return min(times["fp32"]) / max(min(times["bf16"]), 1e-12)  # best rounds: neighbours only add time


def choose_precision(requested: str, device) -> str:
    """``fp32`` or ``bf16`` for ``train.precision=requested`` on ``device`` (see the module docstring)."""
    if requested not in PRECISIONS:
        raise ValueError(f"precision {requested!r} is not one of {PRECISIONS}")
    if requested != "auto":
        return requested
    kind = _device_type(device)
    if kind == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if kind == "cpu" and bf16_native() and bf16_matmul_speedup() >= BF16_MATMUL_MIN_SPEEDUP:
        return "bf16"
    return "fp32"


def precision_candidates(requested: str, device, steps: int, world: int = 1) -> tuple[str, ...]:
    """The precisions the trainer times on the model's warm-up steps (fp32 first: the one kept
    unless another wins clearly). One candidate means no timing is needed."""
    choice = choose_precision(requested, device)
    if requested != "auto" or _device_type(device) == "cuda":
        return (choice,)
    if choice == "bf16" and measures(steps, world):
        return ("fp32", "bf16")
    return ("fp32",)


# ----------------------------------------------------------------------------- threads
def thread_candidates(requested: int | str, steps: int, world: int = 1) -> tuple[int, ...]:
    """The thread counts ``choose_threads`` would time (one: no timing needed)."""
    if requested == "auto":
        cap = thread_cap()
        if not measures(steps, world) or cap == 1:
            return (1,)
        return tuple(sorted({1, 2, cap} & set(range(1, cap + 1))))
    n = int(requested)
    return (n if n > 0 else torch.get_num_threads(),)


def fastest(times: dict, order: list, margin: float = CLEAR_WIN) -> object:
    """The first of ``order`` unless a later one's fastest time beats every earlier pick's by
    ``margin``: ``times`` maps each choice to its list of seconds. The minimum, not the median:
    other processes on the machine only ever add time to a step, so a loaded machine's medians
    let the neighbours decide (a 2.6x bf16 win was lost that way at load 9)."""
    best = order[0]
    for choice in order[1:]:
        if min(times[choice]) * margin < min(times[best]):
            best = choice
    return best


def choose_threads(requested: int | str, steps: int, time_step: Callable[[int], float] | None = None,
                   rounds: int = 3, world: int = 1) -> int:
    """The intra-op thread count for ``train.threads=requested`` (see the module docstring).
    ``time_step(n)`` is called ``rounds`` times per candidate, interleaved."""
    cands = thread_candidates(requested, steps, world)
    if len(cands) == 1:
        return cands[0]
    if time_step is None:
        raise ValueError("threads=auto needs time_step to choose between " + ", ".join(map(str, cands)))
    times: dict[int, list[float]] = {n: [] for n in cands}
    for _ in range(rounds):
        for n in cands:
            times[n].append(time_step(n))
    return int(fastest(times, list(cands)))


def describe(precision: str, threads: int | str, compile: bool, device, steps: int, world: int = 1,
             prefetch: bool | str = False) -> str:
    """What a run with these settings would use on this machine, in one line, measuring nothing
    but the cached bf16 matmul probe."""
    precs = precision_candidates(precision, device, steps, world)
    threads_c = thread_candidates(threads, steps, world) if _device_type(device) == "cpu" else (torch.get_num_threads(),)
    p = precs[0] if len(precs) == 1 else "/".join(precs) + " (the faster over the first steps)"
    t = str(threads_c[0]) if len(threads_c) == 1 else "/".join(map(str, threads_c)) + " (the fastest over the first steps)"
    if prefetch == "auto":
        f = "on/off (the faster over the first steps)" if measures(steps, world) else "off"
    else:
        f = "on" if prefetch else "off"
    return f"precision {p}, threads {t}, compile {'on' if compile else 'off'}, prefetch {f}"
