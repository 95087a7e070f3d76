"""Most-Freq out-of-distribution diagnosis (`tinyscope analyze RUN`, issue 25): four
measurements that separate the candidate causes of the collapse beyond the training lengths.

``kept_gaps``: greedy exact and top-1 on the run's own final sets at the OOD lengths against
sets drawn with ``task.gaps_from`` = the longest ID length, whose counts keep that length's
gaps relative to the mean count (:func:`~tinyscope.studies.tracerelay.task.scaled_counts`).
If the model fails only because long sources have relatively closer counts, the kept-gap sets
recover the ID accuracy.

``phase``: the relay phases ``blocks.{l}.relay.hook_phase`` and their unwrapped sums. For a
prompt (source + SEP) of length T', the unwrapped phase of channel j at position t is
``Phi_t = sum_k u_{t-kW}`` (Eq. 7 before the wrap; ``wrap(Phi) == theta``). A channel is
count-like when the total increment over the prompt, ``S_j = sum_r Phi_{T'-1-r, j}`` (the W
lineage ends), is a linear function of the source composition: ``R^2`` of the least-squares fit
``S_j ~ a . N + b`` within each ID length (the counts sum to T, so only the composition varies),
averaged over the ID lengths, at least 0.9. A channel is a clock when ``S_j`` follows the length
instead: ``R^2`` of ``S_j ~ c T + b`` over the pooled ID lengths >= 0.9 while its composition
``R^2`` is below 0.5. Aliasing of a count-like channel at length T: the cos/sin readout sees
only ``Phi mod 2 pi``, so a lineage-end phase outside the ID range ``[lo, hi]`` (0.5 and 99.5
percentiles over ID lengths) whose wrap into ``[lo, lo + 2 pi)`` lands inside ``[lo, hi]``
reads as an ID phase of another count. Reported per length: the span in turns
(99.5 - 0.5 percentile over 2 pi), the fraction outside the ID range and the aliased fraction.

``rescaled``: an intervention. At an OOD length T the increments of chosen layers are multiplied
by T_ref / T (T_ref the longest ID length; :func:`scaled_increments` scales alpha, so greedy
decoding sees it too), so every lineage's accumulated phase keeps the size it has at T_ref.
Greedy exact and top-1 on the plain and the kept-gap final sets with no layer, each layer alone,
the first k layers, and all layers rescaled. On kept-gap sets (counts T / T_ref times a T_ref
draw) rescaling every layer gives the phases of a training-length source of the same
composition: if the ID accuracy comes back, the collapse is the size of the accumulated phases
and nothing else in the network depends on the length; the layers whose rescaling alone
restores most of it are where the length enters.

``precision``: the selected model evaluated in float32 and under bfloat16 autocast (the
paper's evaluation precision): exact accuracy and teacher-forced / greedy disagreements.
Training precision is the run's ``train.precision`` (``--set train.precision=bf16``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np
import torch

from tinyscope.models.utils import device_of
from tinyscope.studies.tracerelay.scoring import score_most_freq
from tinyscope.studies.tracerelay.task import MostFreq, relative_gaps

ANALYSES = ("kept_gaps", "phase", "rescaled", "precision")
TWO_PI = 2 * math.pi
COUNT_LIKE_R2 = 0.9       # a channel whose total increment the counts explain this well is count-like
RANGE_Q = (0.5, 99.5)     # percentiles that bound the ID range of a phase
EXTRA_PHASE_LENGTHS = (2048,)


def unwrapped_phase(delta: torch.Tensor, valid: torch.Tensor, stride: int) -> torch.Tensor:
    """Eq. (7) without the wrap: ``Phi_t = sum_k u_{t-kW}`` with u of Eq. (2); float64.

    delta: (B, T, d) increments at source positions; valid: (B, T). Returns (B, T, d)."""
    B, T, d = delta.shape
    W = stride
    u = torch.zeros(B, T, d, dtype=torch.float64, device=delta.device)  # (B, T, d)
    q = torch.zeros(B, T, dtype=torch.bool, device=delta.device)  # (B, T)
    u[:, W:], q[:, W:] = delta[:, :max(T - W, 0)].double(), valid[:, :max(T - W, 0)]
    u = u * q[..., None]
    n = -(-T // W)
    padded = torch.cat([u, u.new_zeros(B, n * W - T, d)], 1)  # (B, n W, d)
    return padded.view(B, n, W, d).cumsum(1).view(B, n * W, d)[:, :T]  # (B, T, d)


@torch.no_grad()
def prompt_phases(model, task: MostFreq, src: np.ndarray, bs: int = 64) -> list[dict[str, np.ndarray]]:
    """Per layer: ``theta`` (the hooked, wrapped phase) and ``phi`` (unwrapped) of the prompt
    source + SEP at the last W positions (one per lineage), (n, W, d) each, and the whole
    unwrapped trace of the first example, (T', d)."""
    dev, W, L = device_of(model), model.cfg.stride, model.cfg.n_layers
    names = [f"blocks.{l}.relay.hook_{k}" for l in range(L) for k in ("increment", "phase")]
    out = [{"theta": [], "phi": []} for _ in range(L)]
    for i in range(0, len(src), bs):
        part = src[i:i + bs]
        prompt = torch.from_numpy(np.concatenate([part, np.full((len(part), 1), task.SEP)], 1)).to(dev)  # (b, T')
        _, cache = model.run_with_cache(prompt, names_filter=lambda n: n in names)
        valid = torch.ones_like(prompt, dtype=torch.bool)  # (b, T')
        for layer in range(L):
            phi = unwrapped_phase(cache[f"blocks.{layer}.relay.hook_increment"], valid, W)  # (b, T', d)
            out[layer]["theta"].append(cache[f"blocks.{layer}.relay.hook_phase"][:, -W:].double().cpu().numpy())
            out[layer]["phi"].append(phi[:, -W:].cpu().numpy())
            if i == 0:
                out[layer]["trace"] = phi[0].cpu().numpy()
    return [{"theta": np.concatenate(o["theta"]), "phi": np.concatenate(o["phi"]), "trace": o["trace"]} for o in out]


def circular_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| on the circle (radians), in [0, pi]."""
    d = np.mod(np.asarray(a) - np.asarray(b), TWO_PI)
    return np.minimum(d, TWO_PI - d)


def count_fit(totals: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least squares ``totals[:, j] ~ counts @ a_j + b_j``: returns R^2 (d,) and coefficients (V + 1, d)."""
    X = np.concatenate([counts, np.ones((len(counts), 1))], 1).astype(np.float64)  # (n, V + 1)
    coef, *_ = np.linalg.lstsq(X, totals, rcond=None)  # (V + 1, d)
    resid = totals - X @ coef
    var = ((totals - totals.mean(0)) ** 2).sum(0)
    r2 = 1 - (resid ** 2).sum(0) / np.where(var > 0, var, np.inf)
    return r2, coef


def aliasing(id_phi: np.ndarray, phi: np.ndarray) -> dict[str, float]:
    """Span (turns), fraction outside the ID range and aliased fraction of one channel's
    lineage-end phases ``phi`` (any shape) against its ID phases ``id_phi``."""
    lo, hi = np.percentile(id_phi, RANGE_Q)
    lo_t, hi_t = np.percentile(phi, RANGE_Q)
    outside = (phi < lo) | (phi > hi)
    folded = lo + np.mod(phi - lo, TWO_PI)
    aliased = outside & (folded <= hi) if hi - lo < TWO_PI else outside
    return {"turns": float((hi_t - lo_t) / TWO_PI), "outside": float(outside.mean()), "aliased": float(aliased.mean())}


def phase_analysis(exp, cfg, task: MostFreq, model, n: int) -> tuple[dict, dict]:
    """Numbers and data for the figures of the ``phase`` analysis (see the module docstring)."""
    lengths = sorted(set(cfg.eval.id_lengths) | set(cfg.eval.ood_lengths) | set(EXTRA_PHASE_LENGTHS))
    per_len = {}
    for T in lengths:
        batch = exp.final_set(cfg, task, T, n)
        src = batch.tokens[:, :T]
        counts = np.stack([np.bincount(r, minlength=task.cfg.V)[:task.cfg.V] for r in src])  # (n, V)
        per_len[T] = (counts, prompt_phases(model, task, src, cfg.eval.batch_size))
    id_T = [T for T in lengths if T in cfg.eval.id_lengths]
    numbers, data = {"lengths": lengths, "layers": []}, {"per_len": per_len, "top": []}
    for layer in range(model.cfg.n_layers):
        counts = np.concatenate([per_len[T][0] for T in id_T])
        totals = np.concatenate([per_len[T][1][layer]["phi"].sum(1) for T in id_T])  # (n_id, d)
        _, coef = count_fit(totals, counts)
        r2 = np.mean([count_fit(per_len[T][1][layer]["phi"].sum(1), per_len[T][0])[0] for T in id_T], 0)  # (d,)
        r2_len, _ = count_fit(totals, counts.sum(1, keepdims=True))  # (d,) the length alone
        order = np.argsort(-r2)
        count_like = [int(j) for j in order if r2[j] >= COUNT_LIKE_R2]
        clocks = [int(j) for j in range(len(r2)) if r2_len[j] >= COUNT_LIKE_R2 and r2[j] < 0.5]
        id_phi = {j: np.concatenate([per_len[T][1][layer]["phi"][..., j] for T in id_T]) for j in order}
        rec = {"layer": layer, "r2_best": float(r2[order[0]]), "channel_best": int(order[0]),
               "n_count_like": len(count_like), "n_clock": len(clocks), "n_channels": int(len(r2)),
               "r2_length_best": float(r2_len.max()), "by_length": {}}
        for T in lengths:
            chans = count_like or [int(order[0])]
            stats = [aliasing(id_phi[j], per_len[T][1][layer]["phi"][..., j]) for j in chans]
            wrap_err = circular_distance(per_len[T][1][layer]["phi"], per_len[T][1][layer]["theta"]).max()
            rec["by_length"][str(T)] = {k: float(np.mean([s[k] for s in stats])) for k in stats[0]} | {
                "best_turns": aliasing(id_phi[int(order[0])], per_len[T][1][layer]["phi"][..., int(order[0])])["turns"],
                "wrap_check": float(wrap_err)}
        numbers["layers"].append(rec)
        data["top"].append((layer, int(order[0]), coef[:, order[0]], float(r2[order[0]])))
    return numbers, data


@torch.no_grad()
def kept_gap_analysis(exp, cfg, task: MostFreq, model, n: int) -> dict:
    """Exact and top-1 at each OOD length on the plain and the kept-gap final sets, with the
    median relative gap (smallest count gap over the mean count) of each set."""
    ref = max(cfg.eval.id_lengths)
    kept_task = MostFreq(dataclasses.replace(task.cfg, gaps_from=ref))
    out = {"reference": ref, "by_length": {}}
    for T in sorted(set(cfg.eval.id_lengths[-1:]) | set(cfg.eval.ood_lengths)):
        row = {}
        for name, t in (("plain", task), ("kept", kept_task)):
            batch = exp.final_set(cfg, t, T, n)
            counts = np.stack([np.bincount(r, minlength=t.cfg.V)[:t.cfg.V] for r in batch.tokens[:, :T]])
            m = score_most_freq(model, t, batch, cfg.eval.batch_size)
            row[name] = {"exact": m["acc"], "top1": m["top1"], "set_exact": m["set_exact"],
                         "median_relative_gap": float(np.median(relative_gaps(counts)))}
        out["by_length"][str(T)] = row
    return out


@contextlib.contextmanager
def scaled_increments(model, layers: list[int], scale: float):
    """Within the block, the relay increments of ``layers`` are ``scale`` times their value
    (Eq. 1's alpha scaled: the parallel forward and ``step`` alike); restored on exit."""
    relays = [model.blocks[layer].relay for layer in layers]
    saved = [r.alpha for r in relays]
    try:
        for r in relays:
            r.alpha = r.alpha * scale
        yield model
    finally:
        for r, alpha in zip(relays, saved):
            r.alpha = alpha


def rescale_variants(n_layers: int) -> dict[str, list[int]]:
    """The layer sets the ``rescaled`` analysis tries: none, each layer, the first k, all."""
    variants = {"none": []} | {f"layer {l}": [l] for l in range(n_layers)}
    for k in range(2, n_layers + 1):
        variants[f"layers 0-{k - 1}"] = list(range(k))
    return variants


@torch.no_grad()
def rescaled_analysis(exp, cfg, task: MostFreq, model, n: int) -> dict:
    """Greedy exact and top-1 at each OOD length on the plain and kept-gap final sets with the
    increments of each :func:`rescale_variants` set scaled by T_ref / T (module docstring)."""
    ref = max(cfg.eval.id_lengths)
    kept_task = MostFreq(dataclasses.replace(task.cfg, gaps_from=ref))
    variants = rescale_variants(model.cfg.n_layers)
    out = {"reference": ref, "variants": variants, "by_length": {}}
    for T in sorted(L for L in cfg.eval.ood_lengths if L > ref):
        row = {}
        for name, t in (("plain", task), ("kept", kept_task)):
            batch = exp.final_set(cfg, t, T, n)
            row[name] = {}
            for label, layers in variants.items():
                with scaled_increments(model, layers, ref / T):
                    m = score_most_freq(model, t, batch, cfg.eval.batch_size)
                row[name][label] = {"exact": m["acc"], "top1": m["top1"]}
        out["by_length"][str(T)] = row
    return out


@torch.no_grad()
def precision_analysis(exp, cfg, task: MostFreq, model, n: int) -> dict:
    """Exact accuracy and teacher-forced / greedy disagreements in float32 and under bf16 autocast."""
    dev = device_of(model)
    out = {}
    for T in list(cfg.eval.id_lengths) + list(cfg.eval.ood_lengths):
        batch = exp.final_set(cfg, task, T, n)
        row = {}
        for name in ("fp32", "bf16"):
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=name == "bf16"):
                m = score_most_freq(model, task, batch, cfg.eval.batch_size)
            row[name] = {"exact": m["acc"], "tf_exact": m["tf_exact"], "tf_greedy_disagree": m["tf_greedy_disagree"]}
        out[str(T)] = row
    return out
