"""Fig. 1: the architecture of a run's model, drawn from its own shapes (Mahajne & Moldwin, Sec. 2.2).

:func:`architecture_parts` reads the model's config and parameters: for each part (token and
position embeddings, each layer's attention and feed-forward network, norms, LM head) its
shapes and parameter count, so the diagram says what this model is, not what the paper's was.
"""
from __future__ import annotations

from dataclasses import dataclass

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from tinyscope.interp.plotting import new_figure
from tinyscope.studies.minimal import style as st

EMBED_C, ATTN_C, FFN_C, OUT_C = "#dbe9f6", "#fdf3d6", "#f8d9d9", "#d8f2e4"


@dataclass(frozen=True)
class Part:
    """One box of the diagram: a name, the lines under it (shapes), its parameter count, colour."""

    name: str
    lines: tuple[str, ...]
    n_params: int
    colour: str


def _count(model, prefix: str) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if n.startswith(prefix))


def _shape(model, name: str) -> str:
    params = dict(model.named_parameters())
    return "x".join(str(s) for s in params[name].shape) if name in params else "-"


def architecture_parts(model) -> tuple[dict, list[Part]]:
    """(dims, parts): the model's sizes (V, T, D, heads, d_head, d_mlp, layers) and its parts in
    forward order with their parameter counts (which sum to the model's)."""
    cfg = model.cfg
    n_layers = len(model.blocks)
    heads = list(cfg.n_heads) if isinstance(cfg.n_heads, (list, tuple)) else [cfg.n_heads] * n_layers
    mlps = list(cfg.d_mlp) if isinstance(cfg.d_mlp, (list, tuple)) else [cfg.d_mlp] * n_layers
    d_head = model.blocks[0].attn.d_head
    dims = dict(V=cfg.vocab_size, T=cfg.n_ctx, D=cfg.d_model, heads=heads, d_head=d_head, d_mlp=mlps,
                layers=n_layers, total=sum(p.numel() for p in model.parameters()))
    parts = [Part("token embedding x = W_E[t]", (f"W_E {_shape(model, 'W_E.weight')}",), _count(model, "W_E."),
                  EMBED_C),
             Part("position embedding p = W_pos[i]", (f"W_pos {_shape(model, 'W_pos.weight')}",),
                  _count(model, "W_pos."), EMBED_C)]
    for layer in range(n_layers):
        pre = f"blocks.{layer}."
        q = _shape(model, pre + "attn.W_Q.weight")
        bias = " + bias" if cfg.qkv_bias else ""
        out = f"; W_O {_shape(model, pre + 'attn.W_O.weight')}" if cfg.attn_out_proj else ""
        parts.append(Part(f"causal attention, layer {layer}: {heads[layer]} head(s), d_k = {d_head}",
                          (f"W_Q, W_K, W_V {q} each{bias}{out}", "A = causal softmax(Q K^T / sqrt(d_k)); Attn = A V"),
                          _count(model, pre + "attn."), ATTN_C))
        act = getattr(cfg, "act", "relu")
        parts.append(Part(f"feed-forward, layer {layer}: {cfg.d_model} -> {mlps[layer]} -> {cfg.d_model}",
                          (f"W_in {_shape(model, pre + 'mlp.W_in.weight')}, {act}, "
                           f"W_out {_shape(model, pre + 'mlp.W_out.weight')}",),
                          _count(model, pre + "mlp."), FFN_C))
        norms = _count(model, pre) - _count(model, pre + "attn.") - _count(model, pre + "mlp.")
        if norms:
            parts.append(Part(f"layer norms, layer {layer}", (cfg.norm,), norms, FFN_C))
    final = sum(p.numel() for n, p in model.named_parameters() if n.startswith(("ln_final", "norm_final")))
    if final:
        parts.append(Part("final norm", (cfg.norm,), final, OUT_C))
    bias = " + bias" if cfg.unembed_bias else ""
    parts.append(Part("LM head: logits = h W_U^T + b", (f"W_U {_shape(model, 'W_U.weight')}{bias}",),
                      _count(model, "W_U."), OUT_C))
    return dims, parts


def architecture_figure(model):
    """Fig. 1: the forward pass e = x + p, z = e + Attn(e), h = z + FFN(z), P = softmax(LM(h)) as
    boxes with this model's shapes and parameter counts, the residual connections drawn beside."""
    dims, parts = architecture_parts(model)
    fig = new_figure(5.2, 1.05 * len(parts) + 2.2, layout=None)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    n = len(parts)
    height = n + 2.2
    ax.set_xlim(0, 10), ax.set_ylim(0, height)
    y = height - 0.55
    ax.text(5, y, f"input tokens: (B, T <= {dims['T']}), ids in 0..{dims['V'] - 1}", ha="center", va="center",
            fontsize=st.LABEL, weight="bold")
    centres = []
    for part in parts:
        y -= 1.0
        box = FancyBboxPatch((1.6, y - 0.38), 6.8, 0.76, boxstyle="round,pad=0.02,rounding_size=0.12",
                             fc=part.colour, ec="0.3", lw=0.8)
        ax.add_patch(box)
        ax.text(5, y + 0.16, part.name, ha="center", va="center", fontsize=st.LABEL, weight="bold")
        ax.text(5, y - 0.17, "; ".join(part.lines[:1]) + f"  [{part.n_params} params]", ha="center", va="center",
                fontsize=st.TICK)
        centres.append(y)
    y -= 0.85
    ax.text(5, y, f"P(next token) = softmax(logits): (B, T, {model.cfg.d_vocab_out or dims['V']})", ha="center",
            va="center", fontsize=st.LABEL, weight="bold")
    tops = [height - 0.55 - 0.2] + [c - 0.38 for c in centres]  # where each arrow leaves
    ends = [c + 0.38 for c in centres] + [y + 0.2]  # and where it arrives
    for a, b in zip(tops, ends):
        ax.add_patch(FancyArrowPatch((5, a), (5, b), arrowstyle="-|>", mutation_scale=8, color="0.3", lw=0.8))
    _residuals(ax, parts, centres)
    ax.text(5.15, centres[1] - 0.5, "e = x + p", ha="left", va="center", fontsize=st.TICK, color="tab:blue",
            style="italic")
    fig.text(0.5, 0.012, f"d_model = {dims['D']}, n_ctx = {dims['T']}, vocab = {dims['V']}, "
             f"{dims['layers']} layer(s); {dims['total']} parameters in all", ha="center", va="bottom",
             fontsize=st.TICK)
    fig.suptitle("Architecture of this run's model (Fig. 1)", fontsize=st.SUPTITLE, y=0.995)
    return fig


def _residuals(ax, parts: list[Part], centres: list[float]) -> None:
    """The residual connections: the stream skips each attention and feed-forward box (left)."""
    for part, y in zip(parts, centres):
        if part.colour not in (ATTN_C, FFN_C) or part.name.startswith("layer norms"):
            continue
        name = "z = e + Attn(e)" if part.colour == ATTN_C else "h = z + FFN(z)"
        ax.add_patch(FancyArrowPatch((1.6, y + 0.55), (1.6, y - 0.55), connectionstyle="arc3,rad=0.6",
                                     arrowstyle="-|>", mutation_scale=7, color="tab:green", lw=0.9))
        ax.text(1.0, y, "+", ha="center", va="center", fontsize=st.LABEL, color="tab:green", weight="bold")
        ax.text(5.15, y - 0.5, name, ha="left", va="center", fontsize=st.TICK, color="tab:green", style="italic")
