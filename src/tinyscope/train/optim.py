"""Muon for the hidden weight matrices, AdamW for everything else, in one optimizer.

Muon (Jordan et al. 2024, "Muon: MomentUm Orthogonalized by Newton-schulz") replaces the
update of a weight matrix W (out, in) by the nearest semi-orthogonal matrix to its Nesterov
momentum M, O = U V^T where M = U S V^T, scaled by sqrt(max(1, out / in)):

    M <- mu M + G;   W <- (1 - lr wd) W - lr sqrt(max(1, out/in)) orth(G + mu M).

orth is approximated by five steps of the quintic Newton-Schulz iteration
X <- a X + (b A + c A^2) X, A = X X^T, (a, b, c) = (3.4445, -4.7750, 2.0315), started from
M / ||M||_F, which maps the singular values into roughly [0.7, 1.2] (all but the tiniest, which
stay small; :func:`orthogonalize`; :func:`orthogonalize_svd` is the exact reference). Every direction of the update gets the same
step, whatever the conditioning of the layer's inputs: this is what speeds features that
gradient descent learns slowly from strongly correlated inputs (THEIA's set lookup from a
scalar-encoded number, docs/theia.md).

Parameters are split by :func:`muon_param_groups`: weights of ``nn.Linear`` layers whose
smaller side is at least ``min_dim`` go to Muon; biases, norms, embeddings and the thin
input layers (``Linear(1, h)``, ``Linear(21, h)``) go to AdamW. Each group keeps its own base
learning rate (``base_lr``), which the trainer multiplies by the schedule.
"""
from __future__ import annotations

import math

import torch
from torch import nn

NS_COEFFS = (3.4445, -4.7750, 2.0315)


def orthogonalize(m: torch.Tensor, steps: int = 5, dtype: torch.dtype = torch.float32,
                  eps: float = 1e-7) -> torch.Tensor:
    """Approximately U V^T for m = U S V^T (out, in): quintic Newton-Schulz in ``dtype``
    (bfloat16 halves its cost on a CPU with AVX512-BF16 and on GPUs; the iteration only needs
    the singular values brought near 1, so its precision suffices), returned in float32."""
    a, b, c = NS_COEFFS
    x = (m.float() / (m.norm() + eps)).to(dtype)  # (out, in), spectral norm <= 1
    wide = x.shape[0] <= x.shape[1]
    if not wide:
        x = x.T  # (in, out): iterate on the smaller Gram matrix
    for _ in range(steps):
        gram = x @ x.T  # (r, r)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x if wide else x.T).float()


def orthogonalize_svd(m: torch.Tensor) -> torch.Tensor:
    """The exact polar factor U V^T of m (the reference for :func:`orthogonalize`)."""
    u, _, vh = torch.linalg.svd(m.double(), full_matrices=False)
    return (u @ vh).to(m.dtype)


def muon_param_groups(model: nn.Module, *, muon_lr: float, adam_lr: float, min_dim: int = 32) -> list[dict]:
    """Two parameter groups: Muon for ``nn.Linear`` weights with min(out, in) >= ``min_dim``,
    AdamW for the rest. Parameters shared between modules are counted once."""
    matrices = {id(mod.weight): mod.weight for mod in model.modules()
                if isinstance(mod, nn.Linear) and min(mod.weight.shape) >= min_dim}
    rest = [p for p in model.parameters() if id(p) not in matrices]
    groups = [dict(params=list(matrices.values()), use_muon=True, lr=muon_lr, base_lr=muon_lr),
              dict(params=rest, use_muon=False, lr=adam_lr, base_lr=adam_lr)]
    return [g for g in groups if g["params"]]


class MuonAdamW(torch.optim.Optimizer):
    """Muon on groups with ``use_muon``, AdamW (decoupled weight decay, bias-corrected) on the
    others; see the module docstring. State tensors: ``momentum`` (Muon) or ``exp_avg``,
    ``exp_avg_sq`` and ``step`` (AdamW), so checkpoints hold only tensors and numbers."""

    def __init__(self, groups: list[dict], *, momentum: float = 0.95, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, ns_steps: int = 5, ns_bf16: bool = False):
        defaults = dict(momentum=momentum, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        ns_steps=ns_steps, ns_bf16=ns_bf16, use_muon=False)
        super().__init__(groups, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if group["use_muon"]:
                    buf = state.setdefault("momentum", torch.zeros_like(p))
                    buf.mul_(group["momentum"]).add_(p.grad)
                    update = orthogonalize(p.grad.add(buf, alpha=group["momentum"]), group["ns_steps"],
                                           torch.bfloat16 if group["ns_bf16"] else torch.float32)
                    scale = math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
                    p.mul_(1 - lr * wd).add_(update.to(p.dtype), alpha=-lr * scale)
                else:
                    if not state:
                        state["step"] = torch.zeros((), dtype=torch.float64)
                        state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
                    beta1, beta2 = group["betas"]
                    state["step"] += 1
                    t = float(state["step"])
                    state["exp_avg"].lerp_(p.grad, 1 - beta1)
                    state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                    denom = (state["exp_avg_sq"] / (1 - beta2 ** t)).sqrt_().add_(group["eps"])
                    p.mul_(1 - lr * wd).addcdiv_(state["exp_avg"], denom, value=-lr / (1 - beta1 ** t))
        return loss
