"""Watching the chain of thought move into depth (Log-ICoT, Huang et al.: attention heatmaps per layer).

For a parity model (standard or constrained) on the blank-placeholder layout, at the end of each
curriculum stage:

* **attention by level**: each layer's attention pattern, averaged over examples and heads, with
  the keys grouped into *selected bits* (tree level 0), *other bits*, and the *slots* of each tree
  level's nodes (node ``j``'s slot, position ``n + j``, is where its value is computed; it is also
  where that value lives once the node's token is blank). :func:`level_mass` gives, for layer
  ``l`` (1-based), the mean attention mass on each key group from the queries at the slots of
  level-``l`` nodes; a layer that has absorbed level ``l`` computes it there from level ``l-1``.
  The theory's picture is a staircase: layer 1 -> selected bits, layer ``l`` -> level ``l-1`` slots.
* **probes**: for each layer output (0 = embeddings when the model exposes them) and tree level, the
  held-out accuracy of a logistic-regression probe that reads a node's value from the residual
  stream at its slot, averaged over the level's nodes: a layers x levels table per stage.

Hook names only (``blocks.{l}.attn.hook_pattern``, ``blocks.{l}.hook_resid_pre|resid_post``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tinyscope.errors import InputError
from tinyscope.interp.plotting import new_figure
from tinyscope.studies.log_icot.task import Parity, encode, removal_schedule


@dataclass
class KeyGroups:
    """Column groups of an attention pattern over the parity layout."""

    names: list[str]
    members: list[np.ndarray]   # key positions of each group

    @classmethod
    def of(cls, task: Parity) -> "KeyGroups":
        n, levels = task.n, task.levels
        bits = np.arange(n)
        selected = np.isin(bits, task.subset)
        names = ["bits (selected)", "bits (other)"] + [f"level {lvl} slots" for lvl in range(1, levels)]
        members = [bits[selected], bits[~selected]]
        members += [n + np.flatnonzero(task.node_level == lvl) for lvl in range(1, levels)]
        return cls(names, members)


def _inputs(model: torch.nn.Module, task: Parity, removed, n_examples: int, seed: int):
    """(B, T) token ids of ``n_examples`` inputs from ``seed`` in the layout of ``removed``
    (default: every thinking token blank, the single-pass layout), and that layout."""
    removed = removal_schedule(task.k, "direct")[0] if removed is None else removed
    layout = task.layout(removed)
    bits, nodes = task.draw(np.random.default_rng([seed, 91]), n_examples)
    device = next(model.parameters()).device
    return torch.from_numpy(encode(bits, nodes, layout).tokens).to(device), layout  # (B, T)


@torch.no_grad()
def attention_patterns(model: torch.nn.Module, task: Parity, removed=None, n_examples: int = 512,
                       seed: int = 0, per_head: bool = False) -> np.ndarray:
    """(L, T, T) attention of each layer averaged over ``n_examples`` and heads, in the layout of
    ``removed`` (default: every thinking token blank); (L, H, T, T) with ``per_head`` (every layer
    must then have H heads). Two-channel keys (the constrained model's (T, 2T) patterns) are folded
    onto their positions."""
    tokens, _ = _inputs(model, task, removed, n_examples, seed)
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    out = []
    for layer in range(len(cache)):
        pat = cache["pattern", layer].float().mean(dim=0)  # (H, T, Tk)
        T = pat.shape[1]
        if pat.shape[2] == 2 * T:
            pat = pat[..., :T] + pat[..., T:]  # (H, T, T)
        out.append((pat if per_head else pat.mean(0)).cpu().numpy())
    return np.stack(out)


def level_mass(patterns: np.ndarray, task: Parity) -> tuple[np.ndarray, list[str]]:
    """(L, G) mass of layer ``l``'s attention on each key group, from the slots of level-``l`` nodes
    (the last layer's query is the answer slot). Returns the table and the group names."""
    groups = KeyGroups.of(task)
    L = patterns.shape[0]
    table = np.zeros((L, len(groups.names)))
    for layer in range(L):
        level = min(layer + 1, task.levels)
        queries = task.n + np.flatnonzero(task.node_level == level)
        rows = patterns[layer][queries]  # (Q, T)
        table[layer] = [rows[:, m].sum(1).mean() if len(m) else 0.0 for m in groups.members]
    return table, groups.names


def own_level_column(layer: int) -> int:
    """The key group layer ``layer`` (0-based) should read in :func:`level_mass`'s table: the
    selected bits for the first layer, the slots of level ``layer`` after it."""
    return 0 if layer == 0 else layer + 1


def head_level_mass(model: torch.nn.Module, task: Parity, n_examples: int = 512, seed: int = 0) -> np.ndarray:
    """(L, H) own-level mass of each head: the mass head ``h`` of layer ``l`` puts, from the slots
    of level-``l`` nodes, on level ``l - 1`` (the selected bits for ``l = 1``), in the single-pass
    layout. Its mean over heads is :func:`level_mass`'s own-level column."""
    patterns = attention_patterns(model, task, n_examples=n_examples, seed=seed, per_head=True)  # (L, H, T, T)
    L, H = patterns.shape[:2]
    out = np.zeros((L, H))
    for h in range(H):
        mass, _ = level_mass(patterns[:, h], task)  # (L, G)
        out[:, h] = [mass[layer, own_level_column(layer)] for layer in range(L)]
    return out


@torch.no_grad()
def head_ablation(model: torch.nn.Module, task: Parity, n_examples: int = 512, seed: int = 0) -> np.ndarray:
    """(L, H) share of single-pass answers left unchanged when head ``h`` of layer ``l`` is
    mean-ablated: its output z (``blocks.{l}.attn.hook_z``, (B, T, H, d_head)) replaced at every
    position by its mean over the ``n_examples`` inputs. 1 means the answer does not read the head;
    about 0.5 (chance for a bit) means it needs the head's input-dependent part."""
    tokens, layout = _inputs(model, task, None, n_examples, seed)
    answer = layout.answer_pos
    logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("attn.hook_z"))
    base = logits[:, answer].argmax(-1)  # (B,)
    L = len(model.blocks)
    if len(cache) != L:
        raise InputError("head_ablation needs every block's attn.hook_z (a standard transformer)")
    rows = []
    for layer in range(L):
        name = f"blocks.{layer}.attn.hook_z"
        mean = cache[name].mean(0, keepdim=True)  # (1, T, H, Dh)
        row = []
        for h in range(mean.shape[2]):
            def ablate(z, hook, h=h, mean=mean):
                z = z.clone()
                z[:, :, h] = mean[:, :, h]
                return z
            pred = model.run_with_hooks(tokens, fwd_hooks=[(name, ablate)])[:, answer].argmax(-1)  # (B,)
            row.append(float((pred == base).float().mean()))
        rows.append(row)
    return np.array(rows)


@torch.no_grad()
def probe_table(model: torch.nn.Module, task: Parity, removed=None, n_train: int = 1000, n_test: int = 1000,
                seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """(layers, levels) held-out accuracy of per-node logistic probes on the residual stream at each
    node's slot, averaged over the nodes of a level. Rows: the embeddings (when the model has
    ``blocks.0.hook_resid_pre``) and each block's output; returns the table and the row names."""
    from sklearn.linear_model import LogisticRegression

    removed = removal_schedule(task.k, "direct")[0] if removed is None else removed
    layout = task.layout(removed)
    bits, nodes = task.draw(np.random.default_rng([seed, 92]), n_train + n_test)
    device = next(model.parameters()).device
    tokens = torch.from_numpy(encode(bits, nodes, layout).tokens).to(device)  # (N, T)
    wanted = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(len(model.blocks))]
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in wanted)
    rows = [name for name in wanted if name in cache]
    table = np.full((len(rows), task.levels), np.nan)
    for r, name in enumerate(rows):
        resid = cache[name].float().cpu().numpy()  # (N, T, D)
        per_level: dict[int, list[float]] = {}
        for j in layout.kept if task.cfg.removal == "drop" else range(task.k - 1):
            x, y = resid[:, layout.slot[j]], nodes[:, j]  # (N, D), (N,)
            if len(np.unique(y[:n_train])) < 2:
                acc = float(np.mean(y[n_train:] == y[0]))
            else:
                probe = LogisticRegression(max_iter=300).fit(x[:n_train], y[:n_train])
                acc = float(probe.score(x[n_train:], y[n_train:]))
            per_level.setdefault(int(task.node_level[j]), []).append(acc)
        for lvl, accs in per_level.items():
            table[r, lvl - 1] = float(np.mean(accs))
    names = ["embed" if n == "blocks.0.hook_resid_pre" else f"layer {int(n.split('.')[1]) + 1}" for n in rows]
    return table, names


# ------------------------------------------------------------------ across a run
def stage_end_steps(metrics: list[dict], available: list[int]) -> dict[int, int]:
    """For each curriculum stage, the last evaluated step of that stage that has a checkpoint."""
    ends: dict[int, int] = {}
    have = set(available)
    for rec in metrics:
        if rec.get("split") == "eval" and "stage" in rec and rec["step"] in have:
            ends[int(rec["stage"])] = int(rec["step"])
    return dict(sorted(ends.items()))


def absorption_over_stages(run, n_examples: int = 512, probes: bool = True) -> list[dict]:
    """Per stage of a parity run: attention patterns, the level-mass table and the probe table,
    all in the final (all-blank) layout, for the model at the end of the stage, run at that stage's
    depth (``grow_depth`` runs skip the layers a stage did not train: their rows are NaN). Each
    stage's weights go into a copy (:meth:`Run.model_at`): ``run.model`` is left as it is."""
    task = run.task.task if hasattr(run.task, "curriculum") else run.task
    out = []
    for stage, step in stage_end_steps(run.metrics(), run.checkpoint_steps()).items():
        model = run.model_at(step)
        hooks = run.experiment.stage_hooks(run.cfg, run.task.curriculum.stages[stage].spec)
        active = len(model.blocks) - len(hooks) // 2
        with model.hooks(hooks):
            patterns = attention_patterns(model, task, n_examples=n_examples)
            mass, groups = level_mass(patterns, task)
            mass[active:] = np.nan
            entry = {"stage": stage, "step": step, "patterns": patterns, "mass": mass, "groups": groups,
                     "active_layers": active}
            if probes:
                entry["probe"], entry["probe_rows"] = probe_table(model, task)
        out.append(entry)
    return out


# ------------------------------------------------------------------ figures
def plot_attention_by_stage(stages: list[dict], task: Parity):
    """Grid of heatmaps: rows = stages, columns = layers; queries = SEP and thinking slots, keys = all
    positions; selected bits and level boundaries marked on the key axis."""
    L = stages[0]["patterns"].shape[0]
    fig = new_figure(3.2 * L, 2.6 * len(stages))
    axes = fig.subplots(len(stages), L, squeeze=False)
    n, T = task.n, task.n_ctx
    for r, entry in enumerate(stages):
        for layer in range(L):
            ax = axes[r][layer]
            ax.imshow(entry["patterns"][layer][n:], aspect="auto", cmap="viridis", vmin=0, vmax=1,
                      extent=(-0.5, T - 0.5, T - 0.5, n - 0.5))
            for s in task.subset:
                ax.axvline(s, color="white", lw=0.4, alpha=0.6)
            for lvl in range(1, task.levels):
                first = n + int(np.flatnonzero(task.node_level == lvl)[0])
                ax.axvline(first - 0.5, color="red", lw=0.8)
                ax.axhline(first - 0.5, color="red", lw=0.8)
            skipped = " (not trained yet)" if layer >= entry.get("active_layers", L) else ""
            ax.set_title(f"stage {entry['stage']} (step {entry['step']}) · layer {layer + 1}{skipped}", fontsize=8)
            ax.tick_params(labelsize=6)
            if layer == 0:
                ax.set_ylabel("query (slot position)", fontsize=7)
            if r == len(stages) - 1:
                ax.set_xlabel("key position (white: selected bits, red: level starts)", fontsize=7)
    return fig


def plot_probe_tables(stages: list[dict]):
    """One layers x levels heat table of probe accuracy per stage."""
    fig = new_figure(2.8 * len(stages), 2.6)
    axes = fig.subplots(1, len(stages), squeeze=False)[0]
    for ax, entry in zip(axes, stages):
        table = entry["probe"]
        ax.imshow(table, cmap="magma", vmin=0.5, vmax=1.0, aspect="auto")
        for (i, j), v in np.ndenumerate(table):
            ax.text(j, i, "–" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if v > 0.8 else "white")
        ax.set_xticks(range(table.shape[1]), [f"L{j + 1}" for j in range(table.shape[1])], fontsize=7)
        ax.set_yticks(range(table.shape[0]), entry["probe_rows"], fontsize=7)
        ax.set_title(f"stage {entry['stage']}: probe acc.", fontsize=8)
        ax.set_xlabel("tree level", fontsize=7)
    return fig


def format_mass(entry: dict) -> str:
    """The level-mass table of one stage as text (rows: layers, columns: key groups)."""
    head = "layer  " + "  ".join(f"{g:>16}" for g in entry["groups"])
    lines = [f"stage {entry['stage']} (step {entry['step']}): attention mass from level-l slots", head]
    lines += [f"{i + 1:>5}  " + "  ".join(f"{v:16.3f}" for v in row) for i, row in enumerate(entry["mass"])]
    return "\n".join(lines)


def absorption_figures(run) -> dict:
    """Figures of a parity run: attention heatmaps and probe tables at the end of each stage."""
    stages = absorption_over_stages(run)
    if not stages:
        return {}
    task = run.task.task if hasattr(run.task, "curriculum") else run.task
    return {"absorption_attention": plot_attention_by_stage(stages, task), "absorption_probes": plot_probe_tables(stages)}
