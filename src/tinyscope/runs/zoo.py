"""The zoo: small trained models behind the met claims, each a run directory anyone can re-evaluate.

An entry ``zoo/<name>/`` holds::

    config.json                    the run's config (experiment, preset, seed, every field)
    results.json                   the run's own final evaluation
    checkpoints/best.safetensors   the selected weights only (fp32; over 4 MB, fp16, or bf16 past fp16's range)
    zoo.json                       name, experiment, preset, seed, --set values, dtype, the claims
                                   it backs and the commands that made and re-check it
    README.md                      one line: the command and the claims

Every command that takes a run directory takes ``zoo:NAME`` (``tinyscope eval zoo:NAME --seed S``
re-evaluates it on a fresh set). The zoo folder is ``$TINYSCOPE_ZOO`` or ``zoo/`` at the top of
the source tree; the whole zoo is kept under :data:`ZOO_LIMIT_BYTES`. Entries are written by
:func:`tinyscope.runs.reproduce.export_entry` (this module stays below the run code: it only
finds entries).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tinyscope.errors import CheckpointError, ConfigError

ZOO_PREFIX = "zoo:"
ZOO_LIMIT_BYTES = 64 * 2**20
HALF_ABOVE_BYTES = 4 * 2**20  # fp32 weights larger than this are stored in 16 bits (half_dtype)
FP16_SAFE_MAX = 6.0e4         # fp16's largest finite value is 65,504


def half_dtype(state: dict) -> str:
    """The 16-bit dtype a large entry's floating-point weights are stored in: float16 (10 mantissa
    bits) when every weight is within its range, else bfloat16 (7 bits, fp32's range); bf16's
    rounding alone can move a rule that sits at a pass mark across it (docs/results/theia.md)."""
    peak = max((float(v.abs().max()) for v in state.values() if v.is_floating_point() and v.numel()),
               default=0.0)
    return "float16" if peak < FP16_SAFE_MAX else "bfloat16"


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
