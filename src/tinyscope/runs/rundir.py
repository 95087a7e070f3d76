"""Run directories: start, resume, load and re-evaluate a run of any registered experiment.

A run directory holds::

    config.json      experiment, preset, the full resolved config, versions
    metrics.jsonl    one JSON record per training log and per evaluation
    checkpoints/     step_*.safetensors, best.safetensors, resume.safetensors
    stages/<name>/   one per training stage after the main phase (``Experiment.stages``), in
                     order: train.json (its TrainConfig), metrics.jsonl, checkpoints/ as above
    results.json     the selected checkpoint's final evaluation, fingerprint, wall time
    init_from.json   where ``train.init_from`` took the starting weights (source, checksum)
    figures/         figures written by `tinyscope viz` and the report
    .lock            held by the one process writing into the run (:mod:`tinyscope.runs.lock`)

The model a run selects is the main phase's selected checkpoint (best.safetensors, else the
last), or, when the experiment declares stages, the last stage's: each stage starts from the
previous phase's selected model, and the final evaluation measures the last one, which is what
:func:`load_run` returns.

Saved data is never damaged: a run holds its directory's lock (:mod:`tinyscope.runs.lock`) while
it writes, removes the temporary files of writes killed midway when it starts, and a start that
fails before its first resume checkpoint removes what it wrote (so the corrected command is not
blocked by a config.json); a directory holding only such a failed start is started afresh.
"""
from __future__ import annotations

import copy
import fnmatch
import json
import logging
import os
import platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from tinyscope import __version__
from tinyscope.config import from_dict, to_dict
from tinyscope.errors import CheckpointError, ConfigError, check
from tinyscope.models.utils import count_parameters
from tinyscope.runs import ledger, registry
from tinyscope.runs.experiment import Experiment, Stage
from tinyscope.runs.lock import run_lock
from tinyscope.train import checkpoint as ckpt
from tinyscope.train.distributed import dist_info, teardown
from tinyscope.train.trainer import DivergedError, Trainer, TrainResult, read_log, resolve_device

log = logging.getLogger(__name__)


@dataclass
class Run:
    """A loaded run: its experiment, config, task and model (weights of the chosen checkpoint).

    step: the step of the loaded checkpoint, within ``stage`` (None: the main phase)."""

    path: Path
    experiment: Experiment
    preset: str
    cfg: Any
    task: Any
    model: torch.nn.Module
    step: int | None = None
    stage: str | None = None

    @property
    def results(self) -> dict:
        p = self.path / "results.json"
        if not p.exists():
            return {}
        try:
            return json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"{p} is not valid JSON ({exc.msg} at line {exc.lineno}); "
                                  f"remove it and `tinyscope run ... --resume` measures the run again") from None

    def metrics(self) -> list[dict]:
        """The records of metrics.jsonl (a torn last line, left by a kill, is dropped)."""
        return read_log(self.path / "metrics.jsonl")

    def checkpoint_steps(self) -> list[int]:
        return sorted(int(f.stem.split("_")[1]) for f in (self.path / "checkpoints").glob("step_*.safetensors"))

    def load_step(self, step: int) -> torch.nn.Module:
        """Load the weights saved at ``step`` into this run's model and return it."""
        ckpt.load_model(step_file(self.path, step), self.model)
        self.step = step
        return self.model

    def model_at(self, step: int) -> torch.nn.Module:
        """A copy of this run's model with the weights saved at ``step``; ``self.model`` is left as it is."""
        model = copy.deepcopy(self.model)
        ckpt.load_model(step_file(self.path, step), model)
        return model


def step_file(run_dir: Path, step: int) -> Path:
    """The weights a run saved at ``step`` (the trainer's ``checkpoints/step_NNNNNN.safetensors``)."""
    return run_dir / "checkpoints" / ckpt.step_name(step)


def _config_record(exp: Experiment, preset: str, cfg: Any) -> dict:
    return {"experiment": exp.name, "preset": preset, "config": to_dict(cfg),
            "tinyscope_version": __version__, "torch_version": torch.__version__,
            "python_version": platform.python_version()}


def read_config(path: str | Path) -> tuple[Experiment, str, Any]:
    path = resolve_run_path(path)
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{path} is not a run directory (no config.json)")
    try:
        record = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{cfg_path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    missing = [k for k in ("experiment", "preset", "config") if not isinstance(record, dict) or k not in record]
    if missing:
        raise CheckpointError(f"{cfg_path} lacks {', '.join(map(repr, missing))}; it is not a tinyscope run's config")
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
    cfg = exp.config(preset, seed, overrides)
    out = Path(out) if out is not None else Path("runs") / f"{name}-{preset}-s{cfg.seed}"
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; choose another --out")
    before = sorted(os.listdir(out)) if out.is_dir() else None
    if not exp.trainable:  # a compiled model: written, not trained (a complete one is kept)
        with run_lock(out):
            if resume and (out / "results.json").exists():
                return _read_results(out)
            try:
                return exp.write_compiled(cfg, out)
            except Exception:
                if not (out / "results.json").exists():
                    _remove_new_entries(out, before)
                raise
    resolve_device(cfg.train.device)  # found before the directory is made, not after
    if not dist_info().is_main:  # under torchrun only rank 0 touches the run directory
        return _train(out, exp, preset, cfg, resume, progress, report)
    with run_lock(out):
        removed = ckpt.remove_temp_files(out)
        if removed:
            log.info("removed %d temporary files of writes cut off in %s", len(removed), out)
        start = _prepare_run_dir(out, exp, preset, cfg, resume)
        fresh = start != "resume"
        if start == "afresh" and before is not None:  # the cleared run's files were not the user's
            before = [n for n in before if n not in RUN_FILES]
        try:
            return _train(out, exp, preset, cfg, resume, progress, report)
        except Exception as exc:
            if not fresh or (out / "checkpoints" / "resume.safetensors").exists():
                raise
            _remove_new_entries(out, before)
            if isinstance(exc, DivergedError):
                raise DivergedError(f"{exc}; {out} held nothing else and was removed") from None
            raise


def _read_results(out: Path) -> dict:
    """results.json of a complete run; one that is not JSON is a :class:`CheckpointError`."""
    try:
        return json.loads((out / "results.json").read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{out / 'results.json'} is not valid JSON ({exc.msg} at line {exc.lineno}); "
                              f"remove it and `--resume` measures the run again") from None


def _remove_new_entries(out: Path, before: list[str] | None) -> None:
    """Remove what a failed start wrote: the whole directory when it made it, else the entries
    that were not there before."""
    if before is None:
        shutil.rmtree(out, ignore_errors=True)
        return
    for name in set(os.listdir(out)) - set(before):
        p = out / name
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)


def _train(out: Path, exp: Experiment, preset: str, cfg: Any, resume: bool, progress: bool, report: str) -> dict:
    """The body of :func:`run_experiment` once the run directory is ready (and locked)."""
    if resume and dist_info().is_main and (out / "results.json").exists():
        log.info("%s is already complete", out)
        results = _read_results(out)
        if report != "none" and not (out / "report.html").exists():  # killed between results and report
            _write_report(load_run(out), full=report == "full" or (report == "auto" and preset != "smoke"))
        return results

    task, model = build(exp, cfg)
    if cfg.train.init_from and not (out / "checkpoints" / "resume.safetensors").exists():  # the first start only:
        fresh = load_initial_weights(cfg.train.init_from, model, exclude=cfg.train.init_exclude)  # a resume loads its own
        if dist_info().is_main:
            loaded = {k: v for k, v in model.state_dict().items() if k not in fresh}
            ckpt.atomic_write_json(out / INIT_FILE, {"init_from": cfg.train.init_from, "fresh": fresh,
                                                     "loaded_checksum": ckpt.tensor_checksum(loaded)})
    if dist_info().is_main:
        exp.write_run_files(cfg, task, out)
    trainer = Trainer(model, task, cfg.train, seed=cfg.seed, run_dir=out, objective=exp.objective(cfg, task),
                      evaluate=exp.evaluator(cfg, task), progress=progress, restart=_restart_rule(exp, cfg, task))
    if resume:
        trainer.resume()
    result = trainer.fit()
    stages = _run_stages(out, exp, cfg, task, model, trainer, result, resume=resume, progress=progress)
    if trainer.dist.world > 1:
        teardown()
    if not trainer.dist.is_main:
        return {}
    results = finalize(out, exp, preset, cfg, task, model, result, stages)
    if report != "none":
        step = results.get("measured_step", results.get("selected_step"))
        step = results["steps"] if step is None else step
        _write_report(Run(out, exp, preset, cfg, task, model, step),
                      full=report == "full" or (report == "auto" and preset != "smoke"))
    return results


def load_initial_weights(source: str, model: torch.nn.Module, exclude: Sequence[str] = ()) -> list[str]:
    """``train.init_from``: load the weights a run starts from instead of its fresh draw (a
    fine-tuning, or a curriculum across experiments: a model trained on one task continues on
    another of the same shapes). ``source`` is a ``.safetensors`` checkpoint, or a run directory
    or ``zoo:NAME``, whose selected model (:func:`load_run`) is taken. The tensors whose names
    match a pattern of ``exclude`` (``train.init_exclude``, fnmatch) keep the fresh draw, e.g. the
    token embedding and unembedding when the vocabulary grows; every other tensor must be in the
    source with the model's shape. The optimizer and the step count start afresh; a restart
    (:func:`start_model`) loads the source again over its own fresh draw. Returns the
    names left fresh."""
    if source.endswith(".safetensors"):
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"train.init_from={source!r}: no such checkpoint file")
        tensors, meta = ckpt.load_tensors(path)
        state = ckpt.model_state(tensors)
    else:
        state, meta = load_run(source).model.state_dict(), {}
    own = ckpt.unwrap(model).state_dict()
    fresh = sorted(name for name in own if any(fnmatch.fnmatchcase(name, pattern) for pattern in exclude))
    unused = [p for p in exclude if not any(fnmatch.fnmatchcase(name, p) for name in own)]
    check(not unused, f"train.init_exclude: {', '.join(map(repr, unused))} names no tensor of this model")
    kept = {name: t for name, t in state.items() if name not in fresh}
    ckpt.check_state_fits(source, kept, {name: t for name, t in own.items() if name not in fresh}, meta)
    ckpt.unwrap(model).load_state_dict(kept, strict=False)
    if fresh:
        log.info("train.init_from=%s: %s keep their fresh draw", source, ", ".join(fresh))
    return fresh


def start_model(exp: Experiment, cfg: Any, task: Any) -> torch.nn.Module:
    """The weights a training start begins from: ``exp.build_model``'s fresh draw, with the
    weights of ``train.init_from`` loaded over it where that is set (every tensor but those
    ``train.init_exclude`` names, which keep the draw). Restarts call it too, so a restart of such
    a run starts from the same source with its own draw of the excluded tensors."""
    model = exp.build_model(cfg, task)
    train = getattr(cfg, "train", None)
    if getattr(train, "init_from", ""):
        load_initial_weights(train.init_from, model, exclude=train.init_exclude)
    return model


def _restart_rule(exp: Experiment, cfg: Any, task: Any):
    """The main phase's restart rule: a curriculum's (``curriculum.restart_steps``), else None."""
    curriculum = getattr(task, "curriculum", None)
    if curriculum is None or not curriculum.cfg.restart_steps:
        return None
    from tinyscope.runs.restarts import curriculum_restart

    return curriculum_restart(cfg.seed, curriculum, lambda: start_model(exp, cfg, task))


def _run_stages(out: Path, exp: Experiment, cfg: Any, task: Any, model: torch.nn.Module, main: Trainer,
                main_result: TrainResult, *, resume: bool, progress: bool) -> list[tuple[Stage, TrainResult]]:
    """Train the experiment's stages in order, each with its own Trainer in RUN/stages/<name>/,
    each from the previous phase's selected model (loaded into ``model``) and told that phase's
    result (``Stage.previous``); with ``resume`` a stage continues from its resume checkpoint (a
    finished one does nothing). Leaves the last stage's selected model in ``model``."""
    stages = exp.stages(cfg, task)
    done: list[tuple[Stage, TrainResult]] = []
    if not stages:
        return done
    _barrier(main)  # the other ranks read the checkpoints rank 0 wrote
    _load_selected(out, model)
    previous = main_result
    for stage in stages:
        stage_dir = out / "stages" / stage.name
        if main.dist.is_main:
            stage_dir.mkdir(parents=True, exist_ok=True)
            ckpt.atomic_write_json(stage_dir / "train.json", to_dict(stage.train))
        if stage.previous is not None:
            stage.previous(previous)
        if stage.prepare is not None:
            stage.prepare(model)
        trainer = Trainer(model, task if stage.task is None else stage.task, stage.train,
                          seed=cfg.seed if stage.seed is None else stage.seed, run_dir=stage_dir,
                          objective=exp.objective(cfg, task) if stage.objective is None else stage.objective,
                          evaluate=exp.evaluator(cfg, task) if stage.evaluate is None else stage.evaluate,
                          progress=progress)
        if resume:
            trainer.resume()
        previous = trainer.fit()
        done.append((stage, previous))
        _barrier(trainer)
        _load_selected(stage_dir, model)
    return done


def _barrier(trainer: Trainer) -> None:
    if trainer.dist.world > 1:
        torch.distributed.barrier()


def _resume_meta(path: Path) -> tuple[dict, dict]:
    """The tensors and trainer state of a resume checkpoint (checked as a file, not yet against
    a model)."""
    tensors, meta = ckpt.load_tensors(path)
    trainer = meta.get("trainer")
    step = trainer.get("step") if isinstance(trainer, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"checkpoint {path} is not a resume checkpoint (no trainer step in its metadata)")
    return tensors, trainer


def _load_resume_weights(path: Path, model: torch.nn.Module) -> int:
    """Load the model weights of a resume checkpoint; returns its step."""
    tensors, trainer = _resume_meta(path)
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    ckpt.check_model_state(path, state, model)
    model.load_state_dict(state)
    return trainer["step"]


def _load_selected(phase_dir: Path, model: torch.nn.Module) -> int | None:
    """Load the selected weights of the phase that wrote ``phase_dir`` (the run directory or a
    stage's): best.safetensors, else the last state; returns the step (None: no checkpoint).
    A missing best.safetensors of a phase that selected a step is said in a warning."""
    cdir = phase_dir / "checkpoints"
    if (cdir / "best.safetensors").exists():
        path = cdir / "best.safetensors"
        return ckpt.check_step(path, ckpt.load_model(path, model))
    if (cdir / "resume.safetensors").exists():
        step = _load_resume_weights(cdir / "resume.safetensors", model)
        selected = _resume_meta(cdir / "resume.safetensors")[1].get("selection", {}).get("best_step")
        if selected is not None:
            log.warning("%s is missing although the run selected step %s; using the last "
                        "checkpoint (step %d) instead", cdir / "best.safetensors", selected, step)
        return step
    return None


def _final_phase(path: Path, exp: Experiment, cfg: Any, task: Any) -> tuple[Path, str | None]:
    """The directory and stage name of the last phase of a run that holds a checkpoint (a run
    killed before its stages ends at an earlier phase); the main phase is ``(path, None)``."""
    return _last_trained_phase(path, [stage.name for stage in exp.stages(cfg, task)])


def _last_trained_phase(path: Path, stage_names: Sequence[str]) -> tuple[Path, str | None]:
    """``_final_phase`` given the stages' names (a stage that kept its start trains no step and
    writes no resume checkpoint: the phase that trained those weights answers)."""
    for name in reversed(stage_names):
        stage_dir = path / "stages" / name
        if (stage_dir / "checkpoints" / "resume.safetensors").exists():
            return stage_dir, name
    return path, None


INIT_FILE = "init_from.json"  # train.init_from's provenance: the source, the tensors left fresh, a checksum of the rest
RUN_FILES = ("config.json", "metrics.jsonl", "checkpoints", "results.json", "report.html", "stages", "figures",
             "error.txt", "traceback.txt", INIT_FILE)


def only_failed_start(out: Path) -> bool:
    """Whether the run in ``out`` holds nothing but a start that failed (or was killed) before
    it trained a step: no resume checkpoint, no results, no stages, no training record logged."""
    if any((out / p).exists() for p in ("results.json", "stages", "checkpoints/resume.safetensors")):
        return False
    try:
        return not any(r.get("split") == "train" for r in read_log(out / "metrics.jsonl"))
    except CheckpointError:
        return False


# train fields that choose how the machine computes, not what is computed (train/machine.py)
MACHINE_FIELDS = ("threads", "compile", "prefetch")


def same_training(saved: dict, wanted: dict) -> bool:
    """Whether a run saved with config ``saved`` may be resumed as ``wanted`` (both ``to_dict``):
    equal except for the machine choices (``train.threads``, ``compile``, ``prefetch``), and
    ``train.precision="auto"`` accepts whatever the saved run chose. A run started before
    ``train.precision`` existed (``amp`` or THEIA's ``bf16``, now mapped onto a concrete precision)
    thus resumes with today's presets; the resumed run keeps the precision it trained with."""
    def key(cfg: dict, other: dict) -> dict:
        cfg = json.loads(json.dumps(cfg))
        train, other_train = cfg.get("train"), other.get("train") or {}
        if isinstance(train, dict):
            for name in MACHINE_FIELDS:
                train.pop(name, None)
            if "auto" in (train.get("precision"), other_train.get("precision")):
                train.pop("precision", None)
        return cfg

    return key(saved, wanted) == key(wanted, saved)


def trained_as(out: Path, name: str, preset: str, seed: int, overrides: list[str] | None = None) -> bool:
    """Whether the run in ``out`` is the training that ``tinyscope run NAME --preset PRESET --seed
    SEED --set OVERRIDES`` would do today (:func:`same_training` of its config.json and the
    preset's current config). False for a run of an older preset: a finished run of it is not
    evidence for the preset as it is now."""
    exp = registry.get(name)
    try:
        s_exp, s_preset, s_cfg = read_config(out)
    except (CheckpointError, ConfigError):
        return False
    return (s_exp.name, s_preset) == (exp.name, preset) and \
        same_training(to_dict(s_cfg), to_dict(exp.config(preset, seed, list(overrides or []))))


def _prepare_run_dir(out: Path, exp: Experiment, preset: str, cfg: Any, resume: bool) -> str:
    """Write config.json of a new run, or check that a resumed run has the same config; returns
    "fresh" (a new run), "afresh" (a directory that held only a failed start, see
    :func:`only_failed_start`, cleared and started again, with or without ``resume``) or "resume"."""
    start = "fresh"
    if (out / "config.json").exists() and only_failed_start(out):
        log.warning("%s held only a start that failed before training; starting it afresh", out)
        for name in RUN_FILES:
            p = out / name
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        start = "afresh"
    if (out / "config.json").exists():
        if not resume:
            raise ConfigError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
        s_exp, s_preset, s_cfg = read_config(out)
        if (s_exp.name, s_preset) != (exp.name, preset) or not same_training(to_dict(s_cfg), to_dict(cfg)):
            raise ConfigError(f"{out} holds a run of {s_exp.name} --preset {s_preset} with another config; "
                              f"resume it with the same experiment, preset, seed and --set values")
        saved_train, train = getattr(s_cfg, "train", None), getattr(cfg, "train", None)
        if getattr(saved_train, "precision", "auto") != "auto" and getattr(train, "precision", None) == "auto":
            train.precision = saved_train.precision  # an old run resumes in the precision it trained in
        return "resume"
    out.mkdir(parents=True, exist_ok=True)
    ckpt.atomic_write_json(out / "config.json", _config_record(exp, preset, cfg))
    return start


def _write_report(run: "Run", full: bool) -> None:
    """RUN/report.html from the run in memory (no second build of the task)."""
    out = run.path
    try:
        from tinyscope.report.run_report import write_run_report

        write_run_report(run, full=full)
    except Exception as exc:  # the run itself is complete and saved; say so rather than fail it
        log.warning("could not write %s/report.html (%s: %s); `tinyscope viz %s` retries", out,
                    type(exc).__name__, exc, out)


def finalize(out: Path, exp: Experiment, preset: str, cfg: Any, task: Any, model: torch.nn.Module, result,
             stages: list[tuple[Stage, TrainResult]] = ()) -> dict:
    """Measure the run's selected model (the last stage's when there are stages) and write
    results.json: ``steps``, ``stopped`` and ``selected_step`` are the main phase's,
    ``wall_time`` the training time of every phase, and a run with stages lists each phase
    (the main one first) under ``phases`` and gives the checkpoint step of the model it measured
    (``load_run``'s step; a restart that kept its start holds the same weights at its step 0, so
    the step is the phase's that trained them) as ``measured_step``."""
    measured_step = _load_selected(_last_trained_phase(out, [s.name for s, _ in stages])[0], model)  # as load_run
    t0 = time.perf_counter()
    model.eval()
    metrics = exp.final_evaluation(cfg, task, model)
    results = {
        "experiment": exp.name, "preset": preset, "seed": cfg.seed,
        "steps": result.steps, "wall_time": round(result.wall_time + sum(r.wall_time for _, r in stages), 3),
        "stopped": result.stopped, "selected_step": result.best_step, "metrics": metrics,
        "eval_fingerprint": exp.eval_fingerprint(cfg, task),
        "eval_time": round(time.perf_counter() - t0, 3),
        "n_parameters": count_parameters(model),
        "machine": result.machine,  # precision, threads, compile as the Trainer resolved them
        "hardware": ledger.hardware(next(model.parameters(), torch.empty(0)).device),  # where it trained
    }
    record = json.loads((out / "config.json").read_text())  # the resolved choice beside the requested one
    ckpt.atomic_write_json(out / "config.json", {**record, "machine": result.machine})
    train = stages[-1][0].train if stages else getattr(cfg, "train", None)
    if getattr(train, "select_metric", None) is not None:  # how selected_step was chosen
        results["selection"] = {"metric": train.select_metric, "mode": train.select_mode,
                                "tie_break": train.tie_break_metric}
    if stages:
        results["measured_step"] = measured_step
        results["phases"] = [_phase_record(name, r) for name, r in [("main", result)] + [(s.name, r) for s, r in stages]]
    ckpt.atomic_write_json(out / "results.json", results)
    return results


def _phase_record(name: str, result: TrainResult) -> dict:
    return {"name": name, "steps": result.steps, "wall_time": round(result.wall_time, 3), "stopped": result.stopped,
            "machine": result.machine,
            "selected_step": result.best_step, "selected_metrics": result.best_metrics}


def load_run(path: str | Path, which: str | int = "best") -> Run:
    """Load a run directory with the weights of ``which``: "best" (the selected model: the last
    stage's when the experiment has stages, the model results.json measured), "last" (the last
    phase's last step), or a step number of the main phase. ``zoo:NAME`` loads a zoo entry."""
    path = resolve_run_path(path)
    exp, preset, cfg = read_config(path)
    task, model = build(exp, cfg)
    step, stage = None, None
    if which in ("best", "last"):
        phase_dir, stage = _final_phase(path, exp, cfg, task)
        resume = phase_dir / "checkpoints" / "resume.safetensors"
        if which == "best":
            step = _load_selected(phase_dir, model)
        elif resume.exists():
            step = _load_resume_weights(resume, model)
        if step is None and not resume.exists():
            raise CheckpointError(f"{path} has no checkpoint yet")
    else:
        step = int(which)
        ckpt.load_model(step_file(path, step), model)
    model.eval()
    return Run(path, exp, preset, cfg, task, model, step, stage)


def evaluate_run(path: str | Path, which: str | int = "best", seed: int | None = None, n: int | None = None) -> dict:
    """The final evaluation of a run's model: on the run's own evaluation set, or (``seed``) on a
    fresh one drawn from ``seed`` with ``n`` examples (None: the run's count), held out as the
    run's own is (:meth:`Experiment.fresh_eval_config`)."""
    run = load_run(path, which)
    exp, cfg, task = run.experiment, run.cfg, run.task
    if seed is not None:
        cfg = exp.fresh_eval_config(run.cfg, int(seed), n)
        task = exp.build_task(cfg)
    elif n is not None:
        raise ConfigError("--n sets the size of a fresh evaluation set: give --seed too")
    t0 = time.perf_counter()
    metrics = exp.final_evaluation(cfg, task, run.model)
    return {"experiment": exp.name, "run": str(run.path), "stage": run.stage, "step": run.step, "eval_seed": seed,
            "metrics": metrics, "eval_fingerprint": exp.eval_fingerprint(cfg, task),
            "eval_time": round(time.perf_counter() - t0, 3)}


def resolve_run_path(path: str | Path) -> Path:
    """A run directory; ``zoo:NAME`` names an entry of the zoo (:mod:`tinyscope.runs.zoo`)."""
    from tinyscope.runs.zoo import resolve

    return resolve(path)
