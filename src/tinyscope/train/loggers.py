"""Optional training-curve loggers beside metrics.jsonl (``train.logger``; off by default).

Each mirrors every metrics.jsonl record as scalars named ``<split>/<metric>`` (``train/loss``,
``eval/rule_error``) at the record's step. The Trainer calls ``log`` only where it already
writes metrics.jsonl (every ``log_every`` / ``eval_every`` steps), so the training step itself
is untouched, and ``close`` when a fit ends or diverges.

``tensorboard``: event files in RUN/tensorboard; view with ``tensorboard --logdir RUN`` (or a
sweep folder).

``mlflow``: one MLflow run per run directory (a stage, RUN/stages/NAME, is a run of its own
beside it), in the MLflow experiment named after the tinyscope experiment. It logs the run's
flattened config (``model.d_model``, ``train.lr``, …, with ``experiment`` and ``preset``) as
params once, each record's numbers as metrics, and ends the run FINISHED when the fit ends,
FAILED when training diverges, KILLED when the process exits before either. The store is
``train.mlflow_uri`` when given, else the ``MLFLOW_TRACKING_URI`` environment variable, else
``sqlite:///RUN/mlflow.db`` (SQLite: MLflow 3's default backend; it refuses its old file store
unless told otherwise). ``RUN/mlflow_run.json`` keeps the MLflow run id, so ``--resume``
continues the same MLflow run. View with ``mlflow ui --backend-store-uri sqlite:///RUN/mlflow.db``.
"""
from __future__ import annotations

import atexit
import json
import os
import time
from pathlib import Path

from tinyscope.errors import ConfigError

LOGGERS = ("none", "tensorboard", "mlflow")
MLFLOW_DB = "mlflow.db"
MLFLOW_RUN_FILE = "mlflow_run.json"


def _scalars(record: dict) -> tuple[int, list[tuple[str, float]]]:
    """The record's step and its numbers as ``(<split>/<metric>, value)``."""
    split = record.get("split", "train")
    return int(record["step"]), [(f"{split}/{k}", float(v)) for k, v in record.items() if k not in ("step", "split")
                                 and isinstance(v, (int, float)) and not isinstance(v, bool)]


class TensorBoardLogger:
    def __init__(self, log_dir: str | Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError("train.logger=tensorboard needs the tensorboard package: "
                              "pip install 'tinyscope[tensorboard]'") from None
        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, record: dict) -> None:
        step, scalars = _scalars(record)
        for name, value in scalars:
            self.writer.add_scalar(name, value, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self, status: str = "FINISHED") -> None:
        self.writer.close()


def flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    """``{"model": {"d_model": 4}}`` -> ``{"model.d_model": 4}`` (lists stay values)."""
    flat: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def run_root(run_dir: Path) -> Path:
    """The run directory ``run_dir`` belongs to: itself, or RUN for a stage's RUN/stages/NAME."""
    if run_dir.parent.name == "stages" and (run_dir.parent.parent / "config.json").exists():
        return run_dir.parent.parent
    return run_dir


class MlflowLogger:
    """The module docstring's ``mlflow`` logger for the Trainer writing into ``run_dir``."""

    def __init__(self, run_dir: str | Path, uri: str = ""):
        try:
            from mlflow.entities import Metric, Param
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ConfigError("train.logger=mlflow needs the mlflow package: pip install 'tinyscope[mlflow]'") from None
        self._metric, self._param = Metric, Param
        self.run_dir = Path(run_dir)
        root = run_root(self.run_dir)
        self.uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(root / MLFLOW_DB).resolve()}"
        self.client = MlflowClient(tracking_uri=self.uri)
        record = json.loads((root / "config.json").read_text()) if (root / "config.json").exists() else {}
        self.run_id = self._resumed_run()
        if self.run_id is None:
            self.run_id = self._new_run(root, record)
        else:
            self.client.update_run(self.run_id, status="RUNNING")
        self.open = True
        atexit.register(self.close, "KILLED")  # a process that exits mid-fit (Ctrl-C, a crash)

    def _resumed_run(self) -> str | None:
        """The MLflow run of an earlier start of this run directory in the same store."""
        path = self.run_dir / MLFLOW_RUN_FILE
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict) or saved.get("uri") != self.uri:
            return None
        try:
            return self.client.get_run(saved["run_id"]).info.run_id
        except Exception:  # noqa: BLE001 - deleted from the store, or never there: start a new one
            return None

    def _new_run(self, root: Path, record: dict) -> str:
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_PARAMS_TAGS_PER_BATCH

        name = record.get("experiment") or "tinyscope"
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            experiment_id = found.experiment_id
        else:  # artifacts (none are logged) beside the store, never in the working directory
            artifacts = (root / "mlflow-artifacts").resolve().as_uri() if self.uri.startswith("sqlite:///") \
                and self.uri.endswith(f"/{MLFLOW_DB}") else None
            experiment_id = self.client.create_experiment(name, artifact_location=artifacts)
        stage = f"/stages/{self.run_dir.name}" if root != self.run_dir else ""
        run = self.client.create_run(experiment_id, run_name=f"{root.name}{stage}",
                                     tags={"tinyscope.run_dir": str(self.run_dir.resolve()),
                                           "tinyscope.preset": str(record.get("preset", ""))})
        params = {"experiment": record.get("experiment"), "preset": record.get("preset"),
                  **flatten(record.get("config", {}))}
        items = [self._param(k, json.dumps(v) if not isinstance(v, str) else v)
                 for k, v in params.items() if v is not None]
        items = [self._param(p.key, p.value[:MAX_PARAM_VAL_LENGTH]) for p in items]
        for i in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run.info.run_id, params=items[i:i + MAX_PARAMS_TAGS_PER_BATCH])
        (self.run_dir / MLFLOW_RUN_FILE).write_text(json.dumps({"uri": self.uri, "run_id": run.info.run_id}) + "\n")
        return run.info.run_id

    def log(self, record: dict) -> None:
        step, scalars = _scalars(record)
        now = int(time.time() * 1000)
        if scalars:  # one transaction per record
            self.client.log_batch(self.run_id, metrics=[self._metric(k, v, now, step) for k, v in scalars])

    def flush(self) -> None:
        pass  # every record is committed when logged

    def close(self, status: str = "FINISHED") -> None:
        """End the MLflow run with ``status`` (FINISHED, FAILED or KILLED); later calls do nothing."""
        if not self.open:
            return
        self.open = False
        atexit.unregister(self.close)
        try:
            self.client.set_terminated(self.run_id, status=status)
        except Exception:  # noqa: BLE001 - at exit the store may be gone; the run stays RUNNING there
            if status != "KILLED":
                raise


def curve_logger(kind: str, run_dir: Path | None, mlflow_uri: str = "") -> TensorBoardLogger | MlflowLogger | None:
    """The logger named by ``train.logger`` for ``run_dir`` (None for "none" or without a run dir)."""
    if kind == "none" or run_dir is None:
        return None
    if kind == "tensorboard":
        return TensorBoardLogger(Path(run_dir) / "tensorboard")
    if kind == "mlflow":
        return MlflowLogger(run_dir, mlflow_uri)
    raise ConfigError(f"train.logger={kind!r} is not allowed; choose one of {', '.join(map(repr, LOGGERS))}")
