"""Import of the checkpoints written by Mahajne & Moldwin's public code (Raneem-mahajne/creating_transformer).

Their format (``checkpoint.py`` of that repository): a folder ``<config>/checkpoints/`` with

* ``model.pt``: ``torch.save`` of the model's state dict, the weights at the end of training;
* ``metadata.json``: ``vocab_size``, ``model_config`` (``n_embd``, ``block_size``, ``num_heads``,
  ``head_size``, optionally ``use_residual``), ``eval_interval`` and the logged histories
  ``steps_for_plot``, ``train_loss_history``, ``val_loss_history``, ``rule_error_history``;
* one ``step_NNNNNN/`` folder per checkpoint with its own ``model.pt``: the weights after NNNNNN
  updates (saved before the update of step NNNNNN);
* pickles (``itos.pkl``, ``stoi.pkl``, ``*_sequences.pkl``), which are never read here: their
  vocabulary is ``0..10`` then ``+``, tinyscope's order.

Their ``BigramLanguageModel`` is tinyscope's minimal model (:func:`~.experiment.minimal_model`)
under other names: token and position tables, per-head bias-free ``query``/``key``/``value``
(concatenated heads, no output projection), ``ffwd.net.0``/``ffwd.net.2`` (FFN 16 x n_embd, ReLU)
and a biased ``lm_head``, with both residuals. ``model.pt`` files are read with
``torch.load(weights_only=True)`` only, so nothing but tensors and containers is unpickled.

:func:`import_checkpoints` writes a tinyscope run directory (``paper`` preset; config.json,
``checkpoints/step_*.safetensors`` and ``best.safetensors`` = their final weights, results.json
measured on tinyscope's held-out set, metrics.jsonl from their logged histories), so every view
and movie draws the authors' model.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import torch

from tinyscope.errors import TinyscopeError

STEP_DIR = re.compile(r"step_(\d+)")
MASK_BUFFER = re.compile(r"sa_heads\.heads\.(\d+)\.tril")
HEAD_WEIGHT = re.compile(r"sa_heads\.heads\.(\d+)\.(query|key|value)\.weight")
RENAMED = {
    "token_embedding.weight": "W_E.weight",
    "position_embedding_table.weight": "W_pos.weight",
    "ffwd.net.0.weight": "blocks.0.mlp.W_in.weight",
    "ffwd.net.0.bias": "blocks.0.mlp.W_in.bias",
    "ffwd.net.2.weight": "blocks.0.mlp.W_out.weight",
    "ffwd.net.2.bias": "blocks.0.mlp.W_out.bias",
    "lm_head.weight": "W_U.weight",
    "lm_head.bias": "W_U.bias",
}
PROJECTION = {"query": "W_Q", "key": "W_K", "value": "W_V"}


class AuthorsCheckpointError(TinyscopeError):
    """A file or folder that is not a checkpoint of the authors' plus-last-even model."""


def read_state(path: str | Path) -> dict[str, torch.Tensor]:
    """The state dict in one of their ``model.pt`` files, read without unpickling code."""
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to read is the same user error
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AuthorsCheckpointError(f"{path} is not a state dict torch.load(weights_only=True) can read "
                                     f"({first[:160]}); only their model.pt files can be imported") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise AuthorsCheckpointError(f"{path} holds a {type(state).__name__}, not a state dict of named tensors")
    return state


def convert_state(state: dict[str, torch.Tensor], source: str = "the checkpoint") -> dict[str, torch.Tensor]:
    """Their state dict under tinyscope's names: heads' projections stacked head by head
    (tinyscope's ``W_Q`` rows ``h*d_head:(h+1)*d_head`` are head h), the causal-mask buffers
    checked and dropped."""
    out, heads, unknown = {}, {}, []
    for name, value in state.items():
        if name in RENAMED:
            out[RENAMED[name]] = value.detach().float().clone()
        elif (m := HEAD_WEIGHT.fullmatch(name)):
            heads.setdefault(m.group(2), {})[int(m.group(1))] = value.detach().float()
        elif MASK_BUFFER.fullmatch(name):
            n = value.shape[-1] if value.dim() == 2 else 0
            if value.dim() != 2 or not torch.equal(value.float(), torch.ones(n, n).tril()):
                raise AuthorsCheckpointError(f"{source}: {name} is not a causal mask (lower-triangular ones)")
        else:
            unknown.append(name)
    if unknown:
        raise AuthorsCheckpointError(f"{source} has tensors the minimal model lacks ({', '.join(sorted(unknown)[:3])}); "
                                     f"only the LayerNorm-free, residual model of the paper can be imported")
    missing = [k for k in RENAMED.values() if k not in out] + [f"sa_heads.heads.*.{p}.weight" for p in PROJECTION
                                                               if p not in heads]
    if missing:
        raise AuthorsCheckpointError(f"{source} lacks {', '.join(missing[:3])}; it is not the authors' model")
    for proj, by_head in heads.items():
        if sorted(by_head) != list(range(len(by_head))):
            raise AuthorsCheckpointError(f"{source}: heads {sorted(by_head)} of {proj} are not numbered 0..H-1")
        out[f"blocks.0.attn.{PROJECTION[proj]}.weight"] = torch.cat([by_head[h] for h in range(len(by_head))], 0)
    return out


def model_kwargs(state: dict[str, torch.Tensor], metadata: dict) -> dict:
    """tinyscope's model config for their model: from ``metadata.json``'s ``model_config`` when
    there is one, else from the tensors' shapes."""
    mc = metadata.get("model_config") or {}
    if mc.get("use_residual", True) is False:
        raise AuthorsCheckpointError("the checkpoint's model_config has use_residual: false; only the residual "
                                     "model of the paper can be imported")
    V, D = state["W_E.weight"].shape
    T = state["W_pos.weight"].shape[0]
    n_heads = int(mc.get("num_heads", 1))
    d_head = int(mc.get("head_size", state["blocks.0.attn.W_Q.weight"].shape[0] // n_heads))
    if V != 12:
        raise AuthorsCheckpointError(f"the checkpoint's vocabulary has {V} tokens; plus-last-even has 12 (0..10 and +)")
    if n_heads * d_head != D:
        raise AuthorsCheckpointError(f"num_heads x head_size = {n_heads} x {d_head} must equal n_embd = {D} "
                                     f"(the model has no attention output projection)")
    return dict(n_ctx=int(T), d_model=int(D), d_head=d_head, n_heads=[n_heads],
                d_mlp=[int(state["blocks.0.mlp.W_in.weight"].shape[0])])


def _read_metadata(folder: Path) -> dict:
    path = folder / "metadata.json"
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AuthorsCheckpointError(f"{path} is not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise AuthorsCheckpointError(f"{path} holds a {type(meta).__name__}, not the metadata object")
    return meta


def find_checkpoints(path: str | Path, final_step: int | None = None) -> tuple[dict[int, Path], int, dict]:
    """(step -> model.pt, the final step, metadata) of a ``checkpoints`` folder or one model.pt.

    The final weights (``checkpoints/model.pt``) are saved with no step; their step is
    ``final_step`` when given, else the metadata's ``step``, else the last logged evaluation
    plus ``eval_interval`` (their loop evaluates at every multiple of it below max_steps)."""
    path = Path(path)
    if not path.exists():
        raise AuthorsCheckpointError(f"{path} does not exist")
    folder = path if path.is_dir() else path.parent
    meta = _read_metadata(folder)
    steps: dict[int, Path] = {}
    if path.is_dir():
        for sub in sorted(folder.iterdir()):
            if (m := STEP_DIR.fullmatch(sub.name)) and (sub / "model.pt").is_file():
                steps[int(m.group(1))] = sub / "model.pt"
        final = folder / "model.pt"
        if not final.is_file() and not steps:
            raise AuthorsCheckpointError(f"{path} holds neither model.pt nor step_*/model.pt; give their "
                                         f"<config>/checkpoints folder or one model.pt")
    else:
        final = path
    if final.is_file():
        step = final_step if final_step is not None else meta.get("step")
        if step is None:
            logged = meta.get("steps_for_plot") or []
            interval = meta.get("eval_interval") or 0
            step = int(logged[-1]) + int(interval) if logged else (max(steps) + 1 if steps else 0)
        steps[int(step)] = final
    last = max(steps)
    return steps, last, meta


def history_records(meta: dict) -> list[dict]:
    """Their logged histories as metrics.jsonl records: train loss, and their validation loss and
    rule error (which their code measures on sampled generations, hence ``rule_error_sampled``)."""
    rows = []
    cols = [meta.get(k) or [] for k in ("steps_for_plot", "train_loss_history", "val_loss_history",
                                        "rule_error_history")]
    for step, train, val, rule in zip(*cols):
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (step, train, val, rule)):
            continue
        rows.append({"step": int(step), "split": "train", "loss": float(train)})
        rows.append({"step": int(step), "split": "eval", "val_loss": float(val), "rule_error_sampled": float(rule)})
    return rows


def import_checkpoints(path: str | Path, out: str | Path, final_step: int | None = None) -> dict:
    """Write the authors' checkpoints at ``path`` as a tinyscope run directory ``out``; returns
    its results.json. Everything is read and checked before anything is written."""
    from tinyscope.errors import ConfigError
    from tinyscope.models.utils import count_parameters
    from tinyscope.runs import registry
    from tinyscope.runs.lock import run_lock
    from tinyscope.runs.rundir import _config_record, build
    from tinyscope.studies.minimal.experiment import minimal_model
    from tinyscope.train import checkpoint as ckpt

    out = Path(out)
    if final_step is not None and final_step < 0:
        raise ConfigError(f"--final-step {final_step} must be >= 0")
    if (out / "config.json").exists():
        raise ConfigError(f"{out} already holds a run; choose another --out")
    files, last, meta = find_checkpoints(path, final_step)
    states = {step: convert_state(read_state(f), str(f)) for step, f in sorted(files.items())}
    kwargs = model_kwargs(states[last], meta)
    exp = registry.get("plus-last-even")
    cfg = exp.config("paper")
    cfg = dataclasses.replace(cfg, model=minimal_model(**kwargs),
                              task=dataclasses.replace(cfg.task, block_size=kwargs["n_ctx"]))
    task, model = build(exp, cfg)
    expected = model.state_dict()
    for step, state in states.items():
        for name, tensor in state.items():
            if tuple(tensor.shape) != tuple(expected[name].shape):
                raise AuthorsCheckpointError(f"{files[step]}: {name} has shape {list(tensor.shape)}, the model's "
                                             f"is {list(expected[name].shape)}")
    model.load_state_dict(states[last], strict=True)
    model.eval()
    metrics = exp.final_evaluation(cfg, task, model)
    results = {"experiment": exp.name, "preset": "paper", "seed": cfg.seed, "steps": last, "wall_time": None,
               "stopped": "imported", "selected_step": last, "metrics": metrics,
               "selection": {"metric": None, "note": "the authors' final weights"},
               "imported_from": {"format": "creating-transformer", "path": str(Path(path).resolve()),
                                 "steps": sorted(states)},
               "eval_fingerprint": exp.eval_fingerprint(cfg, task), "n_parameters": count_parameters(model)}
    with run_lock(out):  # (creates the folder)
        ckpt.atomic_write_json(out / "config.json", _config_record(exp, "paper", cfg))
        for step, state in states.items():
            model.load_state_dict(state, strict=True)
            ckpt.save_model(out / "checkpoints" / ckpt.step_name(step), model, step=step)
        model.load_state_dict(states[last], strict=True)
        ckpt.save_model(out / "checkpoints" / "best.safetensors", model, step=last, metrics=metrics)
        lines = [json.dumps(r) for r in history_records(meta)]
        lines.append(json.dumps({"step": last, "split": "eval",
                                 **{k: metrics[k] for k in ("rule_error", "rule_error_expected", "rule_loss", "val_loss")
                                    if k in metrics}}))
        ckpt.atomic_write_bytes(out / "metrics.jsonl", ("\n".join(lines) + "\n").encode())
        ckpt.atomic_write_json(out / "results.json", results)
    return results


def cmd_import(args) -> int:
    """``tinyscope import creating-transformer`` (its flags are in :mod:`tinyscope.studies.minimal.cli`)."""
    res = import_checkpoints(args.path, args.out, final_step=args.final_step)
    m = res["metrics"]
    print(f"imported {len(res['imported_from']['steps'])} checkpoints (final step {res['steps']}) into {args.out}: "
          f"rule error {m['rule_error']:.2%}, sampled rule error {m['rule_error_sampled']:.2%}")
    return 0
