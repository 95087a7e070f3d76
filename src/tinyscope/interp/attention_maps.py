"""Attention maps of any layer and head: over the token stream, and for cellular-automaton
streams over the grid, with the weight on each earlier cell laid out at its (t, z) address
(spatial-induction paper, Figure 2)."""
from __future__ import annotations

import numpy as np


def stream_attention_figure(pattern_row: np.ndarray, tokens: np.ndarray, query: int, title: str = "",
                            vocab: list[str] | None = None):
    """Bar chart of one attention row (T,) over the token stream, the query position marked."""
    from tinyscope.interp.mpl import plt

    T = query + 1
    fig, ax = plt.subplots(figsize=(max(6, 0.12 * T), 2.6))
    ax.bar(np.arange(T), pattern_row[:T], width=0.9, color="tab:blue")
    ax.axvline(query, color="tab:red", lw=1, ls="--", label="query")
    if T <= 80:
        labels = [vocab[t] if vocab else str(t) for t in tokens[:T]]
        ax.set_xticks(np.arange(T), labels, fontsize=6)
    ax.set_ylabel("attention")
    ax.set_title(title or f"attention of position {query}")
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    return fig


def grid_attention(pattern_row: np.ndarray, layout, query: int) -> np.ndarray:
    """Attention weights of one row (N_in,) placed at each cell's (t, z): (T, *shape), NaN where
    the cell comes after the query (not visible under the causal mask)."""
    pos = layout.cell_positions()  # (T, *shape) stream positions
    vals = np.full(pos.shape, np.nan)
    visible = pos <= query
    vals[visible] = pattern_row[pos[visible]]
    return vals


def grid_attention_figure(pattern_row: np.ndarray, layout, query: int, title: str = "", steps: int | None = None):
    """Heat map of one attention row on the grid; the query cell (when the query token is a cell)
    is boxed in red and the target cell in green. 1D grids: one (t, z) image; 2D grids: one panel per
    step for the last ``steps`` visible steps (default 3)."""
    from matplotlib.patches import Rectangle

    from tinyscope.interp.mpl import plt

    vals = grid_attention(pattern_row, layout, query)
    t_q, z_q, q_is_cell = layout.unrho(np.array(query))
    cmap = plt.get_cmap("magma").with_extremes(bad="lightgray")
    t_t, z_t, _ = layout.unrho(np.array(query + 1))
    W = layout.lattice.row_length
    if layout.lattice.dim == 1:
        fig, ax = plt.subplots(figsize=(0.28 * W + 2, 0.28 * layout.T + 1.2))
        im = ax.imshow(vals, cmap=cmap, vmin=0, vmax=np.nanmax(vals) if np.isfinite(vals).any() else 1,
                       aspect="auto")
        if q_is_cell:
            ax.add_patch(Rectangle((int(z_q[0]) - 0.5, int(t_q) - 0.5), 1, 1, fill=False, ec="tab:red", lw=2))
        ax.add_patch(Rectangle((int(z_t[0]) - 0.5, int(t_t) - 0.5), 1, 1, fill=False, ec="tab:green", lw=2))
        ax.set_xlabel("cell z")
        ax.set_ylabel("time step t")
        fig.colorbar(im, ax=ax, label="attention")
    else:
        n = min(steps or 3, int(t_t) + 1)
        first = int(t_t) - n + 1
        fig, axes = plt.subplots(1, n, figsize=(3.2 * n + 1, 3.2), squeeze=False)
        vmax = np.nanmax(vals) if np.isfinite(vals).any() else 1
        for i, t in enumerate(range(first, int(t_t) + 1)):
            ax = axes[0, i]
            im = ax.imshow(vals[t], cmap=cmap, vmin=0, vmax=vmax)
            ax.set_title(f"t = {t}", fontsize=9)
            if t == int(t_t):
                ax.add_patch(Rectangle((z_t[1] - 0.5, z_t[0] - 0.5), 1, 1, fill=False, ec="tab:green", lw=2))
            ax.set_xticks([])
            ax.set_yticks([])
        fig.colorbar(im, ax=axes[0].tolist(), label="attention")
    kind = "cell, red" if q_is_cell else "a separator"
    fig.suptitle(f"{title or f'attention of query {query}'} (query token: {kind}; target: green; gray: not visible)",
                 fontsize=9)
    return fig
