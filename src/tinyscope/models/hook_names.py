"""Hook names in TransformerLens's conventions: short names, name filters, the layer of a name.

``act_name("pattern", 0) == "blocks.0.attn.hook_pattern"`` as TransformerLens's ``get_act_name``;
a *name filter* is ``None`` (every hook), one name, a list of names or a predicate on the name;
the *layer* of a hook is ``l`` in ``blocks.{l}.…``.
"""
from __future__ import annotations

from typing import Callable, Sequence, Union

from tinyscope.errors import InputError

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


def act_name(name: str, layer: int | None = None, layer_type: str | None = None) -> str:
    """Full hook name for a short name: ``act_name("pattern", 0) == "blocks.0.attn.hook_pattern"``.

    ``layer_type`` (``"attn"``, ``"mlp"`` or ``None``) is accepted as in TransformerLens; the
    short names here are unambiguous, so it only has to agree with them.
    """
    if "." in name or name.startswith("hook_"):
        return name
    name = _ALIASES.get(name, name)
    if layer is None:
        return f"hook_{name}"
    if name in _ATTN_HOOKS or layer_type == "attn":
        return f"blocks.{layer}.attn.hook_{name}"
    if name in _MLP_HOOKS or layer_type == "mlp":
        return f"blocks.{layer}.mlp.hook_{name}"
    return f"blocks.{layer}.hook_{name}"


def name_matcher(names: NameFilter) -> Callable[[str], bool]:
    """The predicate a name filter stands for."""
    if names is None:
        return lambda _: True
    if isinstance(names, str):
        return lambda n: n == names
    if callable(names):
        return names
    wanted = set(names)
    return lambda n: n in wanted


def layer_of(name: str) -> int:
    """``l`` of a hook named ``blocks.{l}.…``; an :class:`InputError` for any other name."""
    parts = name.split(".")
    if len(parts) < 3 or parts[0] != "blocks" or not parts[1].isdigit():
        raise InputError(f"hook {name!r} is not inside a layer: layer() reads l from names 'blocks.l.…'")
    return int(parts[1])
