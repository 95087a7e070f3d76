"""Hook points and the hooked-module base, in TransformerLens's conventions.

A :class:`HookPoint` is an identity placed on every interesting activation. It is *watched*
when anything would see its value: a tinyscope hook (forward or backward), a PyTorch hook on
the hook point (``register_forward_hook``, ``register_forward_pre_hook``,
``register_full_backward_hook``, …) or a global module hook, or a forward that a tool installed
on the instance (nnsight's envoys do that, see :attr:`HookPoint.has_hooks`). An unwatched hook
point returns its input after a few attribute tests, bypassing ``nn.Module.__call__``, so a
model with no hooks runs at full speed; a watched one goes through ``nn.Module.__call__``,
which runs the PyTorch hooks around :meth:`HookPoint.forward`, which runs the tinyscope hooks.
Models read :attr:`HookPoint.has_hooks` to leave a fused path that would skip a watched hook
point (attention computes its pattern explicitly when its scores or pattern are watched).

:class:`HookedModule` names every hook point by its module path (``blocks.0.attn.hook_pattern``)
and offers TransformerLens's API with its names and semantics:

* ``run_with_cache(tokens, names_filter=..., incl_bwd=False, ...) -> (out, ActivationCache)``;
* ``run_with_hooks(tokens, fwd_hooks=[(name_or_filter, fn)], bwd_hooks=[...], reset_hooks_end=True)``
  where ``fn(tensor, hook=hp)`` may return a replacement tensor (``None`` keeps the original);
  a backward hook gets the gradient of the hook point's output and may return a replacement;
* ``hooks(fwd_hooks, bwd_hooks)``: a context manager that removes the hooks it added when it
  exits, exceptions included (hooks of an enclosing context and permanent ones stay);
* ``add_hook(name_or_filter, fn, dir="fwd"|"bwd", is_permanent=False)``, ``add_perma_hook``,
  ``reset_hooks(including_permanent=False)``.

The token input of ``run_with_cache`` / ``run_with_hooks`` is checked by the model's
``forward``, once per call (:mod:`tinyscope.models.inputs`). An unknown hook name raises
:class:`HookNameError` (an :class:`~tinyscope.errors.InputError` that is also a ``KeyError``), a
malformed hook entry or a hook returning the wrong shape an ``InputError``.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable, Iterable, Literal

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from tinyscope.errors import InputError
from tinyscope.models.cache import ActivationCache, slice_positions
from tinyscope.models.hook_names import HookNameError, NameFilter, act_name, layer_of, name_matcher

__all__ = ["ActivationCache", "HookNameError", "HookPoint", "HookedModule", "act_name"]

HookFn = Callable[..., "torch.Tensor | None"]
Direction = Literal["fwd", "bwd"]
_matcher = name_matcher  # the name studies import

# PyTorch's global module hooks (dicts mutated in place by torch.nn.modules.module.register_module_*).
_G_FWD, _G_PRE = _torch_module._global_forward_hooks, _torch_module._global_forward_pre_hooks
_G_BWD, _G_BWD_PRE = _torch_module._global_backward_hooks, _torch_module._global_backward_pre_hooks


class HookHandle:
    """One hook attached to a hook point; ``handle()`` or ``handle.remove()`` detaches it."""

    __slots__ = ("point", "fn", "dir", "is_permanent", "context_level")

    def __init__(self, point: "HookPoint", fn: HookFn, dir: Direction, is_permanent: bool, context_level: int | None):
        self.point, self.fn, self.dir = point, fn, dir
        self.is_permanent, self.context_level = is_permanent, context_level

    def remove(self) -> None:
        hooks = self.point._fwd if self.dir == "fwd" else self.point._bwd
        if self in hooks:
            hooks.remove(self)

    __call__ = remove

    def matches(self, including_permanent: bool, level: int | None) -> bool:
        return (including_permanent or not self.is_permanent) and (level is None or self.context_level == level)


def _check_dir(dir: str) -> None:
    if dir not in ("fwd", "bwd", "both"):
        raise InputError(f"dir={dir!r}: a hook direction is 'fwd', 'bwd' (or 'both' when removing)")


def _replacement(out, x: torch.Tensor, name: str, what: str) -> torch.Tensor:
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise InputError(f"{what} hook on {name} returned {got}, expected {tuple(x.shape)}: a hook returns None "
                         f"or a tensor of its input's shape")
    return out


class HookPoint(nn.Module):
    """Identity on an activation that user functions can read or replace."""

    def __init__(self) -> None:
        super().__init__()
        self.name: str = ""
        self.ctx: dict = {}  # scratch space shared by the hooks of this point, as TransformerLens's
        self._fwd: list[HookHandle] = []
        self._bwd: list[HookHandle] = []

    def add_hook(self, hook: HookFn, dir: Direction = "fwd", is_permanent: bool = False, level: int | None = None,
                 prepend: bool = False) -> HookHandle:
        """Attach ``hook(tensor, hook=self)`` (``dir="bwd"``: ``hook(grad, hook=self)``); returns its handle."""
        if dir not in ("fwd", "bwd"):
            raise InputError(f"dir={dir!r}: a hook direction is 'fwd' or 'bwd'")
        if not callable(hook):
            raise InputError(f"a hook is a function fn(tensor, hook), got {type(hook).__name__} {hook!r}")
        handle = HookHandle(self, hook, dir, is_permanent, level)
        hooks = self._fwd if dir == "fwd" else self._bwd
        hooks.insert(0, handle) if prepend else hooks.append(handle)
        return handle

    def add_perma_hook(self, hook: HookFn, dir: Direction = "fwd") -> HookHandle:
        return self.add_hook(hook, dir=dir, is_permanent=True)

    def remove_hooks(self, dir: Literal["fwd", "bwd", "both"] = "fwd", including_permanent: bool = False,
                     level: int | None = None) -> None:
        """Detach the hooks of ``dir``; permanent ones only when ``including_permanent``, and only
        those added at context ``level`` when it is given (TransformerLens's semantics)."""
        _check_dir(dir)
        if dir in ("fwd", "both"):
            self._fwd = [h for h in self._fwd if not h.matches(including_permanent, level)]
        if dir in ("bwd", "both"):
            self._bwd = [h for h in self._bwd if not h.matches(including_permanent, level)]

    def clear_context(self) -> None:
        self.ctx = {}

    def layer(self) -> int:
        """``l`` of this hook point's name ``blocks.{l}.…``."""
        return layer_of(self.name)

    @property
    def has_hooks(self) -> bool:
        """Whether anything watches this point: a tinyscope hook, a PyTorch hook on it or a global
        one, or an instance-level ``forward`` (nnsight installs one per module; it counts while one
        of its traces runs, read from the ``state.active()`` its forward carries)."""
        d = self.__dict__
        if (d["_fwd"] or d["_bwd"] or d["_forward_hooks"] or d["_forward_pre_hooks"] or d["_backward_hooks"]
                or d["_backward_pre_hooks"] or _G_FWD or _G_PRE or _G_BWD or _G_BWD_PRE):
            return True
        installed = d.get("forward")
        if installed is None:
            return False
        active = getattr(getattr(installed, "state", None), "active", None)
        return active()[0] is not None if callable(active) else True

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # Unwatched: skip nn.Module.__call__, so an idle hook point costs a few dict lookups.
        d = self.__dict__
        if (d["_fwd"] or d["_bwd"] or d["_forward_hooks"] or d["_forward_pre_hooks"] or d["_backward_hooks"]
                or d["_backward_pre_hooks"] or "forward" in d or _G_FWD or _G_PRE or _G_BWD or _G_BWD_PRE):
            return nn.Module.__call__(self, x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run the forward hooks in order (each sees the previous one's replacement), then, when
        there are backward hooks and ``x`` takes part in autograd, return an alias of ``x`` whose
        gradient the backward hooks read and may replace."""
        for handle in list(self._fwd):
            out = handle.fn(x, hook=self)
            if out is not None:
                x = _replacement(out, x, self.name, "a forward")
        if self._bwd and x.requires_grad:
            x = x.view_as(x)
            x.register_hook(self._backward(list(self._bwd)))
        return x

    def _backward(self, handles: list[HookHandle]) -> Callable[[torch.Tensor], torch.Tensor]:
        def run(grad: torch.Tensor) -> torch.Tensor:
            for handle in handles:
                if handle in self._bwd:  # a hook removed before backward does not fire
                    out = handle.fn(grad, hook=self)
                    if out is not None:
                        grad = _replacement(out, grad, self.name, "a backward")
            return grad

        return run

    def extra_repr(self) -> str:
        return self.name


class HookedModule(nn.Module):
    """Base class of every tinyscope model: names its hook points and runs them."""

    def setup_hooks(self) -> None:
        """Name every HookPoint by its module path. Call at the end of ``__init__``."""
        self.hook_dict: dict[str, HookPoint] = {}
        self.context_level = getattr(self, "context_level", 0)
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name
                self.hook_dict[name] = module

    setup = setup_hooks  # TransformerLens's name

    @property
    def hook_names(self) -> list[str]:
        return list(self.hook_dict)

    def hook_points(self):
        return self.hook_dict.values()

    def _resolve(self, name_or_filter: str | Callable[[str], bool]) -> list[HookPoint]:
        if not (callable(name_or_filter) or isinstance(name_or_filter, str)):
            raise InputError(f"a hook target must be a hook name or a filter function of the name, got "
                             f"{type(name_or_filter).__name__} {name_or_filter!r}")
        if callable(name_or_filter):
            return [hp for n, hp in self.hook_dict.items() if name_or_filter(n)]
        full = act_name(name_or_filter)
        if full not in self.hook_dict:
            raise HookNameError(f"unknown hook {full!r}; this model has: {', '.join(self.hook_dict)}")
        return [self.hook_dict[full]]

    def add_hook(self, name: str | Callable[[str], bool], hook: HookFn, dir: Direction = "fwd",
                 is_permanent: bool = False, level: int | None = None, prepend: bool = False) -> None:
        """Attach ``hook`` to the hook point ``name`` (or to every one a filter function selects).
        It stays until removed: :meth:`reset_hooks` removes it unless ``is_permanent``."""
        for hp in self._resolve(name):
            hp.add_hook(hook, dir=dir, is_permanent=is_permanent, level=level, prepend=prepend)

    def add_perma_hook(self, name: str | Callable[[str], bool], hook: HookFn, dir: Direction = "fwd") -> None:
        self.add_hook(name, hook, dir=dir, is_permanent=True)

    def remove_all_hook_fns(self, direction: Literal["fwd", "bwd", "both"] = "both", including_permanent: bool = False,
                            level: int | None = None) -> None:
        _check_dir(direction)
        for hp in self.hook_dict.values():
            hp.remove_hooks(direction, including_permanent=including_permanent, level=level)

    def clear_contexts(self) -> None:
        for hp in self.hook_dict.values():
            hp.clear_context()

    def reset_hooks(self, clear_contexts: bool = True, direction: Literal["fwd", "bwd", "both"] = "both",
                    including_permanent: bool = False, level: int | None = None) -> None:
        """Remove the hooks (permanent ones too when ``including_permanent``) and clear the hook contexts."""
        if clear_contexts:
            self.clear_contexts()
        self.remove_all_hook_fns(direction, including_permanent, level)

    def _attach(self, entries: Iterable, dir: Direction, level: int) -> None:
        for entry in entries:
            if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and callable(entry[1])):
                raise InputError(f"{dir}_hooks entries are (name or filter, fn(tensor, hook)) pairs, got {entry!r}")
            for hp in self._resolve(entry[0]):
                hp.add_hook(entry[1], dir=dir, level=level)

    @contextlib.contextmanager
    def hooks(self, fwd_hooks: Iterable = (), bwd_hooks: Iterable = (), reset_hooks_end: bool = True,
              clear_contexts: bool = False):
        """Attach ``fwd_hooks`` and ``bwd_hooks`` for the block; on exit (exceptions included)
        remove those it attached, unless ``reset_hooks_end=False`` (needed when a backward pass
        runs after the block)."""
        self.context_level = level = getattr(self, "context_level", 0) + 1
        try:
            self._attach(fwd_hooks, "fwd", level)
            self._attach(bwd_hooks, "bwd", level)
            yield self
        finally:
            if reset_hooks_end:
                self.reset_hooks(clear_contexts, including_permanent=False, level=level)
            self.context_level = level - 1

    def run_with_hooks(self, *args, fwd_hooks: Iterable = (), bwd_hooks: Iterable = (), reset_hooks_end: bool = True,
                       clear_contexts: bool = False, **kwargs):
        """``self(*args, **kwargs)`` with the hooks attached (see :meth:`hooks`)."""
        bwd_hooks = list(bwd_hooks)
        if bwd_hooks and reset_hooks_end:
            warnings.warn("run_with_hooks removes its hooks when the forward ends, before any backward pass can "
                          "run them: pass reset_hooks_end=False and call reset_hooks() after backward()",
                          stacklevel=2)
        with self.hooks(fwd_hooks, bwd_hooks, reset_hooks_end, clear_contexts):
            return self(*args, **kwargs)

    def run_with_cache(self, *args, names_filter: NameFilter = None, detach: bool = True,
                       device: str | torch.device | None = None, remove_batch_dim: bool = False,
                       incl_bwd: bool = False, reset_hooks_end: bool = True, clear_contexts: bool = False,
                       pos_slice=None, **kwargs):
        """Run the model and return ``(output, ActivationCache)`` of the hooks ``names_filter`` selects.

        ``incl_bwd``: also back-propagate the output (a scalar, e.g. ``return_type="loss"``) and
        cache each gradient as ``name + "_grad"``. ``remove_batch_dim`` (batch of one) drops the
        batch axis; ``pos_slice`` keeps those positions (axis -3 of q/k/v/z/result, else -2);
        ``device`` moves what is cached.
        """
        first = args[0] if args else None
        if remove_batch_dim and isinstance(first, torch.Tensor) and first.dim() > 1 and first.shape[0] != 1:
            raise InputError(f"remove_batch_dim=True needs a batch of one; the input has {first.shape[0]} rows")
        match = name_matcher(names_filter)
        store: dict[str, torch.Tensor] = {}

        def saver(suffix: str):
            def save(x: torch.Tensor, hook: HookPoint):
                t = x.detach() if detach else x
                if device is not None:
                    t = t.to(device)
                if remove_batch_dim:
                    t = t[0]
                store[hook.name + suffix] = slice_positions(t, hook.name, pos_slice)
            return save

        names = [n for n in self.hook_dict if match(n)]
        fwd = [(n, saver("")) for n in names]
        bwd = [(n, saver("_grad")) for n in names] if incl_bwd else []
        with self.hooks(fwd, bwd, reset_hooks_end, clear_contexts):
            out = self(*args, **kwargs)
            if incl_bwd:
                if not (isinstance(out, torch.Tensor) and out.numel() == 1 and out.requires_grad):
                    raise InputError("run_with_cache(incl_bwd=True) back-propagates the output, which must be a scalar "
                                     "that requires grad: pass return_type='loss'")
                out.backward()
        return out, ActivationCache(store, self, has_batch_dim=not remove_batch_dim)
