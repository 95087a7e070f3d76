"""Moving models between tinyscope and TransformerLens (the ``interop`` extra: TransformerLens >= 4.3).

* :func:`to_transformer_lens` / :func:`from_transformer_lens`: a live ``TransformerBridge`` over
  TransformerLens's native model, and back;
* :func:`to_tl_state_dict` / :func:`from_tl_state_dict` / :func:`tl_config`: the classic
  ``HookedTransformer`` state-dict layout and config fields (pure torch, no TransformerLens);
* :func:`save_transformer_lens` / :func:`load_transformer_lens`: the folder ``tinyscope export``
  writes (safetensors + config.json);
* :func:`check_representable`: the exact condition, raising :class:`NotRepresentable` naming the
  layer and the field.

TransformerLens is imported only by the functions that build or read a bridge. See docs/interop.md.
"""
from tinyscope.interop.bridge import from_transformer_lens, load_transformer_lens, to_transformer_lens
from tinyscope.interop.files import read_export, save_transformer_lens
from tinyscope.interop.layout import (
    NotRepresentable,
    check_representable,
    from_tl_state_dict,
    problems,
    representable,
    tl_config,
    to_tl_state_dict,
)

__all__ = [
    "NotRepresentable", "check_representable", "from_tl_state_dict", "from_transformer_lens",
    "load_transformer_lens", "problems", "read_export", "representable", "save_transformer_lens",
    "tl_config", "to_tl_state_dict", "to_transformer_lens",
]
