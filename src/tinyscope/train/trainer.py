"""The Trainer: AdamW (or Muon with AdamW, :mod:`.muon`), warmup + schedule, clipping, periodic
evaluation and checkpoints, best-checkpoint selection, stopping rules, exact resume, metrics.jsonl
and a progress bar.

Reproducibility: the data of step ``s`` is drawn with ``step_rng(seed, s)``, the learning rate
is a function of ``s``, and the optimizer and RNG states are checkpointed, so an interrupted
and resumed run performs the same floating-point operations as an uninterrupted one, and logs
the same records: the running sum of the training loss since the last log record is part of
the resume state. The same seed gives the same checkpoint bytes: wall-clock time is kept out of
``resume.safetensors``, in ``checkpoints/resume.clock.json`` beside it.

Divergence: a non-finite training loss or gradient norm (or a non-finite selection or stopping
metric) stops training with :class:`DivergedError` before the optimizer steps, so the last
checkpoint written is the last good state. ``metrics.jsonl`` holds valid JSON only: a non-finite
number is written as ``null`` and its key listed under ``"nonfinite"``.
"""
from __future__ import annotations

import copy
import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from tinyscope.errors import CheckpointError, ConfigError, TinyscopeError, check, check_choice
from tinyscope.tasks.base import step_rng
from tinyscope.train import checkpoint as ckpt
from tinyscope.train import machine
from tinyscope.train.distributed import DistInfo, setup
from tinyscope.train.jsonl import read_records
from tinyscope.train.loggers import LOGGERS, curve_logger
from tinyscope.train.optim import MuonAdamW, decay_groups, muon_param_groups
from tinyscope.train.prefetch import Prefetcher, PrefetchTrial
from tinyscope.train.schedule import lr_multiplier
from tinyscope.train.stopping import Selection, StopRules

log = logging.getLogger(__name__)

Objective = Callable[[torch.nn.Module, dict], torch.Tensor]
Evaluator = Callable[[torch.nn.Module], dict]

CLOCK_FILE = "resume.clock.json"  # {"step", "wall_time"} of resume.safetensors, kept out of its bytes


class DivergedError(TinyscopeError):
    """Training produced a non-finite loss, gradient or selection metric; the message names the
    step, and the run keeps its last checkpoint (written before the step that diverged)."""


def json_record(record: dict) -> dict:
    """``record`` with every non-finite float replaced by None and those keys listed, in order,
    under ``"nonfinite"`` (so that ``json.dumps(..., allow_nan=False)`` holds)."""
    bad = [k for k, v in record.items() if isinstance(v, float) and not math.isfinite(v)]
    if not bad:
        return record
    return {**{k: (None if k in bad else v) for k, v in record.items()}, "nonfinite": bad}


def read_log(path: Path) -> list[dict]:
    """The records of a metrics.jsonl (:func:`tinyscope.train.jsonl.read_records`: a torn last
    line is dropped); an unreadable line before it is a :class:`CheckpointError`."""
    return read_records(path, CheckpointError, require_step=True, hint="; remove the line or the file to go on")


@dataclass
class TrainConfig:
    steps: int = 1000
    batch_size: int = 8
    lr: float = 1e-3
    betas: list[float] | None = None           # None = (0.9, 0.999)
    optimizer: Literal["adamw", "muon"] = "adamw"  # muon: Muon on hidden matrices, AdamW (lr) on the rest
    muon_lr: float = 0.02                     # Muon's base rate, scheduled like lr
    muon_momentum: float = 0.95
    muon_bf16: bool = True                    # Newton-Schulz in bfloat16 (half the cost; as in Muon's reference)
    weight_decay: float = 0.01
    decay_params: Literal["all", "matrices"] = "all"  # what AdamW decays: every parameter, or ndim >= 2 only (no biases, norm gains)
    schedule: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    warmup_steps: int = 0
    warmup_start: float = 0.0                 # warmup starts at this fraction of lr
    min_lr_ratio: float = 0.0                 # cosine / linear / wsd end point
    decay_fraction: float = 0.2               # wsd: the final fraction of steps that decays
    grad_clip: float = 1.0                    # 0 = off
    log_every: int = 50
    eval_every: int = 200
    eval_at_start: bool = True
    checkpoint_every: int = 100               # 0 = only the final / resume checkpoint
    keep_checkpoints: bool = True             # keep every step_*.safetensors (training movies)
    select_metric: str | None = None          # None: the last checkpoint is the selected one
    select_mode: Literal["min", "max"] = "min"
    tie_break_metric: str | None = None       # compared when select_metric ties
    tie_break_mode: Literal["min", "max"] = "min"
    stop_metric: str | None = None            # stop once it meets stop_threshold ...
    stop_threshold: float = 0.0
    stop_mode: Literal["min", "max"] = "min"  # "min": value <= threshold; "max": value >= threshold
    stop_consecutive: int = 1                 # ... on this many consecutive evaluations
    patience: int = 0                         # evaluations without improvement of select_metric; 0 = off
    min_delta: float = 0.0
    gate_metric: str | None = None            # a try whose best gate_metric so far ...
    gate_mode: Literal["min", "max"] = "max"  # ... (max: higher is better) ...
    gate_threshold: float = 0.0               # ... misses gate_threshold ...
    gate_step: int = 0                        # ... at the first evaluation from this step on stops; 0 = off
    device: str = "auto"                      # auto | cpu | cuda | cuda:N
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # bf16: autocast of the training forward (train/machine.py)
    threads: int | Literal["auto"] = "auto"   # torch intra-op threads: N, 0 = leave as is, auto = the fastest (machine.py)
    compile: bool = False                     # torch.compile the training forward (eager, with one warning, if it fails)
    prefetch: bool | Literal["auto"] = "auto"  # draw the next batch on a background thread (same bytes); auto: where it is faster
    amp: bool | None = None                   # before precision: True = bf16 on CUDA only; read from old config.json
    logger: Literal["none", "tensorboard", "mlflow"] = "none"  # also mirror metrics.jsonl (train/loggers.py)
    mlflow_uri: str = ""                      # logger=mlflow: tracking URI ("": $MLFLOW_TRACKING_URI, else RUN/mlflow.db)
    init_from: str = ""                       # start from these weights, not a fresh draw: a run directory or zoo:NAME
    #                                           (its selected model) or a .safetensors checkpoint (runs/rundir.py)
    init_exclude: list[str] = field(default_factory=list)  # tensor names (fnmatch patterns) init_from leaves fresh

    def __post_init__(self):
        check(self.steps >= 1, f"train.steps={self.steps} must be >= 1")
        check(self.batch_size >= 1, f"train.batch_size={self.batch_size} must be >= 1")
        check(self.lr > 0 and math.isfinite(self.lr), f"train.lr={self.lr} must be a positive number")
        check(self.weight_decay >= 0, f"train.weight_decay={self.weight_decay} must be >= 0")
        check_choice("train.schedule", self.schedule, ("constant", "cosine", "linear", "wsd"))
        check_choice("train.optimizer", self.optimizer, ("adamw", "muon"))
        check_choice("train.decay_params", self.decay_params, ("all", "matrices"))
        check(self.decay_params == "all" or self.optimizer == "adamw",
              f"train.decay_params={self.decay_params!r} applies to train.optimizer=adamw only (Muon decays every parameter)")
        check(self.muon_lr > 0 and math.isfinite(self.muon_lr), f"train.muon_lr={self.muon_lr} must be a positive number")
        check(0 <= self.muon_momentum < 1, f"train.muon_momentum={self.muon_momentum} must lie in [0, 1)")
        check(0 < self.decay_fraction <= 1, f"train.decay_fraction={self.decay_fraction} must lie in (0, 1]")
        check(self.warmup_steps >= 0, f"train.warmup_steps={self.warmup_steps} must be >= 0")
        check(0 <= self.warmup_start <= 1, f"train.warmup_start={self.warmup_start} must lie in [0, 1]")
        check(0 <= self.min_lr_ratio <= 1, f"train.min_lr_ratio={self.min_lr_ratio} must lie in [0, 1]")
        check(self.grad_clip >= 0, f"train.grad_clip={self.grad_clip} must be >= 0 (0 turns clipping off)")
        check(self.log_every >= 1, f"train.log_every={self.log_every} must be >= 1")
        check(self.eval_every >= 1, f"train.eval_every={self.eval_every} must be >= 1")
        check(self.checkpoint_every >= 0, f"train.checkpoint_every={self.checkpoint_every} must be >= 0")
        check(self.stop_consecutive >= 1, f"train.stop_consecutive={self.stop_consecutive} must be >= 1")
        check(self.patience >= 0, f"train.patience={self.patience} must be >= 0")
        check(self.gate_step >= 0, f"train.gate_step={self.gate_step} must be >= 0 (0 turns the gate off)")
        check(not self.gate_step or self.gate_metric is not None,
              f"train.gate_step={self.gate_step} needs train.gate_metric, the metric the gate judges")
        check(math.isfinite(self.gate_threshold), f"train.gate_threshold={self.gate_threshold} must be a finite number")
        self._normalize_machine_fields()
        check(math.isfinite(self.stop_threshold), f"train.stop_threshold={self.stop_threshold} must be a finite number")
        check(math.isfinite(self.min_delta) and self.min_delta >= 0,
              f"train.min_delta={self.min_delta} must be a finite number >= 0")
        check(math.isfinite(self.grad_clip), f"train.grad_clip={self.grad_clip} must be finite (0 turns clipping off)")
        check_choice("train.logger", self.logger, LOGGERS)
        if self.betas is not None:
            check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
                  f"train.betas={self.betas} must be two numbers in [0, 1)")


    def _normalize_machine_fields(self) -> None:
        """``threads`` as an int or "auto", ``prefetch`` as a bool or "auto"; the old ``amp`` flag mapped onto ``precision`` (amp=True
        meant bf16 autocast on CUDA and fp32 on a CPU, amp=False fp32 everywhere)."""
        threads = self.threads.strip() if isinstance(self.threads, str) else self.threads
        if isinstance(threads, str) and threads != "auto":
            try:
                threads = int(threads)
            except ValueError:
                threads = None
        if threads is None or isinstance(threads, bool) or not (threads == "auto" or isinstance(threads, int)):
            raise ConfigError(f"train.threads={self.threads!r} must be auto or an integer >= 0 (0 leaves torch's count)")
        check(threads == "auto" or threads >= 0, f"train.threads={threads} must be auto or an integer >= 0")
        self.threads = threads
        prefetch = self.prefetch.strip().lower() if isinstance(self.prefetch, str) else self.prefetch
        prefetch = {"true": True, "false": False}.get(prefetch, prefetch) if isinstance(prefetch, str) else prefetch
        if not (prefetch == "auto" or isinstance(prefetch, bool)):
            raise ConfigError(f"train.prefetch={self.prefetch!r} must be auto, true or false")
        self.prefetch = prefetch
        check_choice("train.precision", self.precision, ("auto", "fp32", "bf16"))
        if self.amp is not None:
            on_cuda = self.device.startswith("cuda") or (self.device == "auto" and torch.cuda.is_available())
            self.precision = "bf16" if self.amp and on_cuda else "fp32"
            self.amp = None


def masked_next_token_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """Mean cross-entropy over positions where ``loss_mask`` is True (the default objective)."""
    logits = model(batch["tokens"])  # (B, T, V)
    mask = batch["loss_mask"]  # (B, T)
    return F.cross_entropy(logits[mask].float(), batch["targets"][mask])


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device={name!r} but CUDA is not available; use cpu or auto")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"train.device={name!r} is not a device; use auto, cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"train.device={name!r} is not supported; use auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError(f"train.device={name!r} but this machine has {torch.cuda.device_count()} CUDA devices")
    return device


@dataclass
class TrainResult:
    steps: int
    wall_time: float
    stopped: str
    best_step: int | None
    best_metrics: dict
    last_metrics: dict
    machine: dict = field(default_factory=dict)  # precision, threads, compile as resolved (train/machine.py)


class Trainer:
    """Trains ``model`` on ``task`` with ``cfg``; writes to ``run_dir`` when given (rank 0 only)."""

    def __init__(self, model: torch.nn.Module, task: Any, cfg: TrainConfig, *, seed: int,
                 run_dir: str | Path | None = None, objective: Objective | None = None,
                 evaluate: Evaluator | None = None, progress: bool = True,
                 restart: Callable[[torch.nn.Module], bool] | None = None):
        """``restart(model)``, called after each evaluation, may draw the model's weights afresh
        in place and return True; the optimizer then starts with fresh state (moments, momenta)
        for the new weights (a curriculum's restarts, :mod:`tinyscope.runs.restarts`)."""
        self.cfg, self.seed = cfg, int(seed)
        self.restart_fn = restart
        self.device = resolve_device(cfg.device)
        self.dist: DistInfo = setup(self.device)
        if self.dist.world > 1 and self.device.type == "cuda":
            self.device = torch.device(f"cuda:{self.dist.local_rank}")
        check(cfg.batch_size % self.dist.world == 0,
              f"train.batch_size={cfg.batch_size} must be divisible by the {self.dist.world} processes")
        self.model = model.to(self.device)
        self.task = task
        self.sample = task.sample
        self.objective = objective or masked_next_token_loss
        self.evaluate_fn = evaluate
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self.opt = self._optimizer(self.model)
        self.train_model = self.model
        if self.dist.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.train_model = DistributedDataParallel(self.model)
        self.selection = Selection(cfg.select_metric, cfg.select_mode, cfg.tie_break_metric, cfg.tie_break_mode)
        self.stop_rules = StopRules(cfg.stop_metric, cfg.stop_threshold, cfg.stop_mode, cfg.stop_consecutive,
                                    cfg.select_metric if cfg.patience else None, cfg.select_mode, cfg.patience, cfg.min_delta,
                                    cfg.gate_metric, cfg.gate_mode, cfg.gate_step, cfg.gate_threshold)
        self.step = 0
        self.tokens_seen = 0
        self.wall_time = 0.0
        self._t0: float | None = None  # perf_counter() at training time 0, set by fit()
        self.loss_sum, self.loss_count = 0.0, 0  # training loss since the last log record
        self.saved_step: int | None = None  # the step of the last resume checkpoint written or loaded
        self.last_metrics: dict = {}
        self.machine: dict = {}  # the resolved precision, threads and compile (fit's first steps choose them)
        self.prefetcher = Prefetcher(self._draw, enabled=cfg.prefetch is True)
        self.prefetch_trial: PrefetchTrial | None = None  # train.prefetch=auto's timed first steps
        self.curves = curve_logger(cfg.logger, self.run_dir if self.writes else None, cfg.mlflow_uri)

    def _optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        cfg = self.cfg
        betas = tuple(cfg.betas) if cfg.betas else (0.9, 0.999)
        if cfg.optimizer == "muon":
            groups = muon_param_groups(model, muon_lr=cfg.muon_lr, adam_lr=cfg.lr)
            return MuonAdamW(groups, momentum=cfg.muon_momentum, betas=betas, weight_decay=cfg.weight_decay,
                             ns_bf16=self.muon_ns_bf16)
        # a model may give some parameters their own rate and weight decay (groups with base_lr)
        if hasattr(model, "optimizer_groups"):
            if cfg.decay_params != "all":
                raise ConfigError(f"train.decay_params={cfg.decay_params!r}: {type(model).__name__} chooses its own weight-decay "
                                  f"groups; leave train.decay_params at 'all'")
            groups = model.optimizer_groups(cfg.lr, cfg.weight_decay)
        elif cfg.decay_params == "matrices":
            groups = decay_groups(model, cfg.weight_decay)
        else:
            groups = model.parameters()
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=betas, weight_decay=cfg.weight_decay)

    @property
    def muon_ns_bf16(self) -> bool:
        """Muon's Newton-Schulz in bf16 when ``train.muon_bf16`` asks for it, except on a CPU
        without native bf16 arithmetic (there it is many times slower than fp32)."""
        return self.cfg.muon_bf16 and (self.device.type != "cpu" or machine.bf16_native())

    # ----------------------------------------------------------------- files
    @property
    def writes(self) -> bool:
        return self.run_dir is not None and self.dist.is_main

    @property
    def ckpt_dir(self) -> Path:
        assert self.run_dir is not None
        return self.run_dir / "checkpoints"

    def _log(self, record: dict) -> None:
        if self.writes:
            record = json_record(record)
            line = json.dumps(record, allow_nan=False) + "\n"
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(line)  # one write: a kill leaves at most a torn last line (read_log drops it)
            if self.curves is not None:
                self.curves.log({k: v for k, v in record.items() if v is not None and k != "nonfinite"})

    def _trainer_state(self) -> dict:
        state = {"step": self.step, "tokens_seen": self.tokens_seen, "seed": self.seed, "machine": self.machine,
                 "selection": self.selection.state(), "stop": self.stop_rules.state(),
                 "last_metrics": self.last_metrics, "loss_sum": self.loss_sum, "loss_count": self.loss_count}
        if hasattr(self.task, "state_dict"):  # a stateful task (e.g. a curriculum) resumes with the run
            state["task_state"] = self.task.state_dict()
        return state

    def _check_finite_model(self) -> None:
        """Refuse to save weights that are not finite (the step before diverged without a
        non-finite loss or gradient): the last checkpoint stays the last good one. Every
        process checks (the weights are the same on all), so all of them stop together."""
        for name, p in ckpt.unwrap(self.model).state_dict().items():
            if p.is_floating_point() and not bool(torch.isfinite(p).all()):
                self._diverged(f"the weights ({name}) are not finite", self.step)

    def _save_model(self, name: str, **metadata: Any) -> None:
        """Save the weights as checkpoints/``name`` (rank 0) once every process has checked that
        they are finite."""
        self._check_finite_model()
        if self.writes:
            ckpt.save_model(self.ckpt_dir / name, self.model, **metadata)

    def _save_checkpoint(self) -> None:
        self._check_finite_model()
        if not self.writes:
            return
        if self.cfg.checkpoint_every and self.step % self.cfg.checkpoint_every == 0:
            ckpt.save_model(self.ckpt_dir / ckpt.step_name(self.step), self.model, step=self.step)
        ckpt.save_training_state(self.ckpt_dir / "resume.safetensors", self.model, self.opt, self._trainer_state())
        ckpt.atomic_write_json(self.ckpt_dir / CLOCK_FILE, {"step": self.step, "wall_time": round(self.wall_time, 3)})
        self.saved_step = self.step

    def _diverged(self, what: str, step: int) -> None:
        if self.curves is not None:
            self.curves.close("FAILED")
        if self.saved_step is not None:
            kept = f"the run keeps its last good checkpoint, step {self.saved_step}"
        else:
            kept = "no resume checkpoint had been written yet"
        raise DivergedError(f"training diverged at step {step}: {what}; stopped ({kept}); "
                            f"lower train.lr (now {self.cfg.lr:g}){'' if self.cfg.grad_clip else ' or set train.grad_clip'}")

    def _start_over(self) -> None:
        """A resume with no resume checkpoint starts at step 0: clear what an earlier start
        logged and saved, so that the log holds each step once."""
        if not self.writes:
            return
        path = self.run_dir / "metrics.jsonl"
        old = [p for p in [path, self.ckpt_dir / "best.safetensors", self.ckpt_dir / CLOCK_FILE] if p.exists()]
        old += sorted(self.ckpt_dir.glob("step_*.safetensors")) if self.ckpt_dir.is_dir() else []
        if not old:
            return
        for p in old:
            p.unlink()
        log.warning("%s has no resume checkpoint yet: starting over from step 0 (its log and step checkpoints "
                    "were cleared)", self.run_dir)

    def _check_state(self, path: Path, state: dict) -> None:
        """Raise :class:`CheckpointError` unless the trainer state of a resume checkpoint is
        complete and fits this run."""
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise CheckpointError(f"checkpoint {path} has bad trainer metadata: {what}; "
                                      f"restore it from a copy or remove it to start over")

        def is_int(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        for key in ("step", "tokens_seen", "seed", "selection", "stop"):
            need(key in state, f"no {key!r}")
        need(is_int(state["step"]) and 0 <= state["step"] <= self.cfg.steps,
             f"step {state['step']!r} is not in [0, train.steps={self.cfg.steps}]")
        need(is_int(state["tokens_seen"]) and state["tokens_seen"] >= 0, f"tokens_seen {state['tokens_seen']!r}")
        need(state["seed"] == self.seed, f"seed {state['seed']!r}, this run's is {self.seed}")
        sel = state["selection"]
        need(isinstance(sel, dict) and {"best_step", "best_metrics"} <= set(sel) and isinstance(sel["best_metrics"], dict)
             and (sel["best_step"] is None or (is_int(sel["best_step"]) and 0 <= sel["best_step"] <= state["step"])),
             f"selection {sel!r}")
        stop = state["stop"]
        need(isinstance(stop, dict) and {"hits", "since_improvement", "best", "reason"} <= set(stop), f"stop {stop!r}")
        need(isinstance(state.get("last_metrics", {}), dict), "last_metrics is not a dict")
        need(is_int(state.get("loss_count", 0)) and state.get("loss_count", 0) >= 0
             and isinstance(state.get("loss_sum", 0.0), (int, float)), "loss_sum / loss_count")

    def _check_best(self, best_step: int | None) -> None:
        """best.safetensors must fit the model and be the resumed selection's (or one written
        after the resume checkpoint, which training will write again)."""
        path = self.ckpt_dir / "best.safetensors"
        if not path.exists():
            return
        tensors, meta = ckpt.load_tensors(path)
        ckpt.check_model_state(path, ckpt.model_state(tensors), self.model, meta)
        step = ckpt.check_step(path, meta)
        if step != best_step and (step is None or step <= self.step):
            raise CheckpointError(f"checkpoint {path} holds step {step}, but the resume checkpoint selected step "
                                  f"{best_step}; restore it from a copy or remove it")

    def resume(self) -> bool:
        """Restore the latest resume checkpoint if there is one; returns whether it did. Without
        one, training starts at step 0 and what an earlier start wrote is cleared. Every file the
        run will read again is checked first: a bad one raises :class:`CheckpointError` and no
        file is changed (the Trainer is then not to be used)."""
        if self.run_dir is None:
            return False
        path = self.ckpt_dir / "resume.safetensors"
        if not path.exists():
            self._start_over()
            return False
        state = ckpt.load_training_state(path, self.model, self.opt)
        self._check_state(path, state)
        self.step = self.saved_step = state["step"]
        self._check_best(state["selection"]["best_step"])
        log_path = self.run_dir / "metrics.jsonl"
        records = read_log(log_path) if self.writes else []
        self.tokens_seen, self.last_metrics = state["tokens_seen"], state.get("last_metrics", {})
        self.loss_sum, self.loss_count = float(state.get("loss_sum", 0.0)), int(state.get("loss_count", 0))
        self.wall_time = self._resumed_wall_time(state)
        self.selection.load(state["selection"])
        self.stop_rules.load(state["stop"])
        saved = state.get("machine")
        if isinstance(saved, dict) and saved.get("precision") in ("fp32", "bf16"):
            self.machine = dict(saved)  # the resumed run keeps the precision (and threads) it trained with
        if "task_state" in state and hasattr(self.task, "load_state_dict"):
            self.task.load_state_dict(state["task_state"])
        if self.writes:  # forget what was logged after the checkpoint: it will be logged again
            keep = [json.dumps(json_record(r), allow_nan=False) for r in records if r["step"] <= self.step]
            ckpt.atomic_write_bytes(log_path, ("\n".join(keep) + "\n" if keep else "").encode())
            for f in self.ckpt_dir.glob("step_*.safetensors"):
                if int(f.stem.split("_")[1]) > self.step:
                    f.unlink()
        log.info("resumed at step %d", self.step)
        return True

    def _resumed_wall_time(self, state: dict) -> float:
        """Training time up to the resume checkpoint: its clock file, or (a checkpoint written
        before the clock moved out of it) its trainer state; 0 when neither says."""
        try:
            clock = json.loads((self.ckpt_dir / CLOCK_FILE).read_text())
            if clock.get("step") == self.step:
                return float(clock["wall_time"])
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass
        value = state.get("wall_time", 0.0)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0

    # ----------------------------------------------------------------- loop
    def _draw(self, step: int) -> tuple[dict, int]:
        """The tensors of step ``step``'s batch (this process's share, on the CPU) and its
        token count; the same bytes whichever thread draws it."""
        batch = self.sample(step_rng(self.seed, step), self.cfg.batch_size)
        if self.dist.world > 1:
            batch = batch.select(slice(self.dist.rank, None, self.dist.world))
        return batch.to_torch("cpu"), int(batch.tokens.size)

    def _batch(self, step: int) -> dict:
        tensors, n_tokens = self.prefetcher.get(step)
        self.tokens_seen += n_tokens * self.dist.world
        if self.device.type != "cpu":
            tensors = {k: v.to(self.device) for k, v in tensors.items()}
        return tensors

    def _boundary(self, step: int) -> bool:
        """Whether the end of step ``step`` (1-based) evaluates or checkpoints (reads the task)."""
        cfg = self.cfg
        return (step % cfg.eval_every == 0 or step >= cfg.steps
                or bool(cfg.checkpoint_every and step % cfg.checkpoint_every == 0))

    def _loss(self, model: torch.nn.Module, batch: dict, precision: str) -> torch.Tensor:
        """The objective on ``batch``, its forward under bf16 autocast when ``precision`` is bf16."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = self.objective(model, batch)
        return loss

    def _backward(self, batch: dict) -> float:
        """Forward and backward of one batch through ``train_model``; returns the loss (a
        non-finite one stops training before the gradients are touched)."""
        loss = self._loss(self.train_model, batch, self.machine["precision"])
        value = float(loss.detach())
        if self.dist.world == 1 and not math.isfinite(value):  # (several processes: checked together in fit)
            self._log({"step": self.step + 1, "split": "train", "loss": value, "diverged": True})
            self._diverged(f"the training loss is {value}", self.step + 1)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        return value

    def _first_compiled_backward(self, batch: dict) -> float:
        """:meth:`_backward` through the compiled model; where compiling fails, one warning and
        the eager model from then on (the failed attempt changed no weight)."""
        try:
            return self._backward(batch)
        except TinyscopeError:
            raise
        except Exception as exc:  # noqa: BLE001 - any compiler failure falls back to eager
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            log.warning("train.compile: torch.compile failed (%s: %s); training without it", type(exc).__name__, first)
            self.train_model = self._eager_model
            self.machine["compile"] = False
            self.opt.zero_grad(set_to_none=True)
            return self._backward(batch)

    # ----------------------------------------------------------------- machine
    def _choose_machine(self) -> None:
        """Resolve ``train.precision`` and ``train.threads`` (:mod:`tinyscope.train.machine`),
        timing warm-up steps on a copy of the model where there is a choice, set the threads,
        and compile the training model when ``train.compile`` asks. A resumed run keeps the
        choice saved with its checkpoint."""
        cfg, world = self.cfg, self.dist.world
        if not self.machine:
            precs = machine.precision_candidates(cfg.precision, self.device, cfg.steps, world)
            if self.device.type == "cpu":
                counts = machine.thread_candidates(cfg.threads, cfg.steps, world)
            else:
                counts = (cfg.threads if isinstance(cfg.threads, int) and cfg.threads > 0 else torch.get_num_threads(),)
            if len(precs) * len(counts) > 1:
                precision, threads = self._time_warmup(precs, counts)
            else:
                precision, threads = precs[0], counts[0]
            self.machine = {"precision": precision, "threads": int(threads)}
        torch.set_num_threads(int(self.machine["threads"]))
        self.machine["compile"] = bool(cfg.compile)
        self._choose_prefetch()
        if cfg.optimizer == "muon":
            self.machine["muon_ns"] = "bf16" if self.muon_ns_bf16 else "fp32"
        self._eager_model = self.train_model
        self._compile_unchecked = False
        if cfg.compile:
            self.train_model = torch.compile(self.train_model)
            self._compile_unchecked = True
        log.info("training with %s", ", ".join(f"{k} {v}" for k, v in self.machine.items()))

    def _choose_prefetch(self) -> None:
        """``train.prefetch``: true or false as asked; ``auto`` keeps a resumed run's choice, is off
        for a run that does not measure (:func:`machine.measures`), and is otherwise decided by a
        :class:`PrefetchTrial` over the first training steps (``machine["prefetch"]`` is set when
        it ends)."""
        cfg = self.cfg
        if cfg.prefetch != "auto":
            self.machine["prefetch"] = bool(cfg.prefetch)
        elif "prefetch" not in self.machine:
            if machine.measures(cfg.steps - self.step, self.dist.world):
                self.prefetch_trial = PrefetchTrial()
            else:
                self.machine["prefetch"] = False
        self.prefetcher.enabled = bool(self.machine.get("prefetch", False))

    def _trial_step(self, seconds: float, counted: bool) -> None:
        """Record one timed step of the prefetch trial; at its end, fix the choice."""
        trial = self.prefetch_trial
        trial.record(seconds, counted)
        if trial.done:
            self.machine["prefetch"] = trial.choice()
            self.prefetch_trial = None
            log.info("train.prefetch=auto: %s (fastest block: %s per step)", "on" if self.machine["prefetch"] else "off",
                     ", ".join(f"{'on' if k else 'off'} {min(v) * 1e3:.1f} ms" for k, v in trial.times.items() if v))
            self.prefetcher.enabled = self.machine["prefetch"]
        else:
            self.prefetcher.enabled = trial.prefetching

    def _time_warmup(self, precs: tuple[str, ...], counts: tuple[int, ...], rounds: int = 3) -> tuple[str, int]:
        """The fastest (precision, threads) over ``rounds`` interleaved timed steps each on a copy
        of the model and optimizer (step 0's batch), preferring fewer threads unless more are
        :data:`machine.CLEAR_WIN` faster, and fp32 unless bf16 is :data:`machine.PRECISION_CLEAR_WIN`
        faster. A thread count whose gradients differ in a
        bit from one thread's (torch's CPU reductions split by thread, e.g. layer-norm weight
        gradients and long matmuls) is not used, so the choice never changes the result. The
        RNG, the task's state and the real model are left as they were."""
        rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None
        task_state = copy.deepcopy(self.task.state_dict()) if hasattr(self.task, "state_dict") else None
        before = torch.get_num_threads()
        combos = [(p, n) for p in precs for n in counts]
        try:
            model = copy.deepcopy(self.model).train()
            opt = self._optimizer(model)
            batch = {k: v.to(self.device) for k, v in self._draw(0)[0].items()}
            start = {k: v.clone() for k, v in model.state_dict().items()}
            grads, times = {}, {c: [] for c in combos}
            for p, n in combos:  # untimed first step of each: warms the kernels, gives the gradients
                torch.set_num_threads(n)
                model.load_state_dict(start)
                model.zero_grad(set_to_none=True)
                self._loss(model, batch, p).backward()
                grads[(p, n)] = [q.grad.clone() for q in model.parameters() if q.grad is not None]
            for _ in range(rounds):
                for p, n in combos:
                    torch.set_num_threads(n)
                    t0 = time.perf_counter()
                    opt.zero_grad(set_to_none=True)
                    self._loss(model, batch, p).backward()
                    opt.step()
                    times[(p, n)].append(time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be copied or timed: the plain choice
            log.info("could not time warm-up steps (%s: %s); using %s", type(exc).__name__, exc, combos[0])
            return combos[0]
        finally:
            torch.set_num_threads(before)
            torch.set_rng_state(rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
            if task_state is not None:
                self.task.load_state_dict(task_state)
        same = [c for c in combos if all(torch.equal(a, b) for a, b in zip(grads[c], grads[(c[0], counts[0])]))]
        if len(same) < len(combos):
            log.info("thread counts %s change the gradient bits of this model; not used",
                     sorted({n for _, n in set(combos) - set(same)}))
        by_precision = [machine.fastest(times, [c for c in same if c[0] == p]) for p in precs if
                        any(c[0] == p for c in same)]  # the thread count within each precision, then the precision
        choice = machine.fastest(times, by_precision, margin=machine.PRECISION_CLEAR_WIN)
        self.warmup_times = {f"{p}x{n}": [round(t, 6) for t in times[(p, n)]] for p, n in combos}
        return choice

    def _evaluate(self) -> dict:
        if self.evaluate_fn is None:
            return {}
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            metrics = {k: float(v) for k, v in self.evaluate_fn(self.model).items()}
        self.model.train(was_training)
        return metrics

    def _on_eval(self, metrics: dict) -> str | None:
        self.last_metrics = metrics
        clock = {} if self._t0 is None or "time" in metrics else {"time": round(time.perf_counter() - self._t0, 3)}
        self._log({"step": self.step, "split": "eval", **metrics, **clock})
        for name in (self.cfg.select_metric, self.cfg.tie_break_metric, self.cfg.stop_metric, self.cfg.gate_metric):
            if name is not None and name in metrics and not math.isfinite(metrics[name]):
                self._diverged(f"the evaluation gave {name}={metrics[name]}", self.step)
        if self.selection.update(self.step, metrics):
            self._save_model("best.safetensors", step=self.step, metrics=metrics)
        self.stop_rules.update(metrics)
        if self.restart_fn is not None and self.restart_fn(self.model):
            self.opt = self._optimizer(self.model)
            log.info("step %d: the weights were drawn afresh; the optimizer starts over", self.step)
        return self.stop_rules.gate(self.step)

    def _grad_norm(self) -> torch.Tensor:
        """The total gradient norm, clipped to train.grad_clip when that is set (the norm
        before clipping is returned either way)."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        if self.cfg.grad_clip > 0:
            return torch.nn.utils.clip_grad_norm_(params, self.cfg.grad_clip)
        if not params:
            return torch.zeros(())
        return torch.nn.utils.get_total_norm([p.grad for p in params])

    def fit(self) -> TrainResult:
        if self.writes:
            self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = time.perf_counter() - self.wall_time  # training time 0, resumes included
        self.prepare()
        try:
            return self._fit()
        finally:
            self.prefetcher.close()

    def prepare(self) -> None:
        """Resolve precision and threads and set up compilation (:meth:`fit` does it first; a
        benchmark calls it before :meth:`train_step`)."""
        if not hasattr(self, "_eager_model"):
            self._choose_machine()

    def train_step(self) -> float:
        """One optimizer step at ``self.step`` (then incremented): the scheduled rate, the batch
        (the next one drawn ahead unless the step ends at an evaluation or a checkpoint), forward
        and backward, the divergence checks and clipping. Returns the rate multiplier."""
        cfg = self.cfg
        t_start = time.perf_counter() if self.prefetch_trial is not None else 0.0
        mult = lr_multiplier(self.step, total=cfg.steps, warmup_steps=cfg.warmup_steps,
                             warmup_start=cfg.warmup_start, kind=cfg.schedule, min_ratio=cfg.min_lr_ratio,
                             decay_fraction=cfg.decay_fraction)
        for group in self.opt.param_groups:
            group["lr"] = group.get("base_lr", cfg.lr) * mult
        batch = self._batch(self.step)
        if not self._boundary(self.step + 1):  # nothing reads the task before the next step
            self.prefetcher.ahead(self.step + 1)
        if self._compile_unchecked:
            value = self._first_compiled_backward(batch)
            self._compile_unchecked = False
        else:
            value = self._backward(batch)
        norm = float(self._grad_norm())
        if self.dist.world > 1:  # one process's loss: every process stops, or none does
            flag = torch.tensor([0.0 if math.isfinite(value) else 1.0], device=self.device)
            torch.distributed.all_reduce(flag)
            if float(flag) > 0:
                self._log({"step": self.step + 1, "split": "train", "loss": None, "diverged": True})
                self._diverged("the training loss is not finite", self.step + 1)
        if not math.isfinite(norm):
            self._log({"step": self.step + 1, "split": "train", "loss": value, "grad_norm": norm, "diverged": True})
            self._diverged(f"the gradient norm is {norm}", self.step + 1)
        self.opt.step()
        self.step += 1
        self.loss_sum += value
        self.loss_count += 1
        if self.prefetch_trial is not None:
            self._trial_step(time.perf_counter() - t_start, counted=not self._boundary(self.step))
        return mult

    def _fit(self) -> TrainResult:
        cfg, t0 = self.cfg, self._t0
        if self.step == 0 and cfg.eval_at_start and self.evaluate_fn is not None:
            self._on_eval(self._evaluate())
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not (self.progress and sys.stderr.isatty()),
                   desc="train", dynamic_ncols=True, leave=False)
        self.model.train()
        if self.step == 0 and cfg.checkpoint_every:
            self._save_model("step_000000.safetensors", step=0)
        while self.step < cfg.steps and not self.stop_rules.stopped:
            mult = self.train_step()
            bar.update(1)
            if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                self.wall_time = time.perf_counter() - t0
                running = self.loss_sum
                if self.dist.world > 1:  # log the mean over ranks: the loss of the global batch
                    total = torch.tensor([running], dtype=torch.float64, device=self.device)
                    torch.distributed.all_reduce(total)
                    running = float(total) / self.dist.world
                self._log({"step": self.step, "split": "train", "loss": running / self.loss_count,
                           "lr": cfg.lr * mult, "tokens": self.tokens_seen, "time": round(self.wall_time, 3)})
                bar.set_postfix(loss=f"{running / self.loss_count:.4f}")
                self.loss_sum, self.loss_count = 0.0, 0
            if self.step % cfg.eval_every == 0 or self.step == cfg.steps:
                self._on_eval(self._evaluate())
            if (cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0) or self.step == cfg.steps \
                    or self.stop_rules.stopped:
                self.wall_time = time.perf_counter() - t0
                self._save_checkpoint()
            if self.stop_rules.stopped:
                break
        bar.close()
        if self.curves is not None:
            self.curves.close()
        self.wall_time = time.perf_counter() - t0
        stopped = self.stop_rules.reason if self.stop_rules.stopped else "max_steps"
        return TrainResult(self.step, self.wall_time, stopped, self.selection.best_step,
                           self.selection.best_metrics, self.last_metrics, dict(self.machine))
