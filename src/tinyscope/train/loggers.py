"""Optional training-curve loggers beside metrics.jsonl (``train.logger``; off by default).

``tensorboard`` mirrors every metrics.jsonl record into RUN/tensorboard as scalars named
``<split>/<metric>`` (``train/loss``, ``eval/rule_error``) at the record's step. The Trainer calls
it only where it already writes metrics.jsonl (every ``log_every`` / ``eval_every`` steps), so the
training step itself is untouched. View with ``tensorboard --logdir RUN`` (or a sweep folder).
"""
from __future__ import annotations

from pathlib import Path

from tinyscope.errors import ConfigError

LOGGERS = ("none", "tensorboard")


class TensorBoardLogger:
    def __init__(self, log_dir: str | Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError("train.logger=tensorboard needs the tensorboard package: "
                              "pip install 'tinyscope[tensorboard]'") from None
        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, record: dict) -> None:
        step, split = int(record["step"]), record.get("split", "train")
        for key, value in record.items():
            if key not in ("step", "split") and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{split}/{key}", value, step)

    def flush(self) -> None:
        self.writer.flush()


def curve_logger(kind: str, run_dir: Path | None) -> TensorBoardLogger | None:
    """The logger named by ``train.logger`` for ``run_dir`` (None for "none" or without a run dir)."""
    if kind == "none" or run_dir is None:
        return None
    if kind == "tensorboard":
        return TensorBoardLogger(Path(run_dir) / "tensorboard")
    raise ConfigError(f"train.logger={kind!r} is not allowed; choose one of {', '.join(map(repr, LOGGERS))}")
