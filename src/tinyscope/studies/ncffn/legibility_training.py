"""Legibility across training (NC-FFN paper): how the quantifiers' half-lives and the FFN's
two-operand logic change from checkpoint to checkpoint.

**Half-lives by layer.** Each quantifier unit's half-life ``ln 0.5 / ln(decay)``
(:func:`~tinyscope.studies.ncffn.legibility.half_lives`) at each checkpoint, per layer.

**Two-operand logic** (the paper: "two-operand logic concentrates in layer 0 and erodes toward
soft gating"). A fuzzy pair j of an NC-FFN layer outputs ``A_j B_j`` and ``A_j (1 - B_j)``. On a
set of held-out tokens t, with memberships ``A_j(t), B_j(t) in [0, 1]``:

    spread_j = min( std_t A_j, std_t B_j )            the weaker operand's spread (at most 1/2)
    corr_j   = |corr_t(A_j, B_j)|

Pair j computes **two-operand logic** when ``spread_j >= min_spread`` and ``corr_j <= max_corr``:
both operands vary over the data, and they are not one proposition twice. Otherwise one operand
is (nearly) a constant c and the pair computes ``c A_j`` and ``(1 - c) A_j``: one input scaled
by a soft gate. A layer's ``two_operand_share`` is the fraction of its pairs that compute
two-operand logic, ``operand_spread`` the median ``spread_j``, and ``booleanness`` =
``1 - 2 mean_{t,j} (min(A, 1-A) + min(B, 1-B)) / 2`` (0: every membership at 1/2; 1: every one
exactly 0 or 1). The paper gives no definition; the thresholds are parameters (``min_spread``
0.1, ``max_corr`` 0.9).

:func:`logic_by_layer` measures one model; :func:`legibility_over_training` every kept
checkpoint of a run; :func:`summarize_trajectory` the numbers the claims and docs report;
:func:`plot_half_lives_over_training` and :func:`plot_logic_over_training` the figures.
"""
from __future__ import annotations

import numpy as np
import torch

from tinyscope.models.ffn import NCFFN

MIN_SPREAD = 0.1  # the weaker operand must have a standard deviation >= 0.1 over the tokens
MAX_CORR = 0.9    # and the two operands must not be one proposition (|corr| <= 0.9)
PAPER_HALF_LIFE = 1.5


def nc_layers(model: torch.nn.Module) -> list[int]:
    """Indices of the layers whose FFN is an NC-FFN with at least one fuzzy pair."""
    return [l for l, b in enumerate(model.blocks) if isinstance(b.mlp, NCFFN) and b.mlp.n_pairs > 0]


@torch.no_grad()
def pair_memberships(model: torch.nn.Module, tokens: torch.Tensor, chunk: int = 64) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per NC-FFN layer: the memberships ``(A, B)`` of its fuzzy pairs on every token, (N, P) each."""
    layers = nc_layers(model)
    names = [f"blocks.{l}.mlp.hook_{h}" for l in layers for h in ("A", "B")]
    device = next(model.parameters()).device
    parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for i in range(0, len(tokens), chunk):
        _, cache = model.run_with_cache(tokens[i:i + chunk].to(device), names_filter=names)
        for n in names:
            parts[n].append(cache[n].flatten(0, 1).float().cpu().numpy())  # (b*T, P)
    return {l: (np.concatenate(parts[f"blocks.{l}.mlp.hook_A"]), np.concatenate(parts[f"blocks.{l}.mlp.hook_B"]))
            for l in layers}


def pair_logic(a: np.ndarray, b: np.ndarray, min_spread: float = MIN_SPREAD,
               max_corr: float = MAX_CORR) -> dict[str, np.ndarray]:
    """Per fuzzy pair (the module docstring): ``spread``, ``corr``, ``two_operand`` (bool) and
    ``booleanness``, from memberships ``a``, ``b`` of shape (N tokens, P pairs)."""
    sa, sb = a.std(0), b.std(0)  # (P,)
    cov = ((a - a.mean(0)) * (b - b.mean(0))).mean(0)  # (P,)
    corr = np.abs(cov) / np.maximum(sa * sb, 1e-12)  # (P,)
    spread = np.minimum(sa, sb)  # (P,)
    boolean = 1 - (np.minimum(a, 1 - a) + np.minimum(b, 1 - b)).mean(0)  # (P,)  1 - 2 * mean distance / 2
    return {"spread": spread, "corr": corr, "booleanness": boolean,
            "two_operand": (spread >= min_spread) & (corr <= max_corr)}


def logic_by_layer(model: torch.nn.Module, tokens: torch.Tensor, min_spread: float = MIN_SPREAD,
                   max_corr: float = MAX_CORR) -> dict[int, dict[str, float]]:
    """Per NC-FFN layer: ``two_operand_share``, ``operand_spread``, ``booleanness`` and ``n_pairs``
    on ``tokens`` (B, T)."""
    out = {}
    for layer, (a, b) in pair_memberships(model, tokens).items():
        p = pair_logic(a, b, min_spread, max_corr)
        out[layer] = {"two_operand_share": float(p["two_operand"].mean()),
                      "operand_spread": float(np.median(p["spread"])),
                      "booleanness": float(p["booleanness"].mean()), "n_pairs": float(a.shape[1])}
    return out


def layer_metrics(model: torch.nn.Module, tokens: torch.Tensor) -> dict[str, float]:
    """Flat per-layer metrics for results.json and the evaluation log: ``half_life_median_l{L}``
    (quantified layers) and ``two_operand_share_l{L}``, ``operand_spread_l{L}`` (NC-FFN layers)."""
    from tinyscope.studies.ncffn.legibility import half_lives

    out = {}
    rows = half_lives(model) if hasattr(model, "quantifier_blocks") else []
    for layer in sorted({r["layer"] for r in rows}):
        out[f"half_life_median_l{layer}"] = float(np.median([r["half_life"] for r in rows if r["layer"] == layer]))
    for layer, v in logic_by_layer(model, tokens).items():
        out[f"two_operand_share_l{layer}"] = v["two_operand_share"]
        out[f"operand_spread_l{layer}"] = v["operand_spread"]
    return out


def legibility_over_training(run, tokens: torch.Tensor, progress: bool = False) -> list[dict]:
    """One record per kept checkpoint of ``run`` (a loaded :class:`~tinyscope.runs.rundir.Run`):
    ``{"step", "half_lives": {layer: [per unit]}, "kinds": {layer: [exist|prop]}, "logic": logic_by_layer}``.
    The run's model is given back the weights it had."""
    from tqdm.auto import tqdm

    from tinyscope.studies.ncffn.legibility import half_lives

    model = run.model
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    step_before = run.step
    records = []
    try:
        for step in tqdm(run.checkpoint_steps(), desc="checkpoints", disable=not progress):
            run.load_step(step)
            rows = half_lives(model) if hasattr(model, "quantifier_blocks") else []
            layers = sorted({r["layer"] for r in rows})
            records.append({"step": step,
                            "half_lives": {l: [r["half_life"] for r in rows if r["layer"] == l] for l in layers},
                            "kinds": {l: [r["kind"] for r in rows if r["layer"] == l] for l in layers},
                            "logic": logic_by_layer(model, tokens)})
    finally:
        model.load_state_dict(saved)
        run.step = step_before
    return records


def summarize_trajectory(records: list[dict]) -> dict:
    """Numbers of a trajectory: per layer the final median half-life and its quartiles; per NC
    layer the final two-operand share, its peak over checkpoints, the step of the peak and
    ``erosion`` = 1 - final / peak (0: none; None when the share never rises above 0)."""
    if not records:
        return {}
    out: dict = {"steps": [r["step"] for r in records]}
    last = records[-1]
    for layer, hl in last["half_lives"].items():
        q25, q50, q75 = np.percentile(hl, [25, 50, 75])
        out[f"half_life_median_l{layer}"] = float(q50)
        out[f"half_life_iqr_l{layer}"] = [float(q25), float(q75)]
        out[f"half_life_median_l{layer}_over_training"] = [float(np.median(r["half_lives"][layer])) for r in records]
    for layer in last["logic"]:
        share = [r["logic"][layer]["two_operand_share"] for r in records]
        peak = int(np.argmax(share))
        out[f"two_operand_share_l{layer}"] = share[-1]
        out[f"two_operand_share_l{layer}_over_training"] = share
        out[f"two_operand_peak_l{layer}"] = share[peak]
        out[f"two_operand_peak_step_l{layer}"] = records[peak]["step"]
        out[f"two_operand_erosion_l{layer}"] = 1 - share[-1] / share[peak] if share[peak] > 0 else None
        for key in ("operand_spread", "booleanness"):
            out[f"{key}_l{layer}_over_training"] = [r["logic"][layer][key] for r in records]
    return out


def erosion_from_history(history: list[dict], key: str) -> float:
    """``1 - last / peak`` of ``key`` over the evaluation records of a metrics.jsonl (nan when it
    never rises above 0); raises KeyError when no record has ``key``."""
    values = [r[key] for r in history if r.get("split") == "eval" and r.get(key) is not None]
    if not values:
        raise KeyError(key)
    peak = max(values)
    return 1 - values[-1] / peak if peak > 0 else float("nan")


# ---------------------------------------------------------------- figures
def plot_half_lives_over_training(records: list[dict]):
    """One panel per quantified layer: every unit's half-life (log scale) against the training
    step (existential units blue, proportion units orange), the layer median in black, and the
    paper's ~1.5 tokens dashed. Returns a Figure."""
    from tinyscope.interp.mpl import plt

    layers = sorted(records[0]["half_lives"]) if records else []
    fig, axes = plt.subplots(1, max(len(layers), 1), figsize=(4.2 * max(len(layers), 1), 3.2), squeeze=False,
                             sharey=True)
    steps = [r["step"] for r in records]
    for ax, layer in zip(axes[0], layers):
        hl = np.array([r["half_lives"][layer] for r in records])  # (checkpoints, units)
        kinds = records[0]["kinds"][layer]
        for u, kind in enumerate(kinds):
            ax.plot(steps, hl[:, u], color="tab:blue" if kind == "exist" else "tab:orange", lw=0.6, alpha=0.45)
        ax.plot(steps, np.median(hl, axis=1), color="k", lw=2, label="median")
        ax.axhline(PAPER_HALF_LIFE, color="tab:red", ls="--", lw=1, label="paper (~1.5)")
        ax.plot([], [], color="tab:blue", lw=1, label="existential")
        ax.plot([], [], color="tab:orange", lw=1, label="proportion")
        ax.set_yscale("log")
        ax.set_title(f"layer {layer}")
        ax.set_xlabel("training step")
    axes[0][0].set_ylabel("half-life (tokens)")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def plot_logic_over_training(records: list[dict]):
    """Per NC-FFN layer against the training step: the share of fuzzy pairs computing two-operand
    logic (left) and the median spread of the weaker operand (right). Returns a Figure."""
    from tinyscope.interp.mpl import plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(8.4, 3.2))
    steps = [r["step"] for r in records]
    layers = sorted(records[0]["logic"]) if records else []
    for i, layer in enumerate(layers):
        left.plot(steps, [r["logic"][layer]["two_operand_share"] for r in records], color=f"C{i}", lw=2,
                  marker="o", ms=3, label=f"layer {layer}")
        right.plot(steps, [r["logic"][layer]["operand_spread"] for r in records], color=f"C{i}", lw=2,
                   marker="o", ms=3, label=f"layer {layer}")
    right.axhline(MIN_SPREAD, color="gray", ls=":", lw=1, label="threshold")
    left.set_ylabel("two-operand pairs (share)")
    left.set_ylim(-0.02, 1.02)
    right.set_ylabel("weaker operand's std (median pair)")
    for ax in (left, right):
        ax.set_xlabel("training step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- why a decay moves or not
def rate_budget(train) -> float:
    """``sum_t lr_t`` over a TrainConfig's schedule: the farthest Adam can move one parameter
    (its step is at most about the rate), here in units of the decay logit theta, which near the
    sticky end is ln(half-life) + const: 69 -> 1.5 tokens needs about 4.1."""
    from tinyscope.train.schedule import lr_multiplier

    return float(sum(train.lr * _multiplier(train, s, lr_multiplier) for s in range(train.steps)))


def _multiplier(train, step: int, fn) -> float:
    return fn(step, total=train.steps, warmup_steps=train.warmup_steps, warmup_start=train.warmup_start,
              kind=train.schedule, min_ratio=train.min_lr_ratio, decay_fraction=train.decay_fraction)


def weight_decay_half_life(train, init_decay: float, weight_decay: float, lr_mult: float = 1.0) -> float:
    """The half-life (tokens) that decoupled weight decay alone leaves a decay logit at after the
    schedule of ``train``, with no gradient: ``theta_T = theta_0 prod_t (1 - lr_mult lr_t wd)``,
    ``theta_0 = logit(init_decay)``."""
    import math

    from tinyscope.train.schedule import lr_multiplier

    theta = math.log(init_decay / (1 - init_decay))
    for s in range(train.steps):
        theta *= 1 - lr_mult * train.lr * _multiplier(train, s, lr_multiplier) * weight_decay
    log_decay = -math.log1p(math.exp(-theta))  # logsigmoid(theta)
    return math.log(0.5) / log_decay


def decay_gradient_signal(model: torch.nn.Module, batches: list[dict], objective) -> dict[str, np.ndarray]:
    """The loss gradient on every decay logit theta over ``batches`` (each a dict of tensors that
    ``objective(model, batch)`` turns into a loss), per unit: ``mean``, ``rms`` and the **drift
    ratio** ``mean / rms`` in [-1, 1].

    Adam's step is ``lr m / sqrt(v)`` with m and v running means of g and g^2, so a unit whose
    gradient has mean mu and rms r drifts by about ``lr mu / r`` per step: the ratio, times the sum
    of the rates over training, predicts how far theta moves (positive mean: theta falls, the
    half-life shortens). Also returns ``layer`` and ``kind`` per unit, and the gradients are
    cleared afterwards."""
    from tinyscope.studies.ncffn.quantifiers import decay_parameters

    params = decay_parameters(model)
    grads = []
    for batch in batches:
        model.zero_grad(set_to_none=True)
        objective(model, batch).backward()
        grads.append(torch.cat([p.grad.detach().flatten() for p in params]).double().numpy())  # (U,)
    model.zero_grad(set_to_none=True)
    g = np.stack(grads)  # (n_batches, U)
    mean, rms = g.mean(0), np.sqrt((g ** 2).mean(0))
    layer, kind = [], []
    for l, block in model.quantifier_blocks().items():
        layer += [l] * (block.n_exist + block.n_prop)
        kind += ["exist"] * block.n_exist + ["prop"] * block.n_prop
    return {"mean": mean, "rms": rms, "ratio": mean / np.maximum(rms, 1e-30), "layer": np.array(layer),
            "kind": np.array(kind)}
