"""Checkpoint I/O: safetensors for tensors, JSON for everything else, written atomically.

A file is written to a temporary name in the same directory, flushed to disk and renamed over
the target, so a crash leaves either the old file or the new one, never a torn one. Loading uses
``safetensors`` only: no pickled code is ever executed.

Layout of a run's ``checkpoints/``::

    step_000100.safetensors   model weights at step 100 (kept: they feed the training movies)
    best.safetensors          weights of the selected checkpoint
    resume.safetensors        weights + optimizer + RNG + trainer state (JSON in the metadata)
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from safetensors.torch import save as st_save

from tinyscope.errors import CheckpointError


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> None:
    """Atomically write ``tensors`` with JSON-encoded ``metadata`` values."""
    flat = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    meta = {k: json.dumps(v) for k, v in (metadata or {}).items()}
    atomic_write_bytes(path, st_save(flat, metadata=meta))


def load_tensors(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        tensors = load_file(str(path))
        with safe_open(str(path), framework="pt") as f:
            raw = f.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(f"checkpoint {path} is not a readable safetensors file: {exc}") from None
    return tensors, {k: json.loads(v) for k, v in raw.items()}


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def save_model(path: str | Path, model: torch.nn.Module, **metadata: Any) -> None:
    save_tensors(path, unwrap(model).state_dict(), metadata)


def load_model(path: str | Path, model: torch.nn.Module) -> dict[str, Any]:
    """Load weights into ``model`` (strict); returns the checkpoint's metadata."""
    tensors, meta = load_tensors(path)
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")} or tensors
    try:
        unwrap(model).load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise CheckpointError(f"checkpoint {path} does not fit this model: {first}") from None
    return meta


def optimizer_to_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer state_dict into tensors (safetensors) and plain values (JSON)."""
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    plain_state: dict[str, dict] = {}
    for idx, st in sd["state"].items():
        plain_state[str(idx)] = {}
        for key, val in st.items():
            if torch.is_tensor(val):
                tensors[f"optim.{idx}.{key}"] = val
            else:
                plain_state[str(idx)][key] = val
    return tensors, {"state": plain_state, "param_groups": sd["param_groups"]}


def optimizer_from_tensors(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], plain: dict) -> None:
    state: dict[int, dict] = {int(i): dict(v) for i, v in plain["state"].items()}
    for name, val in tensors.items():
        if name.startswith("optim."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = val
    opt.load_state_dict({"state": state, "param_groups": plain["param_groups"]})


def save_training_state(path: str | Path, model: torch.nn.Module, opt: torch.optim.Optimizer,
                        trainer_state: dict) -> None:
    """Everything needed to resume exactly, in one atomically written file."""
    tensors = {f"model.{k}": v for k, v in unwrap(model).state_dict().items()}
    opt_tensors, opt_plain = optimizer_to_tensors(opt)
    tensors.update(opt_tensors)
    tensors["rng.torch"] = torch.get_rng_state()
    save_tensors(path, tensors, {"trainer": trainer_state, "optimizer": opt_plain})


def load_training_state(path: str | Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict:
    tensors, meta = load_tensors(path)
    if "trainer" not in meta or "optimizer" not in meta:
        raise CheckpointError(f"{path} is not a resume checkpoint (no trainer state)")
    model_state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    unwrap(model).load_state_dict(model_state, strict=True)
    optimizer_from_tensors(opt, tensors, meta["optimizer"])
    if "rng.torch" in tensors:
        torch.set_rng_state(tensors["rng.torch"])
    return meta["trainer"]
