"""The claims ledger: the measured value of each claim, kept with the code and committed.

One file per study, ``tinyscope/studies/<study>/ledger.json``, written by `tinyscope reproduce`
(reviewed and committed like code), read by `tinyscope claims` and turned into the claims
section of ``docs/results/<study>.md``. It holds

* ``claims``: per claim id, the latest measurement at the claim's own preset — pooled value,
  sample SD, n, per-seed values, verdict, extras (seeds meeting the target, median time to it),
  the command, date, machine and tinyscope version, and the zoo entry that backs it;
* ``timings``: per run set (experiment | preset | --set values), the training wall times of the
  recorded runs and the machine's calibration time, from which `tinyscope reproduce` estimates
  how long a plan takes on the machine it runs on.

Files are written with sorted keys, so a ledger's diff shows only what changed.
"""
from __future__ import annotations

import json
import math
import platform
import statistics
import time
from pathlib import Path

from tinyscope.errors import CheckpointError
from tinyscope.train.checkpoint import atomic_write_bytes

LEDGER_NAME = "ledger.json"


def studies_dir() -> Path:
    """The folder of the study packages (``tinyscope/studies``), found by path, not by import."""
    return Path(__file__).resolve().parents[1] / "studies"


def ledger_path(study: str, root: Path | None = None) -> Path:
    """``<root>/<study>/ledger.json``; root defaults to the installed ``tinyscope/studies``."""
    return (root or studies_dir()) / study / LEDGER_NAME


def read_ledger(study: str, root: Path | None = None) -> dict:
    p = ledger_path(study, root)
    if not p.exists():
        return {"study": study, "claims": {}, "timings": {}}
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{p} is not valid JSON ({exc.msg} at line {exc.lineno}); restore it with git") from None
    data.setdefault("claims", {})
    data.setdefault("timings", {})
    return data


def write_ledger(study: str, data: dict, root: Path | None = None) -> Path:
    p = ledger_path(study, root)
    atomic_write_bytes(p, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    return p


def machine() -> str:
    """The processor and its core count, e.g. "Intel(R) Xeon(R) Platinum 8481C (2 cores)"."""
    import os

    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return f"{name} ({cores} cores)"


def hardware(device=None) -> str:
    """:func:`machine`, with the GPU's name when ``device`` is a CUDA device, e.g.
    "AMD EPYC (16 cores), NVIDIA H200": where a run trained, as its results.json records it."""
    name = machine()
    if device is not None and getattr(device, "type", str(device).split(":")[0]) == "cuda":
        import torch

        name += f", {torch.cuda.get_device_name(device)}"
    return name


def runs_hardware(run_dirs) -> str:
    """The hardware the runs in ``run_dirs`` trained on (their results.json), joined with "; "
    when they differ; this machine's for runs that predate the record."""
    names = set()
    for d in run_dirs:
        try:
            names.add(json.loads((Path(d) / "results.json").read_text()).get("hardware") or machine())
        except (OSError, ValueError):
            names.add(machine())
    return "; ".join(sorted(names)) or machine()


def calibrate(repeats: int = 3) -> float:
    """Seconds this machine takes for a fixed small training-like workload on one thread (the
    best of ``repeats``): forward, backward and an AdamW step of a 2-layer MLP on a 256×256 batch.
    Recorded wall times are scaled by the ratio of calibrations to estimate them elsewhere."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(256, 256, generator=gen)
        net = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(20):
                opt.zero_grad()
                net(x).square().mean().backward()
                opt.step()
            best = min(best, time.perf_counter() - t0)
        return best
    finally:
        torch.set_num_threads(threads)


def record_timing(data: dict, key: str, wall_times: list[float], calibration: float) -> None:
    """Keep the wall times of the runs of ``key`` and the calibration they were measured under.
    The same wall times recorded again (runs collected a second time, maybe on a busier machine)
    keep the calibration and date of their first recording."""
    known = data["timings"].get(key) or {}
    if wall_times and known.get("wall_time_s") != [round(w, 3) for w in wall_times]:
        data["timings"][key] = {"wall_time_s": [round(w, 3) for w in wall_times],
                                "calibration_s": round(calibration, 5), "machine": machine(),
                                "recorded": time.strftime("%Y-%m-%d")}


def estimate(timings: dict, key: str, calibration: float | None) -> float | None:
    """Estimated seconds of one run of ``key`` on this machine: the median recorded wall time,
    scaled by this machine's calibration over the recording machine's (None: never recorded)."""
    t = timings.get(key)
    if not t or not t.get("wall_time_s"):
        return None
    base = statistics.median(t["wall_time_s"])
    if calibration is None or not t.get("calibration_s"):
        return base
    return base * calibration / t["calibration_s"]


def estimate_from_siblings(timings: dict, key: str, calibration: float | None) -> float | None:
    """A rougher estimate for a ``key`` never recorded: the median of :func:`estimate` over the
    recorded run sets of the same experiment and preset at other ``--set`` values, among those
    that share the most ``--set`` items with ``key`` (None: none). Sharing matters: at n = 10 the
    standard Log-ICoT model's estimate must come from its own runs at other n, not from the
    constrained model's runs, which are 80 times shorter."""
    parts = key.split("|")
    prefix, wanted = "|".join(parts[:2]) + "|", set(parts[2:])
    scored = []
    for k in timings:
        if k == key or not (k + "|").startswith(prefix):
            continue
        seconds = estimate(timings, k, calibration)
        if seconds is not None:
            scored.append((len(wanted & set(k.split("|")[2:])), seconds))
    if not scored:
        return None
    most = max(shared for shared, _ in scored)
    return statistics.median(seconds for shared, seconds in scored if shared == most)
