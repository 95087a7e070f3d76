"""t-SNE pictures of frozen representations (spatial-induction paper, App. I.8, Figures 5-8).

Each stage is embedded on its own: PCA to at most 50 dimensions, then t-SNE (perplexity 30,
PCA initialization, automatic learning rate, seed 42 by default). The figure has one column per
stage; the top row is coloured by neighbourhood configuration, the bottom row by output value.
"""
from __future__ import annotations

import numpy as np


def embed_2d(X: np.ndarray, perplexity: float = 30.0, seed: int = 42, max_iter: int = 1000) -> np.ndarray:
    """(n, D) -> (n, 2): PCA to min(50, D, n) dimensions, then t-SNE."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    n_comp = min(50, X.shape[1], X.shape[0])
    Z = PCA(n_components=n_comp, random_state=seed).fit_transform(X) if X.shape[1] > n_comp else X
    perplexity = min(perplexity, max(2.0, (len(X) - 1) / 3))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", learning_rate="auto", random_state=seed,
                max_iter=max_iter).fit_transform(Z)


def tsne_figure(points: dict[str, np.ndarray], configs: np.ndarray, outputs: np.ndarray, n_configs: int,
                output_label: str = "output", seed: int = 0):
    """2 x S panels: ``points[stage]`` (n, 2) coloured by ``configs`` (top) and ``outputs`` (bottom)."""
    from tinyscope.interp.mpl import plt

    stages = list(points)
    fig, axes = plt.subplots(2, len(stages), figsize=(3.2 * len(stages), 6.4), squeeze=False)
    order = np.random.default_rng(seed).permutation(len(configs))  # shuffled plotting order
    continuous = outputs.dtype.kind == "f" and len(np.unique(outputs)) > 10
    for j, stage in enumerate(stages):
        P = points[stage][order]
        top = axes[0, j].scatter(P[:, 0], P[:, 1], c=configs[order], cmap="tab20" if n_configs <= 20 else "nipy_spectral",
                                 vmin=0, vmax=n_configs - 1, s=3, linewidths=0)
        bottom = axes[1, j].scatter(P[:, 0], P[:, 1], c=outputs[order], cmap="viridis" if continuous else "coolwarm",
                                    s=3, linewidths=0)
        axes[0, j].set_title(stage, fontsize=10)
        for ax in axes[:, j]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_ylabel("coloured by configuration")
    axes[1, 0].set_ylabel(f"coloured by {output_label}")
    fig.colorbar(top, ax=axes[0, :].tolist(), shrink=0.8, label="configuration code")
    fig.colorbar(bottom, ax=axes[1, :].tolist(), shrink=0.8, label=output_label)
    return fig
