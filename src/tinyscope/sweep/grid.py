"""Sweep specification and grid expansion.

``--grid KEY=V1,V2`` lists values of one config field; the sweep runs the Cartesian product of
all grids times every seed. Values are split on top-level commas, so list values keep theirs:
``--grid model.n_heads=[1],[2]`` gives ``[1]`` and ``[2]``. Each run gets a directory
``runs/<setting>/s<seed>`` whose setting name lists the grid values (``default`` without a grid).
"""
from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import asdict, dataclass, field

from tinyscope.errors import ConfigError


def split_values(text: str) -> list[str]:
    """Split ``text`` on commas that are not inside brackets or braces."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return [v for v in out if v != ""]


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``["train.lr=1e-3,3e-4", "model.d_model=2,4"]`` -> ``{"train.lr": [...], ...}`` (order kept)."""
    grid: dict[str, list[str]] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--grid {item!r} must look like KEY=V1,V2 (e.g. train.lr=1e-3,3e-4)")
        key, values = item.split("=", 1)
        key = key.strip()
        if key == "seed":
            raise ConfigError("--grid seed=... is not a grid: give the seeds with --seeds 42 43 44")
        if key in grid:
            raise ConfigError(f"--grid {key} is given twice; list all its values in one --grid")
        vals = split_values(values)
        if not vals:
            raise ConfigError(f"--grid {item!r} has no values")
        if len(set(vals)) != len(vals):
            raise ConfigError(f"--grid {item!r} repeats a value")
        grid[key] = vals
    return grid


_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+\-\[\]]")


def setting_name(assignments: list[tuple[str, str]]) -> str:
    """A directory name for one grid point: ``model.d_model=4,train.lr=1e-3``; long or unusual
    values are shortened and made unique with a hash."""
    if not assignments:
        return "default"
    text = ",".join(f"{k}={v}" for k, v in assignments)
    safe = _UNSAFE.sub("_", text)
    if safe != text or len(safe) > 120:
        digest = hashlib.sha1(text.encode()).hexdigest()[:8]
        safe = f"{safe[:100]}-{digest}"
    return safe


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: everything `run_experiment` needs, and where it goes."""

    experiment: str
    preset: str
    seed: int
    grid: tuple[tuple[str, str], ...]          # this run's grid point
    common: tuple[str, ...] = ()                # --set overrides shared by every run
    setting: str = "default"
    group: str = ""                             # a folder above the settings (reproduce: EXP-PRESET)

    @property
    def overrides(self) -> list[str]:
        return list(self.common) + [f"{k}={v}" for k, v in self.grid]

    @property
    def rel_path(self) -> str:
        return f"runs/{self.group}/{self.setting}/s{self.seed}" if self.group else f"runs/{self.setting}/s{self.seed}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["grid"] = [list(kv) for kv in self.grid]
        d["common"] = list(self.common)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        return cls(d["experiment"], d["preset"], int(d["seed"]), tuple(tuple(kv) for kv in d["grid"]),
                   tuple(d.get("common", ())), d.get("setting", "default"), d.get("group", ""))


@dataclass
class SweepSpec:
    experiment: str
    preset: str
    seeds: list[int]
    grid: dict[str, list[str]] = field(default_factory=dict)
    common: list[str] = field(default_factory=list)

    def expand(self) -> list[RunSpec]:
        """Every (grid point, seed), grid points in the order given, seeds innermost."""
        if not self.seeds:
            raise ConfigError("a sweep needs at least one seed (--seeds 42 43 44)")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"--seeds {' '.join(map(str, self.seeds))} repeats a seed")
        keys = list(self.grid)
        runs = []
        for values in itertools.product(*(self.grid[k] for k in keys)):
            point = tuple(zip(keys, values))
            name = setting_name(list(point))
            for seed in self.seeds:
                runs.append(RunSpec(self.experiment, self.preset, int(seed), point, tuple(self.common), name))
        return runs

    def validate(self) -> list[RunSpec]:
        """Expand and build every run's config, so that a bad key or value fails before any run starts."""
        from tinyscope.runs import registry

        exp = registry.get(self.experiment)
        if not exp.trainable:
            raise ConfigError(f"{exp.name} is compiled, not trained: there is nothing to sweep")
        runs = self.expand()
        for spec in runs:
            try:
                exp.config(spec.preset, spec.seed, spec.overrides)
            except ConfigError as exc:
                where = f" (grid point {spec.setting})" if spec.grid else ""
                raise ConfigError(f"{exc}{where}") from None
        return runs
