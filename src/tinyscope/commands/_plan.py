"""What a run would be, told before it starts (``tinyscope run --dry-run``, ``tinyscope show``):
the resolved config as ``--set`` lines and as JSON, the parameter count, the precision and
threads, and an estimated wall time. Nothing here writes a file.

Wall-time estimate, in order of preference:

* **ledger**: the study's ledger (``runs/ledger.py``) holds training wall times of recorded runs
  of the same experiment, preset and ``--set`` values (the seed aside): their median, scaled by
  this machine's calibration over the recording machine's (:func:`tinyscope.runs.ledger.estimate`);
* **measured**: else ``MEASURED_STEPS`` training steps of the real model, after one warm-up step,
  through the Trainer with no run directory, times ``train.steps``, plus one timed evaluation
  times the evaluations the run makes. Early stopping can only shorten it; the stages after
  the main phase, the final evaluation and the report are not counted (the text says so).
"""
from __future__ import annotations

import dataclasses
import json
import shlex
import time
from typing import Any

MEASURED_STEPS = 3


def set_value(value: Any) -> str:
    """``value`` as the text ``--set key=TEXT`` parses back to it (:func:`tinyscope.config.coerce`)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value) if not isinstance(value, float) else repr(value)


def set_lines(cfg: Any) -> list[str]:
    """Every leaf field of ``cfg`` as one ``--set key=value`` (shell-quoted where needed)."""
    from tinyscope.config import to_dict
    from tinyscope.train.loggers import flatten

    return [f"--set {shlex.quote(f'{key}={set_value(value)}')}" for key, value in flatten(to_dict(cfg)).items()]


def config_record(exp: Any, preset: str, cfg: Any) -> dict:
    """``{"experiment", "preset", "config"}``, as config.json holds them."""
    from tinyscope.config import to_dict

    return {"experiment": exp.name, "preset": preset, "config": to_dict(cfg)}


def parameter_count(exp: Any, cfg: Any, overrides: list[str] | None) -> int:
    """Parameters of the model ``cfg`` builds (on the meta device where it can, else for real)."""
    from tinyscope.commands._preflight import estimate_memory
    from tinyscope.runs.rundir import build

    est = estimate_memory(exp, cfg, overrides) if exp.trainable else None
    if est is not None:
        return int(est["n_parameters"])
    _, model = build(exp, cfg)
    return sum(p.numel() for p in model.parameters())


def machine_line(cfg: Any) -> str:
    """The precision, threads and device a run of ``cfg`` would use here (``train/machine.py``
    says how ``auto`` decides; a config without a precision field trains in bf16 autocast on
    CUDA with ``train.amp``, else in fp32)."""
    from tinyscope.train import machine
    from tinyscope.train.trainer import resolve_device

    train = cfg.train
    device = resolve_device(train.device)
    precision = getattr(train, "precision", "bf16" if device.type == "cuda" and train.amp else "fp32")
    line = machine.describe(precision, train.threads, bool(getattr(train, "compile", False)), device, train.steps,
                            prefetch=getattr(train, "prefetch", False))
    own = " (and the experiment's own bf16=true)" if getattr(cfg, "bf16", False) else ""
    return f"{line}{own}, device {device}"


def _n_evaluations(train: Any) -> int:
    return train.steps // train.eval_every + (train.steps % train.eval_every != 0) + bool(train.eval_at_start)


def measure_wall_time(exp: Any, cfg: Any) -> tuple[float, str]:
    """The module docstring's measured estimate: seconds and how it was made."""
    import torch

    from tinyscope.runs.rundir import build
    from tinyscope.train.trainer import Trainer

    task, model = build(exp, cfg)
    quiet = dict(eval_at_start=False, eval_every=10**9, log_every=10**9, checkpoint_every=0, logger="none",
                 stop_metric=None, patience=0)
    objective = exp.objective(cfg, task)
    Trainer(model, task, dataclasses.replace(cfg.train, steps=1, **quiet), seed=cfg.seed, objective=objective,
            progress=False).fit()  # warm-up: first-call allocations and caches
    timed = Trainer(model, task, dataclasses.replace(cfg.train, steps=MEASURED_STEPS, **quiet), seed=cfg.seed,
                    objective=objective, progress=False)
    t0 = time.perf_counter()
    timed.fit()
    per_step = (time.perf_counter() - t0) / MEASURED_STEPS
    evaluate = exp.evaluator(cfg, task)
    model.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        evaluate(model)
    per_eval = time.perf_counter() - t0
    n_eval = _n_evaluations(cfg.train)
    stages = exp.stages(cfg, task)
    how = (f"measured here: {MEASURED_STEPS} training steps after a warm-up, {per_step:.3g} s each, x "
           f"{cfg.train.steps} steps, plus {n_eval} evaluations of {per_eval:.3g} s; at most (early stopping "
           f"shortens it); the final evaluation and report not counted")
    if stages:
        how += f"; the {len(stages)} stage(s) after the main phase not counted"
    return per_step * cfg.train.steps + per_eval * n_eval, how


def estimate_wall_time(exp: Any, preset: str, cfg: Any, overrides: list[str]) -> tuple[float | None, str]:
    """The module docstring's estimate for a run of ``exp`` at ``preset`` with ``overrides``:
    seconds (None: none can be made) and how it was made."""
    from tinyscope.runs import ledger

    if not exp.trainable:
        return None, "a compiled model: nothing is trained"
    key = "|".join([exp.name, preset, *sorted(overrides)])
    timings = ledger.read_ledger(exp.study)["timings"]
    recorded = timings.get(key)
    if recorded and recorded.get("wall_time_s"):
        seconds = ledger.estimate(timings, key, ledger.calibrate())
        return seconds, (f"from the {exp.study} ledger: the median of {len(recorded['wall_time_s'])} recorded "
                         f"run(s) on {recorded.get('machine', 'another machine')} ({recorded.get('recorded', '?')}), "
                         f"scaled by this machine's calibration")
    return measure_wall_time(exp, cfg)


def describe_run(exp: Any, preset: str, cfg: Any, overrides: list[str], out: str, resume: bool) -> str:
    """The text ``tinyscope run --dry-run`` prints."""
    from pathlib import Path

    from tinyscope.runs.reproduce import format_duration

    where = Path(out)
    state = ("would continue the run there" if resume and (where / "config.json").exists()
             else "exists; the run would be written into it" if where.exists() else "would be created")
    seconds, how = estimate_wall_time(exp, preset, cfg, overrides)
    lines = [f"# tinyscope run {exp.name} --preset {preset} --seed {cfg.seed}: a dry run, nothing is trained "
             f"or written",
             f"run directory:  {out} ({state})",
             f"parameters:     {parameter_count(exp, cfg, overrides):,}"]
    if exp.trainable:
        lines.append(f"machine:        {machine_line(cfg)}")
    lines.append(f"wall time:      {format_duration(seconds) if seconds is not None else 'none'} ({how})")
    lines += ["", "# the resolved config as --set lines", *set_lines(cfg), "", "# and as JSON (config.json)",
              json.dumps(config_record(exp, preset, cfg), indent=2)]
    return "\n".join(lines)
