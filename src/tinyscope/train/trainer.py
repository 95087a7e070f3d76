"""The Trainer: AdamW (or Muon with AdamW, :mod:`.muon`), warmup + schedule, clipping, periodic
evaluation and checkpoints, best-checkpoint selection, stopping rules, exact resume, metrics.jsonl
and a progress bar.

Reproducibility: the data of step ``s`` is drawn with ``step_rng(seed, s)``, the learning rate
is a function of ``s``, and the optimizer and RNG states are checkpointed, so an interrupted
and resumed run performs the same floating-point operations as an uninterrupted one.
"""
from __future__ import annotations

import json
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from tinyscope.errors import check, check_choice
from tinyscope.tasks.base import step_rng
from tinyscope.train import checkpoint as ckpt
from tinyscope.train.distributed import DistInfo, setup
from tinyscope.train.loggers import curve_logger
from tinyscope.train.optim import MuonAdamW, muon_param_groups
from tinyscope.train.schedule import lr_multiplier
from tinyscope.train.stopping import Selection, StopRules

log = logging.getLogger(__name__)

Objective = Callable[[torch.nn.Module, dict], torch.Tensor]
Evaluator = Callable[[torch.nn.Module], dict]


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
    device: str = "auto"                      # auto | cpu | cuda | cuda:N
    amp: bool = True                          # bf16 autocast, used only on CUDA
    threads: int = 0                          # torch intra-op threads; 0 = leave as is
    logger: Literal["none", "tensorboard"] = "none"  # also mirror metrics.jsonl to RUN/tensorboard

    def __post_init__(self):
        check(self.steps >= 1, f"train.steps={self.steps} must be >= 1")
        check(self.batch_size >= 1, f"train.batch_size={self.batch_size} must be >= 1")
        check(self.lr > 0 and math.isfinite(self.lr), f"train.lr={self.lr} must be a positive number")
        check(self.weight_decay >= 0, f"train.weight_decay={self.weight_decay} must be >= 0")
        check_choice("train.schedule", self.schedule, ("constant", "cosine", "linear", "wsd"))
        check_choice("train.optimizer", self.optimizer, ("adamw", "muon"))
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
        check(self.threads >= 0, f"train.threads={self.threads} must be >= 0")
        check_choice("train.logger", self.logger, ("none", "tensorboard"))
        if self.betas is not None:
            check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
                  f"train.betas={self.betas} must be two numbers in [0, 1)")


def masked_next_token_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """Mean cross-entropy over positions where ``loss_mask`` is True (the default objective)."""
    logits = model(batch["tokens"])  # (B, T, V)
    mask = batch["loss_mask"]  # (B, T)
    return F.cross_entropy(logits[mask].float(), batch["targets"][mask])


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"train.device={name!r} but CUDA is not available; use cpu or auto")
    return torch.device(name)


@dataclass
class TrainResult:
    steps: int
    wall_time: float
    stopped: str
    best_step: int | None
    best_metrics: dict
    last_metrics: dict


class Trainer:
    """Trains ``model`` on ``task`` with ``cfg``; writes to ``run_dir`` when given (rank 0 only)."""

    def __init__(self, model: torch.nn.Module, task: Any, cfg: TrainConfig, *, seed: int,
                 run_dir: str | Path | None = None, objective: Objective | None = None,
                 evaluate: Evaluator | None = None, progress: bool = True):
        self.cfg, self.seed = cfg, int(seed)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
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
        betas = tuple(cfg.betas) if cfg.betas else (0.9, 0.999)
        if cfg.optimizer == "muon":
            groups = muon_param_groups(self.model, muon_lr=cfg.muon_lr, adam_lr=cfg.lr)
            self.opt = MuonAdamW(groups, momentum=cfg.muon_momentum, betas=betas, weight_decay=cfg.weight_decay,
                                 ns_bf16=cfg.muon_bf16)
        else:
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, betas=betas, weight_decay=cfg.weight_decay)
        self.train_model = self.model
        if self.dist.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.train_model = DistributedDataParallel(self.model)
        self.selection = Selection(cfg.select_metric, cfg.select_mode, cfg.tie_break_metric, cfg.tie_break_mode)
        self.stop_rules = StopRules(cfg.stop_metric, cfg.stop_threshold, cfg.stop_mode, cfg.stop_consecutive,
                                    cfg.select_metric if cfg.patience else None, cfg.select_mode, cfg.patience, cfg.min_delta)
        self.step = 0
        self.tokens_seen = 0
        self.wall_time = 0.0
        self.last_metrics: dict = {}
        self.curves = curve_logger(cfg.logger, self.run_dir if self.writes else None)

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
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
            if self.curves is not None:
                self.curves.log(record)

    def _trainer_state(self) -> dict:
        state = {"step": self.step, "tokens_seen": self.tokens_seen, "wall_time": self.wall_time,
                 "seed": self.seed, "selection": self.selection.state(), "stop": self.stop_rules.state(),
                 "last_metrics": self.last_metrics}
        if hasattr(self.task, "state_dict"):  # a stateful task (e.g. a curriculum) resumes with the run
            state["task_state"] = self.task.state_dict()
        return state

    def _save_checkpoint(self) -> None:
        if not self.writes:
            return
        if self.cfg.checkpoint_every and self.step % self.cfg.checkpoint_every == 0:
            ckpt.save_model(self.ckpt_dir / f"step_{self.step:06d}.safetensors", self.model, step=self.step)
        ckpt.save_training_state(self.ckpt_dir / "resume.safetensors", self.model, self.opt, self._trainer_state())

    def resume(self) -> bool:
        """Restore the latest resume checkpoint if there is one; returns whether it did."""
        if self.run_dir is None or not (self.ckpt_dir / "resume.safetensors").exists():
            return False
        state = ckpt.load_training_state(self.ckpt_dir / "resume.safetensors", self.model, self.opt)
        self.step, self.tokens_seen = state["step"], state["tokens_seen"]
        self.wall_time, self.last_metrics = state["wall_time"], state.get("last_metrics", {})
        self.selection.load(state["selection"])
        self.stop_rules.load(state["stop"])
        if "task_state" in state and hasattr(self.task, "load_state_dict"):
            self.task.load_state_dict(state["task_state"])
        if self.writes:  # forget what was logged after the checkpoint: it will be logged again
            path = self.run_dir / "metrics.jsonl"
            if path.exists():
                keep = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= self.step]
                ckpt.atomic_write_bytes(path, ("\n".join(keep) + "\n" if keep else "").encode())
            for f in self.ckpt_dir.glob("step_*.safetensors"):
                if int(f.stem.split("_")[1]) > self.step:
                    f.unlink()
        log.info("resumed at step %d", self.step)
        return True

    # ----------------------------------------------------------------- loop
    def _batch(self, step: int) -> dict:
        batch = self.sample(step_rng(self.seed, step), self.cfg.batch_size)
        if self.dist.world > 1:
            batch = batch.select(slice(self.dist.rank, None, self.dist.world))
        self.tokens_seen += int(batch.tokens.size) * self.dist.world
        return batch.to_torch(self.device)

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
        self._log({"step": self.step, "split": "eval", **metrics})
        if self.selection.update(self.step, metrics) and self.writes:
            ckpt.save_model(self.ckpt_dir / "best.safetensors", self.model, step=self.step, metrics=metrics)
        return self.stop_rules.update(metrics)

    def fit(self) -> TrainResult:
        cfg = self.cfg
        amp = self.device.type == "cuda" and cfg.amp
        if self.writes:
            self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter() - self.wall_time
        if self.step == 0 and cfg.eval_at_start and self.evaluate_fn is not None:
            self._on_eval(self._evaluate())
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not (self.progress and sys.stderr.isatty()),
                   desc="train", dynamic_ncols=True, leave=False)
        self.model.train()
        running, n_running = 0.0, 0
        if self.step == 0 and self.writes and cfg.checkpoint_every:
            ckpt.save_model(self.ckpt_dir / "step_000000.safetensors", self.model, step=0)
        while self.step < cfg.steps and not self.stop_rules.stopped:
            mult = lr_multiplier(self.step, total=cfg.steps, warmup_steps=cfg.warmup_steps,
                                 warmup_start=cfg.warmup_start, kind=cfg.schedule, min_ratio=cfg.min_lr_ratio,
                                 decay_fraction=cfg.decay_fraction)
            for group in self.opt.param_groups:
                group["lr"] = group.get("base_lr", cfg.lr) * mult
            batch = self._batch(self.step)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = self.objective(self.train_model, batch)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self.opt.step()
            self.step += 1
            running += float(loss.detach())
            n_running += 1
            bar.update(1)
            if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                self.wall_time = time.perf_counter() - t0
                if self.dist.world > 1:  # log the mean over ranks: the loss of the global batch
                    total = torch.tensor([running], dtype=torch.float64, device=self.device)
                    torch.distributed.all_reduce(total)
                    running = float(total) / self.dist.world
                self._log({"step": self.step, "split": "train", "loss": running / n_running,
                           "lr": cfg.lr * mult, "tokens": self.tokens_seen, "time": round(self.wall_time, 3)})
                bar.set_postfix(loss=f"{running / n_running:.4f}")
                running, n_running = 0.0, 0
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
            self.curves.flush()
        self.wall_time = time.perf_counter() - t0
        stopped = self.stop_rules.reason if self.stop_rules.stopped else "max_steps"
        return TrainResult(self.step, self.wall_time, stopped, self.selection.best_step,
                           self.selection.best_metrics, self.last_metrics)
