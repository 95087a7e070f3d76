"""Checkpoint I/O: safetensors for tensors, JSON for everything else, written atomically and
checked when read.

A file is written to a temporary name in the same directory, flushed to disk and renamed over
the target, so a crash leaves either the old file or the new one, never a torn one (a killed
write leaves its temporary file, which :func:`remove_temp_files` clears at the next start).
Loading uses ``safetensors`` only: no pickled code is ever executed.

File format: the safetensors header's metadata holds one key, ``tinyscope``, whose value is the
whole metadata dict as sorted, compact JSON (safetensors writes a metadata dict in an arbitrary
key order, so one key is what makes the same state give the same bytes), including
``checksum``: ``sha256:<hex>`` over every tensor's name, dtype, shape and bytes
(:func:`tensor_checksum`). Files written before this format (one JSON value per key, no
checksum) are read as they are.

Checks on load: the file is readable, its checksum matches, every floating-point value is
finite (:func:`load_tensors`); the tensors are exactly the model's, with its shapes and dtypes
(:func:`check_model_state`); a resume checkpoint's optimizer state fits the optimizer. A file
that fails raises :class:`CheckpointError` naming it, before anything is loaded.

Layout of a run's ``checkpoints/``::

    step_000100.safetensors   model weights at step 100 (kept: they feed the training movies)
    best.safetensors          weights of the selected checkpoint
    resume.safetensors        weights + optimizer + RNG + trainer state (JSON in the metadata)
    resume.clock.json         training wall time at the resume checkpoint (kept out of its bytes)
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from safetensors.torch import save as st_save

from tinyscope.errors import CheckpointError


def step_name(step: int) -> str:
    """The file name of the weights saved at ``step`` in a run's ``checkpoints/`` folder."""
    return f"step_{step:06d}.safetensors"


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


TEMP_NAME = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")  # what atomic_write_bytes names its temporary file


def remove_temp_files(folder: str | Path) -> list[Path]:
    """Remove the temporary files that writes killed midway left under ``folder`` (call it only
    while no other process writes there: hold the run's lock); returns what it removed."""
    folder = Path(folder)
    gone = [p for p in folder.rglob(".*.tmp") if p.is_file() and TEMP_NAME.match(p.name)] if folder.is_dir() else []
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


META_KEY = "tinyscope"  # the one metadata key of a checkpoint written since format 2
CHECKSUM_KEY = "checksum"


def tensor_checksum(tensors: dict[str, torch.Tensor]) -> str:
    """``sha256:<hex>`` over every tensor in name order: its name, dtype, shape and raw bytes.

    A changed byte, a cast, a reshape, or a tensor added or removed all change it."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        h.update(f"{name}\0{str(t.dtype).removeprefix('torch.')}\0{list(t.shape)}\0".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return "sha256:" + h.hexdigest()


def encode_metadata(metadata: dict[str, Any]) -> dict[str, str]:
    """safetensors' header metadata: one key holding the whole dict as sorted, compact JSON.

    safetensors writes a metadata dict in an arbitrary key order, so one key is what makes the
    same weights and the same metadata give the same bytes."""
    return {META_KEY: json.dumps(metadata, sort_keys=True, separators=(",", ":"))}


def decode_metadata(raw: dict[str, str]) -> dict[str, Any]:
    """The metadata dict of a checkpoint, of either format: one ``tinyscope`` key (format 2) or,
    as written before, one JSON-encoded value per key."""
    if set(raw) == {META_KEY}:
        meta = json.loads(raw[META_KEY])
        if not isinstance(meta, dict):
            raise ValueError("the metadata is not a JSON object")
        return meta
    return {k: json.loads(v) for k, v in raw.items()}


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> None:
    """Atomically write ``tensors`` with ``metadata`` (JSON values) and the tensors' checksum."""
    flat = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    meta = {**(metadata or {}), CHECKSUM_KEY: tensor_checksum(flat)}
    atomic_write_bytes(path, st_save(flat, metadata=encode_metadata(meta)))


def load_tensors(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint and check what it can check on its own: a readable file, a checksum
    that matches (when the file has one: files written before it was stored have none), and
    finite values in every floating-point tensor. Raises :class:`CheckpointError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        tensors = load_file(str(path))
        with safe_open(str(path), framework="pt") as f:
            raw = f.metadata() or {}
        meta = decode_metadata(raw)
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"checkpoint {path} is not a readable safetensors file: {first}") from None
    stored = meta.pop(CHECKSUM_KEY, None)
    if stored is not None and stored != tensor_checksum(tensors):
        raise CheckpointError(f"checkpoint {path} is damaged: its tensors do not match the checksum in its metadata "
                              f"(a changed byte, a cast, a reshape, or a tensor added or removed); "
                              f"restore it from a copy or remove it")
    for name in sorted(tensors):
        t = tensors[name]
        if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"checkpoint {path} holds non-finite values (NaN or inf) in {name}; "
                                  f"restore it from a copy or remove it")
    return tensors, meta


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def save_model(path: str | Path, model: torch.nn.Module, **metadata: Any) -> None:
    save_tensors(path, unwrap(model).state_dict(), metadata)


def _names(names, n: int = 3) -> str:
    names = sorted(names)
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def check_model_state(path: str | Path, state: dict[str, torch.Tensor], model: torch.nn.Module,
                      meta: dict[str, Any] | None = None) -> None:
    """Raise :class:`CheckpointError` unless ``state`` holds exactly the tensors of ``model``'s
    state_dict, each with its shape and dtype. A zoo entry stored in bfloat16 (metadata
    ``zoo_dtype``) may hold its floating-point tensors in that dtype."""
    check_state_fits(path, state, unwrap(model).state_dict(), meta)


def check_state_fits(path: str | Path, state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
                     meta: dict[str, Any] | None = None) -> None:
    """:func:`check_model_state` against the tensors ``expected`` (a state_dict, or part of one)."""
    missing, extra = set(expected) - set(state), set(state) - set(expected)
    if missing or extra:
        parts = ([f"missing {_names(missing)}"] if missing else []) + ([f"unexpected {_names(extra)}"] if extra else [])
        raise CheckpointError(f"checkpoint {path} does not fit this model: {'; '.join(parts)}")
    stored_dtype = getattr(torch, str((meta or {}).get("zoo_dtype", "")), None)
    for name in sorted(expected):
        want, got = expected[name], state[name]
        if tuple(got.shape) != tuple(want.shape):
            raise CheckpointError(f"checkpoint {path} does not fit this model: {name} has shape {list(got.shape)}, "
                                  f"the model's is {list(want.shape)}")
        if got.dtype != want.dtype and not (want.is_floating_point() and got.dtype == stored_dtype):
            raise CheckpointError(f"checkpoint {path} does not fit this model: {name} is "
                                  f"{str(got.dtype).removeprefix('torch.')}, the model's is "
                                  f"{str(want.dtype).removeprefix('torch.')}")


def model_state(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The model's tensors of a checkpoint: ``model.*`` of a resume checkpoint, else all."""
    return {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")} or tensors


def load_model(path: str | Path, model: torch.nn.Module) -> dict[str, Any]:
    """Load weights into ``model`` after checking every tensor (:func:`load_tensors`,
    :func:`check_model_state`); returns the checkpoint's metadata. A file that fails leaves the
    model as it was."""
    tensors, meta = load_tensors(path)
    state = model_state(tensors)
    check_model_state(path, state, model, meta)
    unwrap(model).load_state_dict(state, strict=True)
    return meta


def check_step(path: str | Path, meta: dict[str, Any]) -> int | None:
    """The ``step`` of a weights checkpoint's metadata (None when it records none); a step that
    is not a non-negative integer is a :class:`CheckpointError`."""
    step = meta.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise CheckpointError(f"checkpoint {path} has a bad step in its metadata: {step!r}")
    return step


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


def _optimizer_state(path: str | Path, opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor],
                     plain: Any) -> dict:
    """The optimizer state_dict a resume checkpoint holds, checked against ``opt``'s parameters:
    one entry per parameter index that exists, a state tensor shaped like its parameter has its
    dtype, the parameters of one group carry the same state keys, and the groups match."""
    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {path} has a bad optimizer state: {why}")

    if not isinstance(plain, dict) or not isinstance(plain.get("state"), dict) \
            or not isinstance(plain.get("param_groups"), list):
        raise bad("its metadata lacks 'state' or 'param_groups'")
    groups = plain["param_groups"]
    if len(groups) != len(opt.param_groups):
        raise bad(f"{len(groups)} parameter groups, this optimizer has {len(opt.param_groups)}")
    params = [p for g in opt.param_groups for p in g["params"]]
    try:
        state: dict[int, dict] = {int(i): dict(v) for i, v in plain["state"].items()}
        for name, val in tensors.items():
            if name.startswith("optim."):
                _, idx, key = name.split(".", 2)
                state.setdefault(int(idx), {})[key] = val
    except (TypeError, ValueError) as exc:
        raise bad(str(exc)) from None
    for idx, entry in state.items():
        if not 0 <= idx < len(params):
            raise bad(f"state for parameter {idx}, this model has {len(params)}")
        p = params[idx]
        for key, val in entry.items():
            if torch.is_tensor(val) and tuple(val.shape) == tuple(p.shape) and val.numel() > 1 and val.dtype != p.dtype:
                raise bad(f"optim.{idx}.{key} is {str(val.dtype).removeprefix('torch.')}, "
                          f"its parameter is {str(p.dtype).removeprefix('torch.')}")
            if torch.is_tensor(val) and val.numel() > 1 and tuple(val.shape) != tuple(p.shape) and key != "step":
                raise bad(f"optim.{idx}.{key} has shape {list(val.shape)}, its parameter {list(p.shape)}")
    offset = 0
    for g, live in zip(groups, opt.param_groups):
        if not isinstance(g, dict) or len(g.get("params", ())) != len(live["params"]):
            raise bad("a parameter group does not match this model's")
        keys = {frozenset(state[i]) for i in range(offset, offset + len(live["params"])) if i in state}
        if len(keys) > 1:
            raise bad("the parameters of one group carry different state tensors (one was added or removed)")
        offset += len(live["params"])
    return {"state": state, "param_groups": groups}


def optimizer_from_tensors(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], plain: dict,
                           path: str | Path = "checkpoint") -> None:
    sd = _optimizer_state(path, opt, tensors, plain)
    try:
        opt.load_state_dict(sd)
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"checkpoint {path} has a bad optimizer state: {exc}") from None


def save_training_state(path: str | Path, model: torch.nn.Module, opt: torch.optim.Optimizer,
                        trainer_state: dict) -> None:
    """Everything needed to resume exactly, in one atomically written file."""
    tensors = {f"model.{k}": v for k, v in unwrap(model).state_dict().items()}
    opt_tensors, opt_plain = optimizer_to_tensors(opt)
    tensors.update(opt_tensors)
    tensors["rng.torch"] = torch.get_rng_state()
    save_tensors(path, tensors, {"trainer": trainer_state, "optimizer": opt_plain})


def load_training_state(path: str | Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict:
    """Restore model, optimizer and torch's RNG from a resume checkpoint and return its trainer
    state (a dict; the trainer checks its fields). Every tensor is checked before anything is
    loaded: a bad file raises :class:`CheckpointError` and leaves model and optimizer as they were."""
    tensors, meta = load_tensors(path)
    if not isinstance(meta.get("trainer"), dict) or "optimizer" not in meta:
        raise CheckpointError(f"checkpoint {path} is not a resume checkpoint (no trainer state in its metadata)")
    extra = [k for k in tensors if not k.startswith(("model.", "optim.")) and k != "rng.torch"]
    if extra:
        raise CheckpointError(f"checkpoint {path} holds unexpected tensors: {_names(extra)}")
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    check_model_state(path, state, model)
    rng = tensors.get("rng.torch")
    if rng is not None and (rng.dtype != torch.uint8 or rng.shape != torch.get_rng_state().shape):
        raise CheckpointError(f"checkpoint {path} has a bad rng.torch tensor ({rng.dtype}, {list(rng.shape)})")
    sd = _optimizer_state(path, opt, tensors, meta["optimizer"])
    before = {k: v.clone() for k, v in unwrap(model).state_dict().items()}
    unwrap(model).load_state_dict(state, strict=True)
    try:
        opt.load_state_dict(sd)
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        unwrap(model).load_state_dict(before)
        raise CheckpointError(f"checkpoint {path} has a bad optimizer state: {exc}") from None
    if rng is not None:
        torch.set_rng_state(rng)
    return meta["trainer"]
