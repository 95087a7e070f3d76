"""Hook points and the hooked-module base, in TransformerLens's conventions.

A :class:`HookPoint` is an identity placed on every interesting activation. With no hook
attached its call is a single attribute test (it bypasses ``nn.Module.__call__``), so a
model with no hooks runs at full speed. :class:`HookedModule` names every hook point by its
module path (``blocks.0.attn.hook_pattern``) and offers:

* ``run_with_cache(tokens, names_filter=...) -> (out, ActivationCache)``
* ``run_with_hooks(tokens, fwd_hooks=[(name_or_filter, fn)])`` where ``fn(tensor, hook=hp)``
  may return a replacement tensor (``None`` keeps the original);
* ``hooks(fwd_hooks)``: a context manager that attaches hooks and always removes them.

The token input of ``run_with_cache`` / ``run_with_hooks`` is checked by the model's
``forward``, once per call (:mod:`tinyscope.models.inputs`). An unknown hook name raises
:class:`HookNameError` (an :class:`~tinyscope.errors.InputError` that is also a ``KeyError``), a
malformed ``fwd_hooks`` entry or a hook returning the wrong shape an ``InputError``.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator, Sequence, Union

import torch
from torch import nn

from tinyscope.errors import InputError

HookFn = Callable[..., "torch.Tensor | None"]
NameFilter = Union[None, str, Sequence[str], Callable[[str], bool]]

# Short names accepted by ``cache[name, layer]``, as in TransformerLens's ``get_act_name``.
_BLOCK_HOOKS = {"resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out"}
_ATTN_HOOKS = {"q", "k", "v", "z", "attn_scores", "pattern", "result"}
_MLP_HOOKS = {"pre", "post"}
_ALIASES = {"scores": "attn_scores", "attn": "pattern"}


class HookNameError(InputError, KeyError):
    """A hook name that the model or the cache does not have; the message lists the ones it has."""

    def __str__(self) -> str:  # a KeyError would print its message quoted
        return str(self.args[0]) if self.args else ""


def act_name(name: str, layer: int | None = None) -> str:
    """Full hook name for a short name: ``act_name("pattern", 0) == "blocks.0.attn.hook_pattern"``."""
    if "." in name or name.startswith("hook_"):
        return name
    name = _ALIASES.get(name, name)
    if layer is None:
        return f"hook_{name}"
    if name in _BLOCK_HOOKS:
        return f"blocks.{layer}.hook_{name}"
    if name in _ATTN_HOOKS:
        return f"blocks.{layer}.attn.hook_{name}"
    if name in _MLP_HOOKS:
        return f"blocks.{layer}.mlp.hook_{name}"
    return f"blocks.{layer}.hook_{name}"


class HookPoint(nn.Module):
    """Identity on an activation that user functions can read or replace."""

    def __init__(self) -> None:
        super().__init__()
        self.name: str = ""
        self._fns: list[HookFn] = []

    def add_hook(self, fn: HookFn) -> Callable[[], None]:
        """Attach ``fn(tensor, hook=self)``; returns a function that removes it."""
        self._fns.append(fn)

        def remove() -> None:
            if fn in self._fns:
                self._fns.remove(fn)

        return remove

    def remove_hooks(self) -> None:
        self._fns.clear()

    @property
    def has_hooks(self) -> bool:
        return bool(self._fns)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # bypasses nn.Module.__call__: no cost when idle
        if not self._fns:
            return x
        for fn in list(self._fns):
            out = fn(x, hook=self)
            if out is not None:
                if out.shape != x.shape:
                    raise InputError(f"hook on {self.name} returned shape {tuple(out.shape)}, expected "
                                     f"{tuple(x.shape)}: a hook returns None or a tensor of its input's shape")
                x = out
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def extra_repr(self) -> str:
        return self.name


class ActivationCache:
    """Activations by hook name; ``cache["pattern", 0]`` expands short names like TransformerLens."""

    def __init__(self, store: dict[str, torch.Tensor]):
        self._store = store

    def __getitem__(self, key: str | tuple) -> torch.Tensor:
        full = act_name(*key) if isinstance(key, tuple) else act_name(key)
        try:
            return self._store[full]
        except KeyError:
            raise HookNameError(f"no activation {full!r} in the cache; it holds: {', '.join(self._store)}") from None

    def __contains__(self, key: object) -> bool:
        full = act_name(*key) if isinstance(key, tuple) else act_name(str(key))
        return full in self._store

    def __iter__(self) -> Iterator[str]:
        return iter(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def keys(self):
        return self._store.keys()

    def items(self):
        return self._store.items()

    def to(self, device: str | torch.device) -> "ActivationCache":
        return ActivationCache({k: v.to(device) for k, v in self._store.items()})

    def __repr__(self) -> str:
        return f"ActivationCache({len(self._store)} activations)"


def _matcher(names: NameFilter) -> Callable[[str], bool]:
    if names is None:
        return lambda _: True
    if isinstance(names, str):
        return lambda n: n == names
    if callable(names):
        return names
    wanted = set(names)
    return lambda n: n in wanted


class HookedModule(nn.Module):
    """Base class of every tinyscope model: names its hook points and runs them."""

    def setup_hooks(self) -> None:
        """Name every HookPoint by its module path. Call at the end of ``__init__``."""
        self.hook_dict: dict[str, HookPoint] = {}
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name
                self.hook_dict[name] = module

    @property
    def hook_names(self) -> list[str]:
        return list(self.hook_dict)

    def _resolve(self, name_or_filter: str | Callable[[str], bool]) -> list[HookPoint]:
        if not (callable(name_or_filter) or isinstance(name_or_filter, str)):
            raise InputError(f"a hook target must be a hook name or a filter function of the name, got "
                             f"{type(name_or_filter).__name__} {name_or_filter!r}")
        if callable(name_or_filter):
            points = [hp for n, hp in self.hook_dict.items() if name_or_filter(n)]
        else:
            full = act_name(name_or_filter)
            if full not in self.hook_dict:
                raise HookNameError(f"unknown hook {full!r}; this model has: {', '.join(self.hook_dict)}")
            points = [self.hook_dict[full]]
        return points

    @contextlib.contextmanager
    def hooks(self, fwd_hooks: Iterable[tuple[str | Callable[[str], bool], HookFn]] = ()):
        """Attach ``fwd_hooks`` for the duration of the block; always removes them."""
        removers: list[Callable[[], None]] = []
        try:
            for entry in fwd_hooks:
                if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and callable(entry[1])):
                    raise InputError(f"fwd_hooks entries are (name or filter, fn(tensor, hook)) pairs, got {entry!r}")
                target, fn = entry
                for hp in self._resolve(target):
                    removers.append(hp.add_hook(fn))
            yield self
        finally:
            for remove in removers:
                remove()

    def reset_hooks(self) -> None:
        for hp in self.hook_dict.values():
            hp.remove_hooks()

    def run_with_hooks(self, *args, fwd_hooks=(), **kwargs):
        with self.hooks(fwd_hooks):
            return self(*args, **kwargs)

    def run_with_cache(self, *args, names_filter: NameFilter = None, detach: bool = True, **kwargs):
        """Run the model and return ``(output, ActivationCache)`` of the hooks that ``names_filter`` selects."""
        match = _matcher(names_filter)
        store: dict[str, torch.Tensor] = {}

        def save(x: torch.Tensor, hook: HookPoint):
            store[hook.name] = x.detach() if detach else x
            return None

        targets = [(n, save) for n in self.hook_dict if match(n)]
        with self.hooks(targets):
            out = self(*args, **kwargs)
        return out, ActivationCache(store)
