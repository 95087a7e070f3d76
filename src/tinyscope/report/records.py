"""Run records: the numbers a report needs from one run directory, read without loading weights.

A record is built from the files `tinyscope.runs.rundir` writes (config.json,
results.json, metrics.jsonl) and, when the run failed inside a sweep, error.txt. Its
``setting`` is what distinguishes it from the experiment's preset other than the seed: the
flattened config keys whose values differ from the preset's defaults. Runs that share
experiment, preset and setting are seeds of one setting, whatever produced them (a sweep,
`tinyscope run --set ...`, or both).

Length-indexed metrics are named ``NAME@LENGTH`` (``accuracy@1024``); ``NAME@T=1024``,
``NAME/T=1024``, ``NAME_T1024`` and ``NAME.len=1024`` (nested ``{"NAME": {"len=1024": ...}}``)
are read too by :func:`split_length`.
"""
from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tinyscope.errors import TinyscopeError
from tinyscope.train.jsonl import read_records

log = logging.getLogger(__name__)

# Config keys that change how a run executes, not what it computes: never part of a setting.
EXECUTION_KEYS = frozenset({"seed", "train.threads", "train.logger", "train.log_every"})

_LENGTH_KEY = re.compile(r"^(?P<name>.+?)(?:@T=?|@|[./_]T=?|[./_]len=?)(?P<length>\d+)$")


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one level of dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(flatten(v, key) if isinstance(v, dict) else {key: v})
    return out


def numeric_metrics(metrics: dict) -> dict[str, float]:
    """The finite-or-NaN numbers of a (nested) metrics mapping, flattened; bools and text dropped."""
    out = {}
    for k, v in flatten(metrics).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
    return out


def split_length(key: str) -> tuple[str, int] | None:
    """``"acc@1024"`` -> ``("acc", 1024)``; None when the metric is not indexed by a length."""
    m = _LENGTH_KEY.match(key)
    return (m["name"], int(m["length"])) if m else None


def format_value(v: Any) -> str:
    """A config value as a short, stable label (lists as ``[1,1]``, floats as repr)."""
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


@dataclass
class RunRecord:
    """One run directory, summarized. ``status`` is done | failed | incomplete."""

    path: Path
    experiment: str
    preset: str
    seed: int
    config: dict[str, Any]                      # flattened config.json["config"]
    setting: dict[str, Any] = field(default_factory=dict)  # flattened keys that differ from the preset
    status: str = "incomplete"
    metrics: dict[str, float] = field(default_factory=dict)
    eval_fingerprint: str | None = None
    steps: int | None = None
    selected_step: int | None = None            # the main phase's selected step
    measured_step: int | None = None            # the checkpoint step results.json's metrics measured (None: unknown)
    wall_time: float | None = None
    tokens: int | None = None
    error: str | None = None

    @property
    def setting_key(self) -> tuple:
        """Hashable identity of the setting: experiment, preset and the sorted differing keys."""
        return (self.experiment, self.preset, tuple(sorted((k, format_value(v)) for k, v in self.setting.items())))

    def label(self, keys: Iterable[str] | None = None) -> str:
        """``model.d_model=4, train.lr=0.001`` (only ``keys`` when given); ``default`` if none."""
        keys = sorted(self.setting) if keys is None else [k for k in keys]
        parts = [f"{k}={format_value(self.config.get(k))}" for k in keys]
        return ", ".join(parts) if parts else "default"

    def value(self, key: str) -> Any:
        """A field by name: experiment, preset, seed, status, a config key, or ``metric:NAME``."""
        if key in ("experiment", "preset", "seed", "status", "eval_fingerprint", "steps", "tokens", "wall_time"):
            return getattr(self, key)
        if key.startswith("metric:"):
            return self.metrics.get(key[7:], math.nan)
        return self.config.get(key)


class RunReadError(TinyscopeError):
    """A run directory's config.json or results.json cannot be read (missing keys, not JSON: a
    write cut short, a file edited by hand); the message names the file and the fault."""


def read_json(path: Path) -> dict:
    """The JSON object in ``path``; :class:`RunReadError` naming the file when it is not one."""
    try:
        data = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise RunReadError(f"{path} is not a text file") from None
    except json.JSONDecodeError as exc:
        raise RunReadError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
                           f"damaged or cut short") from None
    if not isinstance(data, dict):
        raise RunReadError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSON-lines file such as metrics.jsonl, one object per line
    (:func:`tinyscope.train.jsonl.read_records`: a torn last line is dropped; a line that does
    not parse anywhere else is damage, and raises :class:`RunReadError`)."""
    return read_records(path, RunReadError)


def _last_tokens(metrics_path: Path) -> int | None:
    tokens = None
    try:
        records = read_jsonl(metrics_path)
    except (RunReadError, OSError):
        return None
    for rec in records:
        try:
            tokens = int(rec["tokens"]) if "tokens" in rec else tokens
        except (TypeError, ValueError, OverflowError):
            continue
    return tokens


_PRESET_CACHE: dict[tuple[str, str], dict | None] = {}


def preset_defaults(experiment: str, preset: str) -> dict | None:
    """Flattened default config of ``experiment``'s ``preset``; None if it is not registered."""
    key = (experiment, preset)
    if key not in _PRESET_CACHE:
        from tinyscope.config import to_dict
        from tinyscope.runs import registry

        try:
            _PRESET_CACHE[key] = flatten(to_dict(registry.get(experiment).config(preset)))
        except TinyscopeError:
            _PRESET_CACHE[key] = None
    return _PRESET_CACHE[key]


def read_run(path: str | Path) -> RunRecord:
    """Summarize the run directory ``path`` (which must hold config.json). Raises
    :class:`RunReadError` when config.json or results.json cannot be read or lacks a key."""
    path = Path(path)
    record = read_json(path / "config.json")
    missing = [k for k in ("experiment", "preset", "config") if k not in record]
    if missing or not isinstance(record.get("config"), dict):
        raise RunReadError(f"{path / 'config.json'} lacks {', '.join(missing) or 'a config mapping'}; "
                           f"it is not a run's config")
    config = flatten(record["config"])
    exp, preset = str(record["experiment"]), str(record["preset"])
    defaults = preset_defaults(exp, preset)
    if defaults is None:  # unknown experiment: fall back to the overrides the sweep recorded
        job = path / "sweep_job.json"
        setting = read_json(job).get("setting", {}) if job.exists() else {}
    else:
        setting = {k: v for k, v in config.items()
                   if k not in EXECUTION_KEYS and format_value(defaults.get(k)) != format_value(v)}
    try:
        seed = int(config.get("seed", 0))
    except (TypeError, ValueError, OverflowError):
        raise RunReadError(f"{path / 'config.json'}: seed {config.get('seed')!r} is not an integer") from None
    rec = RunRecord(path=path, experiment=exp, preset=preset, seed=seed, config=config, setting=setting)
    results_path, error_path = path / "results.json", path / "error.txt"
    if results_path.exists():
        res = read_json(results_path)
        rec.status = "done"
        rec.metrics = numeric_metrics(res.get("metrics") if isinstance(res.get("metrics"), dict) else {})
        rec.eval_fingerprint = res.get("eval_fingerprint")
        rec.steps, rec.selected_step = res.get("steps"), res.get("selected_step")
        # a run with stages measures its last phase's model (results.json: measured_step, written
        # since 2026-12-05); without stages, the main phase's selected step
        rec.measured_step = res.get("measured_step", None if res.get("phases") else rec.selected_step)
        rec.wall_time = res.get("wall_time")
    elif error_path.exists():
        rec.status = "failed"
        rec.error = error_path.read_text(errors="replace")
    rec.tokens = _last_tokens(path / "metrics.jsonl")
    return rec


def find_runs(root: str | Path) -> list[Path]:
    """Every run directory (a folder with config.json) under ``root``, ``root`` included, sorted."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob("config.json") if p.parent.name != "checkpoints")


def read_runs(root: str | Path) -> tuple[list[RunRecord], list[tuple[Path, str]]]:
    """Records of every run directory under ``root`` that can be read, and ``(path, reason)``
    for each one that cannot (one damaged run never hides the others)."""
    recs, skipped = [], []
    for p in find_runs(root):
        try:
            recs.append(read_run(p))
        except (RunReadError, OSError) as exc:
            skipped.append((p, str(exc)))
    return recs, skipped


def load_records(root: str | Path, status: str | None = "done") -> list[RunRecord]:
    """Records of the run directories under ``root`` (only those with ``status``; None = all);
    a run that cannot be read is skipped with a logged warning naming it."""
    recs, skipped = read_runs(root)
    for p, reason in skipped:
        log.warning("skipped run %s: %s", p, reason)
    return [r for r in recs if status is None or r.status == status]
