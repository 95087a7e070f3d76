"""Run directories: start, resume, load and re-evaluate a run of any registered experiment.

A run directory holds::

    config.json      experiment, preset, the full resolved config, versions
    metrics.jsonl    one JSON record per training log and per evaluation
    checkpoints/     step_*.safetensors, best.safetensors, resume.safetensors
    results.json     the selected checkpoint's final evaluation, fingerprint, wall time
    figures/         figures written by `tinyscope viz` and the report
"""
from __future__ import annotations

import json
import logging
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tinyscope import __version__
from tinyscope.config import from_dict, to_dict
from tinyscope.errors import CheckpointError, ConfigError
from tinyscope.train import checkpoint as ckpt
from tinyscope.train.distributed import dist_info, teardown
from tinyscope.train.trainer import Trainer
from tinyscope.runs import registry
from tinyscope.runs.experiment import Experiment

log = logging.getLogger(__name__)


@dataclass
class Run:
    """A loaded run: its experiment, config, task and model (weights of the chosen checkpoint)."""

    path: Path
    experiment: Experiment
    preset: str
    cfg: Any
    task: Any
    model: torch.nn.Module
    step: int | None = None

    @property
    def results(self) -> dict:
        p = self.path / "results.json"
        return json.loads(p.read_text()) if p.exists() else {}

    def metrics(self) -> list[dict]:
        p = self.path / "metrics.jsonl"
        return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []

    def checkpoint_steps(self) -> list[int]:
        return sorted(int(f.stem.split("_")[1]) for f in (self.path / "checkpoints").glob("step_*.safetensors"))

    def load_step(self, step: int) -> torch.nn.Module:
        """Load the weights saved at ``step`` into this run's model and return it."""
        ckpt.load_model(self.path / "checkpoints" / f"step_{step:06d}.safetensors", self.model)
        self.step = step
        return self.model


def _config_record(exp: Experiment, preset: str, cfg: Any) -> dict:
    return {"experiment": exp.name, "preset": preset, "config": to_dict(cfg),
            "tinyscope_version": __version__, "torch_version": torch.__version__,
            "python_version": platform.python_version()}


def read_config(path: str | Path) -> tuple[Experiment, str, Any]:
    path = Path(path)
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{path} is not a run directory (no config.json)")
    try:
        record = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{cfg_path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    exp = registry.get(record["experiment"])
    return exp, record["preset"], from_dict(exp.config_cls, record["config"])


def build(exp: Experiment, cfg: Any) -> tuple[Any, torch.nn.Module]:
    """Task and freshly initialised model; torch's RNG is seeded from ``cfg.seed`` first."""
    torch.manual_seed(cfg.seed)
    task = exp.build_task(cfg)
    return task, exp.build_model(cfg, task)


def run_experiment(name: str, preset: str, seed: int | None = None, overrides: list[str] | None = None,
                   out: str | Path | None = None, resume: bool = False, progress: bool = True,
                   report: str = "auto") -> dict:
    """Train (or continue) a run and write its directory; returns results.json's content.

    report: RUN/report.html, "auto" (the full page outside the smoke preset, the quick page for
    smoke runs), "full", "quick" or "none"."""
    exp = registry.get(name)
    if not exp.trainable:
        raise ConfigError(f"{name} is compiled, not trained; write it with `tinyscope construct`")
    cfg = exp.config(preset, seed, overrides)
    out = Path(out) if out is not None else Path("runs") / f"{name}-{preset}-s{cfg.seed}"
    if dist_info().is_main:  # under torchrun only rank 0 touches the run directory
        _prepare_run_dir(out, exp, preset, cfg, resume)
    if resume and dist_info().is_main and (out / "results.json").exists():
        log.info("%s is already complete", out)
        return json.loads((out / "results.json").read_text())

    task, model = build(exp, cfg)
    trainer = Trainer(model, task, cfg.train, seed=cfg.seed, run_dir=out, objective=exp.objective(cfg, task),
                      evaluate=exp.evaluator(cfg, task), progress=progress)
    if resume:
        trainer.resume()
    result = trainer.fit()
    if trainer.dist.world > 1:
        teardown()
    if not trainer.dist.is_main:
        return {}
    results = finalize(out, exp, preset, cfg, task, model, result)
    if report != "none":
        step = results["selected_step"] if results.get("selected_step") is not None else results["steps"]
        _write_report(Run(out, exp, preset, cfg, task, model, step),
                      full=report == "full" or (report == "auto" and preset != "smoke"))
    return results


def _prepare_run_dir(out: Path, exp: Experiment, preset: str, cfg: Any, resume: bool) -> None:
    """Write config.json of a new run, or check that a resumed run has the same config."""
    if (out / "config.json").exists():
        if not resume:
            raise ConfigError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
        s_exp, s_preset, s_cfg = read_config(out)
        if (s_exp.name, s_preset) != (exp.name, preset) or to_dict(s_cfg) != to_dict(cfg):
            raise ConfigError(f"{out} holds a run of {s_exp.name} --preset {s_preset} with another config; "
                              f"resume it with the same experiment, preset, seed and --set values")
    else:
        out.mkdir(parents=True, exist_ok=True)
        ckpt.atomic_write_json(out / "config.json", _config_record(exp, preset, cfg))


def _write_report(run: "Run", full: bool) -> None:
    """RUN/report.html from the run in memory (no second build of the task)."""
    out = run.path
    try:
        from tinyscope.report.run_report import write_run_report

        write_run_report(run, full=full)
    except Exception as exc:  # the run itself is complete and saved; say so rather than fail it
        log.warning("could not write %s/report.html (%s: %s); `tinyscope viz %s` retries", out,
                    type(exc).__name__, exc, out)


def finalize(out: Path, exp: Experiment, preset: str, cfg: Any, task: Any, model: torch.nn.Module, result) -> dict:
    best = out / "checkpoints" / "best.safetensors"
    if best.exists():
        ckpt.load_model(best, model)
    t0 = time.perf_counter()
    model.eval()
    metrics = exp.final_evaluation(cfg, task, model)
    results = {
        "experiment": exp.name, "preset": preset, "seed": cfg.seed,
        "steps": result.steps, "wall_time": round(result.wall_time, 3), "stopped": result.stopped,
        "selected_step": result.best_step, "metrics": metrics,
        "eval_fingerprint": exp.eval_fingerprint(cfg, task),
        "eval_time": round(time.perf_counter() - t0, 3),
        "n_parameters": sum(p.numel() for p in model.parameters()),
    }
    ckpt.atomic_write_json(out / "results.json", results)
    return results


def load_run(path: str | Path, which: str | int = "best") -> Run:
    """Load a run directory with the weights of ``which``: "best", "last", or a step number."""
    path = Path(path)
    exp, preset, cfg = read_config(path)
    task, model = build(exp, cfg)
    cdir = path / "checkpoints"
    step = None
    if which == "best" and (cdir / "best.safetensors").exists():
        meta = ckpt.load_model(cdir / "best.safetensors", model)
        step = meta.get("step")
    elif which in ("best", "last"):
        target = cdir / "resume.safetensors"
        if not target.exists():
            raise CheckpointError(f"{path} has no checkpoint yet")
        tensors, meta = ckpt.load_tensors(target)
        model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        step = meta["trainer"]["step"]
    else:
        step = int(which)
        ckpt.load_model(cdir / f"step_{step:06d}.safetensors", model)
    model.eval()
    return Run(path, exp, preset, cfg, task, model, step)


def evaluate_run(path: str | Path, which: str | int = "best") -> dict:
    run = load_run(path, which)
    metrics = run.experiment.final_evaluation(run.cfg, run.task, run.model)
    return {"experiment": run.experiment.name, "step": run.step, "metrics": metrics,
            "eval_fingerprint": run.experiment.eval_fingerprint(run.cfg, run.task)}
