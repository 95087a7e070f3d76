"""Teacher-forced metrics of the spatial-induction paper (App. I.3), over cell targets only.

The model's predictive distribution over states is the softmax of its first V logits (the cell
states), which equals the full-vocabulary softmax renormalized over cells. All averages are
micro-averages over scored cells (loss mask: cell targets at t >= T0).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.studies.spatial_induction.bayes import stream_predictive, true_predictive
from tinyscope.studies.spatial_induction.serialize import Layout


def kl(p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) along the last axis, with 0 log 0 = 0; ``log_q`` given as log-probabilities."""
    p = p.to(log_q.dtype)
    return torch.where(p > 0, p * (torch.log(p.clamp_min(1e-300)) - log_q), torch.zeros_like(p)).sum(-1)


@torch.no_grad()
def model_logits(model: torch.nn.Module, tokens: np.ndarray | torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """Logits (B, L, n_out) in float32 on CPU, computed in chunks."""
    device = next(model.parameters()).device
    tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    outs = [model(tokens[i:i + batch_size].to(device)).float().cpu() for i in range(0, len(tokens), batch_size)]
    return torch.cat(outs)


def state_log_probs(logits: torch.Tensor, V: int) -> torch.Tensor:
    """log q_model over the V cell states: log_softmax of the first V logits."""
    return torch.log_softmax(logits[..., :V].double(), dim=-1)


@torch.no_grad()
def teacher_forced_metrics(logits: torch.Tensor, layout: Layout, traj: np.ndarray, targets: np.ndarray,
                           mask: np.ndarray, tables: np.ndarray | None = None, stochastic: bool = False) -> dict:
    """TF metrics from logits (B, L, n_out) of a coverage-filtered evaluation batch.

    tf_cell_acc  argmax over the V state logits equals the true cell
    tf_seq_acc   fraction of trajectories with every scored cell right
    loss         cross-entropy over the full vocabulary at scored positions
    kgram_acc    the add-one k-gram predictor's argmax accuracy (Bayes act)
    tf_kl_kgram  KL(q_kgram || q_model) (stochastic), tf_kl_true KL(q_true || q_model)
    """
    V = layout.V
    mask_t = torch.from_numpy(np.asarray(mask, dtype=bool))  # (B, L)
    tgt = torch.from_numpy(np.asarray(targets, dtype=np.int64))  # (B, L)
    logq = state_log_probs(logits, V)  # (B, L, V)
    correct = (logq.argmax(-1) == tgt) & mask_t  # (B, L)
    n = mask_t.sum().clamp_min(1)
    out = {
        "tf_cell_acc": float(correct.sum() / n),
        "tf_seq_acc": float((correct.sum(1) == mask_t.sum(1)).double().mean()),
        "loss": float(F.cross_entropy(logits[mask_t], tgt[mask_t])),
    }
    q_kgram, _ = stream_predictive(layout, traj, alpha=1.0)  # (B, L, V)
    q_kgram = torch.from_numpy(q_kgram)
    out["kgram_acc"] = float(((q_kgram.argmax(-1) == tgt) & mask_t).sum() / n)
    if stochastic:
        out["tf_kl_kgram"] = float(kl(q_kgram, logq)[mask_t].mean())
        if tables is not None:
            q_true = torch.from_numpy(layout.to_stream(true_predictive(layout.lattice, traj, tables),
                                                       fill=1.0 / V))  # (B, L, V)
            out["tf_kl_true"] = float(kl(q_true, logq)[mask_t].mean())
            out["kgram_kl_true"] = float(kl(q_true, torch.log(q_kgram))[mask_t].mean())
    return out
