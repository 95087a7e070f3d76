"""The zoo: small trained models behind the met claims, each a run directory anyone can re-evaluate.

An entry ``zoo/<name>/`` holds::

    config.json                    the run's config (experiment, preset, seed, every field)
    results.json                   the run's own final evaluation
    checkpoints/best.safetensors   the selected weights only (fp32; bf16 for a model over 4 MB)
    zoo.json                       name, experiment, preset, seed, --set values, dtype, the claims
                                   it backs and the commands that made and re-check it
    README.md                      one line: the command and the claims

Every command that takes a run directory takes ``zoo:NAME`` (``tinyscope eval zoo:NAME --seed S``
re-evaluates it on a fresh set). The zoo folder is ``$TINYSCOPE_ZOO`` or ``zoo/`` at the top of
the source tree; the whole zoo is kept under :data:`ZOO_LIMIT_BYTES`.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from tinyscope.errors import CheckpointError, ConfigError

ZOO_PREFIX = "zoo:"
ZOO_LIMIT_BYTES = 64 * 2**20
BF16_ABOVE_BYTES = 4 * 2**20  # fp32 weights larger than this are stored in bf16


def zoo_dir() -> Path:
    env = os.environ.get("TINYSCOPE_ZOO")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "zoo"


@dataclass(frozen=True)
class ZooEntry:
    name: str
    path: Path
    info: dict

    @property
    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())


def entries(root: Path | None = None) -> list[ZooEntry]:
    root = root or zoo_dir()
    out = []
    for d in sorted(root.glob("*/zoo.json")) if root.is_dir() else ():
        try:
            info = json.loads(d.read_text())
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"{d} is not valid JSON ({exc.msg}); restore it with git") from None
        out.append(ZooEntry(d.parent.name, d.parent, info))
    return out


def resolve(path: str | Path) -> Path:
    """A run directory path; ``zoo:NAME`` is the zoo entry NAME."""
    text = str(path)
    if not text.startswith(ZOO_PREFIX):
        return Path(path)
    name = text[len(ZOO_PREFIX):]
    p = zoo_dir() / name
    if not name or "/" in name or not (p / "zoo.json").is_file():
        known = ", ".join(e.name for e in entries()) or "none yet"
        raise ConfigError(f"no zoo entry {name!r}; `tinyscope zoo list` shows them ({known})")
    return p


def export(run_path: Path, name: str, claims: list[str], command: str, root: Path | None = None) -> ZooEntry:
    """Copy the selected model of the run at ``run_path`` into the zoo as ``name`` (replacing an
    older entry of that name): config.json, results.json, the weights only, zoo.json, README.md."""
    import torch

    from tinyscope.runs.rundir import load_run
    from tinyscope.train import checkpoint as ckpt

    root = root or zoo_dir()
    run = load_run(run_path, "best")
    state = ckpt.unwrap(run.model).state_dict()
    n_bytes = sum(t.numel() * t.element_size() for t in state.values())
    dtype = "bfloat16" if n_bytes > BF16_ABOVE_BYTES else "float32"
    if dtype == "bfloat16":
        state = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in state.items()}
    tmp = root / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "checkpoints").mkdir(parents=True)
    shutil.copy2(run_path / "config.json", tmp / "config.json")
    shutil.copy2(run_path / "results.json", tmp / "results.json")
    ckpt.save_tensors(tmp / "checkpoints" / "best.safetensors", {k: v.contiguous() for k, v in state.items()},
                      {"step": run.step, "zoo_dtype": dtype})
    cfg_record = json.loads((run_path / "config.json").read_text())
    info = {"name": name, "experiment": run.experiment.name, "preset": run.preset, "seed": run.cfg.seed,
            "step": run.step, "stage": run.stage, "dtype": dtype, "claims": sorted(claims), "command": command,
            "recheck": f"tinyscope eval zoo:{name} --seed 12345", "exported": time.strftime("%Y-%m-%d"),
            "tinyscope_version": cfg_record.get("tinyscope_version")}
    ckpt.atomic_write_json(tmp / "zoo.json", info)
    (tmp / "README.md").write_text(f"`{command}` (the median seed, {run.cfg.seed}; weights {dtype}) backs "
                                   f"{', '.join(f'`{c}`' for c in sorted(claims))}; recheck with "
                                   f"`tinyscope eval zoo:{name} --seed 12345`.\n")
    final = root / name
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    total = sum(e.size_bytes for e in entries(root))
    if total > ZOO_LIMIT_BYTES:
        raise ConfigError(f"the zoo is now {total / 2**20:.1f} MB, over its {ZOO_LIMIT_BYTES // 2**20} MB limit; "
                          f"remove an entry (zoo/{name} was written)")
    return ZooEntry(name, final, info)
