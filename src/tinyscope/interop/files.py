"""The folder ``tinyscope export RUN --to transformer-lens OUT`` writes, and reading it back.

::

    OUT/model.safetensors   the weights in the classic HookedTransformer state-dict layout
                            (:mod:`tinyscope.interop.layout`); safetensors, no pickle
    OUT/config.json         the HookedTransformerConfig fields (TransformerLens 4.x:
                            ``TransformerBridgeConfig.from_dict`` takes the same dict)
    OUT/tinyscope.json      where it came from (run, experiment, checkpoint step), the tinyscope
                            config (so ``from_transformer_lens(OUT)`` restores its switches), whether
                            the model has a final norm, and how to load it

Writing and reading need only torch; :func:`tinyscope.interop.bridge.load_transformer_lens` makes a
TransformerLens bridge of the folder (TransformerLens >= 4.3).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tinyscope.errors import CheckpointError
from tinyscope.interop.layout import config_dict, tl_config, to_tl_state_dict
from tinyscope.models.transformer import Transformer
from tinyscope.report.records import read_json
from tinyscope.train.checkpoint import atomic_write_json, load_tensors, save_tensors

WEIGHTS, CONFIG, META = "model.safetensors", "config.json", "tinyscope.json"
FORMAT = "transformer-lens-classic/1"


def save_transformer_lens(model: Transformer, out: str | Path, source: dict[str, Any] | None = None,
                          model_name: str = "tinyscope") -> list[Path]:
    """Write ``model`` to the folder ``out`` (created) as TransformerLens reads it; returns the
    three files. ``source`` (JSON values: run, experiment, step) is recorded in tinyscope.json.
    Raises :class:`~tinyscope.interop.layout.NotRepresentable` before writing anything when
    TransformerLens cannot represent the model."""
    state = to_tl_state_dict(model)  # checks first: nothing is written for a model TL cannot hold
    tl = tl_config(model.cfg, model_name)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_tensors(out / WEIGHTS, state)
    atomic_write_json(out / CONFIG, tl)
    atomic_write_json(out / META, {
        "format": FORMAT,
        "transformer_lens": ">=4.3 (TransformerBridge over its native model); the classic layout of HookedTransformer",
        "load": "from tinyscope.interop import load_transformer_lens; bridge = load_transformer_lens(FOLDER)",
        "final_norm": model.cfg.final_norm,
        "blocks_norm": model.cfg.norm,
        "tinyscope_config": config_dict(model.cfg),
        "source": source or {},
    })
    return [out / WEIGHTS, out / CONFIG, out / META]


def read_export(out: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, Any]]:
    """The classic state dict, the TransformerLens config and tinyscope.json of an export folder
    (tinyscope.json may be absent: a folder any tool wrote in this layout reads too)."""
    out = Path(out)
    for name in (WEIGHTS, CONFIG):
        if not (out / name).is_file():
            raise CheckpointError(f"{out} is not a TransformerLens export: {name} is missing "
                                  f"(`tinyscope export RUN --to transformer-lens {out}` writes one)")
    state, _ = load_tensors(out / WEIGHTS)
    tl = read_json(out / CONFIG)
    meta = read_json(out / META) if (out / META).is_file() else {}
    return state, tl, meta
