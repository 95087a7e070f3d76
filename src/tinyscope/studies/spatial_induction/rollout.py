"""Autoregressive rollouts of cellular-automaton streams (App. I.3) and the Figure 1 panels.

The model is given the ground-truth stream of steps 0..T0-1 (through the TIME_SEP that closes
step T0-1) and generates every later cell; separators are inserted at their fixed positions,
never sampled. Decoding uses :class:`~tinyscope.models.kv_cache.KVCacheDecoder`, so a rollout
costs about one forward pass. The model's predictive distribution over states is the softmax
of its first V logits.
"""
from __future__ import annotations

import numpy as np
import torch

from tinyscope.errors import TinyscopeError
from tinyscope.models.kv_cache import KVCacheDecoder
from tinyscope.studies.spatial_induction.bayes import posterior_predictive
from tinyscope.studies.spatial_induction.evolve import parent_codes
from tinyscope.studies.spatial_induction.lattice import Lattice
from tinyscope.studies.spatial_induction.metrics import kl
from tinyscope.studies.spatial_induction.serialize import Layout


@torch.no_grad()
def generate(model: torch.nn.Module, layout: Layout, traj: np.ndarray, T0: int, greedy: bool = True,
             generator: torch.Generator | None = None, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Roll the model out from the first ``T0`` steps of ``traj`` (B, T, *shape).

    Returns the completed trajectories (B, T, *shape) uint8 (steps < T0 copied) and the model's
    state distribution before each generated cell, (B, T, *shape, V) float64 (NaN for t < T0).
    """
    V = layout.V
    device = next(model.parameters()).device
    stream = torch.from_numpy(layout.serialize(traj)).to(device)  # (B, N-1)
    B = stream.shape[0]
    pos = layout.cell_positions().reshape(layout.T, -1)  # (T, |G|)
    start = int(pos[T0, 0])  # first generated stream position
    cell_at = np.full(layout.stream_length, -1, dtype=np.int64)
    cell_at[pos.ravel()] = np.arange(pos.size)
    out = stream.clone()
    probs = np.full((B, pos.size, V), np.nan)
    dec = KVCacheDecoder(model)
    logits = dec.prefill(out[:, :start])[:, -1]  # (B, n_out): predicts position `start`
    for n in range(start, layout.stream_length):
        c = cell_at[n]
        if c >= 0:  # a cell: choose it from the model
            p = torch.softmax(logits[:, :V].double() / temperature, dim=-1)  # (B, V)
            probs[:, c] = p.cpu().numpy()
            if greedy:
                out[:, n] = p.argmax(-1)
            else:
                out[:, n] = torch.multinomial(p, 1, generator=generator)[:, 0]
        if n + 1 < layout.stream_length:
            logits = dec.step(out[:, n])  # (B, n_out) predicts position n + 1
    gen = layout.deserialize(out.cpu().numpy())
    return gen, probs.reshape(*traj.shape, V)


def kgram_rollout(lattice: Lattice, traj: np.ndarray, T0: int, rng: np.random.Generator, alpha: float = 1.0) -> np.ndarray:
    """The posterior-predictive sampling baseline: from the true first ``T0`` steps, sample every
    later cell in stream order from the add-``alpha`` k-gram predictive of its own history."""
    B, T = traj.shape[:2]
    V, C, G = lattice.V, lattice.n_configs, lattice.volume
    out = traj.copy()
    counts = np.zeros((B, C, V), dtype=np.int64)
    codes = parent_codes(lattice, traj[:, :T0]).reshape(B, T0, G)
    rows = np.arange(B)
    for t in range(1, T0):
        np.add.at(counts, (rows[:, None], codes[:, t], traj[:, t].reshape(B, G)), 1)
    flat = out.reshape(B, T, G)
    for t in range(T0, T):
        step_codes = lattice.config_codes(out[:, t - 1]).reshape(B, G)  # (B, |G|) parents are all known
        for z in range(G):
            c = step_codes[:, z]
            n_cy = counts[rows, c]  # (B, V)
            p = (n_cy + alpha) / (n_cy.sum(-1, keepdims=True) + V * alpha)  # (B, V)
            y = (rng.random(B)[:, None] >= np.cumsum(p, -1)[:, :-1]).sum(-1)
            flat[:, t, z] = y
            counts[rows, c, y] += 1
    return out


@torch.no_grad()
def teacher_forced_probs(model: torch.nn.Module, layout: Layout, traj: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """The model's state distribution for every cell under teacher forcing, (B, T, *shape, V);
    uniform for cell (0, 0), which no position predicts."""
    from tinyscope.studies.spatial_induction.metrics import model_logits

    stream = layout.serialize(traj)
    logits = model_logits(model, stream[:, :-1], batch_size)  # (B, N-2, n_out)
    p = torch.softmax(logits[..., :layout.V].double(), -1).numpy()  # (B, N-2, V)
    pos = layout.cell_positions().ravel() - 1
    out = np.full((len(traj), pos.size, layout.V), 1.0 / layout.V)
    out[:, pos >= 0] = p[:, pos[pos >= 0]]
    return out.reshape(*traj.shape, layout.V)


def autoregressive_metrics(model: torch.nn.Module, layout: Layout, traj: np.ndarray, T0: int, stochastic: bool,
                           seed: int = 42, batch_size: int = 256) -> dict:
    """AR metrics of App. I.3 over cells at t >= T0.

    det:   ar_cell_acc (greedy rollout vs ground truth), ar_seq_acc.
    stoch: ar_cell_acc (temperature-1 sample), ar_cell_acc_kgram (independent k-gram sampling
           rollout), ar_kl_kgram = KL(q_kgram || q_model) on the model's own rollout, where
           q_kgram counts the model-generated history (add-one).
    """
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    hits, n_cells, seq_ok, kls, kg_hits = 0, 0, 0, [], 0
    for i in range(0, len(traj), batch_size):
        chunk = traj[i:i + batch_size]
        out, q_model = generate(model, layout, chunk, T0, greedy=not stochastic, generator=gen)
        right = out[:, T0:] == chunk[:, T0:]
        hits += int(right.sum())
        n_cells += right.size
        seq_ok += int(right.reshape(len(chunk), -1).all(-1).sum())
        if stochastic:
            q_kgram = posterior_predictive(layout.lattice, out, alpha=1.0).probs[:, T0:]
            kls.append(kl(torch.from_numpy(q_kgram), torch.log(torch.from_numpy(q_model[:, T0:]))).reshape(-1))
            kg = kgram_rollout(layout.lattice, chunk, T0, rng)
            kg_hits += int((kg[:, T0:] == chunk[:, T0:]).sum())
    result = {"ar_cell_acc": hits / n_cells}
    if stochastic:
        result["ar_cell_acc_kgram"] = kg_hits / n_cells
        result["ar_kl_kgram"] = float(torch.cat(kls).mean())
    else:
        result["ar_seq_acc"] = seq_ok / len(traj)
    return result


def rollout_figure(panels: list[dict], T0: int | None = None):
    """Figure 1 layout: one row per rule, columns ground truth, teacher-forced P(state 1),
    autoregressive rollout. Each panel dict has ``title``, ``truth`` (T, W), ``tf_p1`` (T, W),
    ``rollout`` (T, W) (states or, for a stochastic rollout, per-cell probabilities of state 1),
    and optionally its own ``T0`` (the red line; default ``T0``)."""
    import matplotlib.ticker

    from tinyscope.interp.mpl import plt

    fig, axes = plt.subplots(len(panels), 3, figsize=(9, 3.2 * len(panels)), squeeze=False)
    for row, panel in zip(axes, panels):
        for ax, key, label in zip(row, ("truth", "tf_p1", "rollout"),
                                  ("ground truth", "TF: P(state 1)", panel.get("rollout_label", "autoregressive"))):
            ax.imshow(panel[key], cmap="Greys", vmin=0, vmax=1, interpolation="nearest", aspect="auto")
            ax.axhline(panel.get("T0", T0) - 0.5, color="tab:red", lw=1.2)
            ax.set_title(f"{panel['title']}: {label}", fontsize=8)
            ax.set_xlabel("cell z")
            ax.set_ylabel("time t")
            ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    fig.tight_layout()
    return fig


def rollout_panel(model: torch.nn.Module, layout: Layout, traj: np.ndarray, T0: int, stochastic: bool, title: str,
                  seed: int = 42) -> dict:
    """The three arrays of one Figure 1 row for a single 1D trajectory ``traj`` (1, T, W)."""
    tf = teacher_forced_probs(model, layout, traj)[0, ..., 1]  # (T, W)
    tf[:T0] = traj[0, :T0]
    gen, q = generate(model, layout, traj, T0, greedy=not stochastic, generator=torch.Generator().manual_seed(seed))
    rollout = gen[0].astype(float)
    label = "greedy rollout"
    if stochastic:
        rollout[T0:] = q[0, T0:, :, 1]
        label = "sampled AR: P(state 1)"
    return {"title": title, "truth": traj[0].astype(float), "tf_p1": tf, "rollout": rollout, "rollout_label": label,
            "T0": T0}


def rollout_panel_for_run(run, seed: int = 42) -> dict:
    """The Figure 1 row of a trained 1D V=2 run: Rule 110 (deterministic runs) or Stavskaya
    p = 0.29 (stochastic runs), on a coverage-filtered trajectory of the run's grid and horizon."""
    from tinyscope.studies.spatial_induction.coverage import cover
    from tinyscope.studies.spatial_induction.rules import stavskaya, wolfram

    task, cfg = run.task, run.cfg
    stochastic = task.stochastic
    table = stavskaya(0.29) if stochastic else wolfram(110)
    rng = np.random.default_rng(seed)
    traj, ok = cover(task.lattice, table[None], cfg.task.T, cfg.task.T0, rng, tries=1000)
    if not ok[0]:
        raise TinyscopeError(f"no initial state in 1000 draws covers the context of {'Stavskaya' if stochastic else 'Rule 110'} "
                             f"on grid {cfg.task.grid} with T0={cfg.task.T0}")
    title = "Stavskaya p=0.29" if stochastic else "Rule 110"
    return rollout_panel(run.model, task.layout, traj, cfg.task.T0, stochastic, title, seed)


def rollout_figure_for_run(run, seed: int = 42):
    """Figure 1 (one row) for a trained 1D V=2 run; see :func:`rollout_panel_for_run`."""
    return rollout_figure([rollout_panel_for_run(run, seed)], run.cfg.task.T0)
