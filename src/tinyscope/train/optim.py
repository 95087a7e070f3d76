"""Muon for the hidden weight matrices, AdamW for everything else, in one optimizer.

Muon (Jordan et al. 2024, "Muon: MomentUm Orthogonalized by Newton-schulz") replaces the
update of a weight matrix W (out, in) by the nearest semi-orthogonal matrix to its Nesterov
momentum, O = U V^T where M = U S V^T, scaled by sqrt(max(1, out / in)). With the momentum
kept as an exponential average (torch's convention):

    B <- mu B + (1 - mu) G;   W <- (1 - lr wd) W - lr sqrt(max(1, out/in)) orth((1 - mu) G + mu B).

(The sum convention B' <- mu B' + G, update G + mu B', gives the same step: B = (1 - mu) B',
and orth is scale-free.) orth is approximated by five steps of the quintic Newton-Schulz
iteration X <- a X + (b A + c A^2) X, A = X X^T, (a, b, c) = (3.4445, -4.7750, 2.0315),
started from M / ||M||_F, which maps the singular values into roughly [0.7, 1.2] (all but the
tiniest, which stay small; :func:`orthogonalize`; :func:`orthogonalize_svd` is the exact
reference). Every direction of the update gets the same step, whatever the conditioning of the
layer's inputs: this is what speeds features that gradient descent learns slowly from strongly
correlated inputs (THEIA's set lookup from a scalar-encoded number, docs/theia.md).

Which implementation runs (:class:`MuonAdamW` ``implementation="auto"``):

* ``torch.optim.Muon`` (torch >= 2.9) for the Muon groups when Newton-Schulz runs in bfloat16
  (``ns_bf16=True``, ``train.muon_bf16``, the default). The mapping: its ``lr`` is our group
  rate, ``adjust_lr_fn=None`` ("original") is our sqrt(max(1, out/in)), ``nesterov=True``,
  ``ns_coefficients`` = :data:`NS_COEFFS`, ``ns_steps``, ``eps`` = :data:`NS_EPS` (its
  normalisation floor), and decoupled weight decay ``W <- (1 - lr wd) W`` with the unscaled rate.
* ours (:func:`muon_update`) otherwise: on an older torch, and for ``ns_bf16=False``, because
  torch's Muon always iterates in bfloat16 and cannot run Newton-Schulz in float32. In bfloat16
  ours performs torch's operations in torch's order (cast, normalise, ``addmm``), so the two
  give the same parameters step for step (``tests/core/train/test_optim.py``); in float32 ours
  differs from torch's bfloat16 only by bfloat16 rounding.

Both keep the state ``momentum_buffer`` per matrix (a resume checkpoint written by one loads
into the other; one from before, with the summed ``momentum``, is converted on load). The AdamW
half is ours, equal to ``torch.optim.AdamW`` step for step (tested), in the same optimizer so
that one state_dict and one set of groups carry both.

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
NS_EPS = 1e-7  # floor of ||M||_F in the Newton-Schulz start (torch.optim.Muon's eps)
IMPLEMENTATIONS = ("auto", "torch", "tinyscope")
TORCH_MUON = getattr(torch.optim, "Muon", None)  # torch >= 2.9


def orthogonalize(m: torch.Tensor, steps: int = 5, dtype: torch.dtype = torch.float32,
                  eps: float = NS_EPS) -> torch.Tensor:
    """Approximately U V^T for m = U S V^T (out, in): quintic Newton-Schulz in ``dtype``
    (bfloat16 halves its cost on a CPU with AVX512-BF16 and on GPUs; the iteration only needs
    the singular values brought near 1, so its precision suffices), returned in float32. The
    operations are torch.optim.Muon's, in its order, so that bfloat16 results are equal."""
    a, b, c = NS_COEFFS
    x = m.to(dtype)  # (out, in)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T  # (in, out): iterate on the smaller Gram matrix
    x = x / x.norm().clamp(min=eps)  # spectral norm <= 1
    for _ in range(steps):
        gram = x @ x.T  # (r, r)
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)  # (r, r): b A + c A^2
        x = torch.addmm(x, poly, x, beta=a)  # (r, n)
    return (x.T if tall else x).float()


def orthogonalize_svd(m: torch.Tensor) -> torch.Tensor:
    """The exact polar factor U V^T of m (the reference for :func:`orthogonalize`)."""
    u, _, vh = torch.linalg.svd(m.double(), full_matrices=False)
    return (u @ vh).to(m.dtype)


def muon_update(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor, *, lr: float, weight_decay: float,
                momentum: float, ns_steps: int, dtype: torch.dtype, eps: float = NS_EPS) -> None:
    """One Muon step of matrix ``p`` (out, in) in place, with its momentum ``buf`` (the module
    docstring's equations; torch.optim.Muon's with ``nesterov=True``)."""
    buf.lerp_(grad, 1 - momentum)  # (out, in)
    update = orthogonalize(grad.lerp(buf, momentum), ns_steps, dtype, eps)  # (out, in)
    p.mul_(1 - lr * weight_decay).add_(update.to(p.dtype), alpha=-lr * math.sqrt(max(1.0, p.shape[0] / p.shape[1])))


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups for ``train.decay_params="matrices"``: ``weight_decay`` on the parameters with
    ndim >= 2 (linear weights, embedding tables), none on the rest (biases, norm gains)."""
    params = list(model.parameters())  # shared parameters once
    groups = [dict(params=[p for p in params if p.ndim >= 2], weight_decay=weight_decay),
              dict(params=[p for p in params if p.ndim < 2], weight_decay=0.0)]
    return [g for g in groups if g["params"]]


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
    others; see the module docstring, which also says when ``torch.optim.Muon`` does the Muon
    half (:attr:`implementation`). State tensors: ``momentum_buffer`` (Muon) or ``exp_avg``,
    ``exp_avg_sq`` and ``step`` (AdamW), so checkpoints hold only tensors and numbers."""

    def __init__(self, groups: list[dict], *, momentum: float = 0.95, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, ns_steps: int = 5, ns_bf16: bool = False,
                 implementation: str = "auto"):
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation={implementation!r}; choose one of {', '.join(IMPLEMENTATIONS)}")
        if implementation == "torch" and (TORCH_MUON is None or not ns_bf16):
            raise ValueError("torch.optim.Muon needs torch >= 2.9 and runs Newton-Schulz in bfloat16 only (ns_bf16=True)")
        if implementation == "auto":
            implementation = "torch" if TORCH_MUON is not None and ns_bf16 else "tinyscope"
        self.implementation = implementation
        groups = [dict(g, **_MUON_KEYS) if g.get("use_muon") else g for g in groups]
        defaults = dict(momentum=momentum, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        ns_steps=ns_steps, ns_bf16=ns_bf16, use_muon=False)
        super().__init__(groups, defaults)
        self._torch_muon = None
        if implementation == "torch":
            muon = [g for g in self.param_groups if g["use_muon"]]
            self._torch_muon = TORCH_MUON(muon, momentum=momentum, weight_decay=weight_decay) if muon else None

    def load_state_dict(self, state_dict: dict) -> None:
        """Also a checkpoint of before ``momentum_buffer``: its summed ``momentum`` B' becomes
        (1 - mu) B', and its Muon groups gain the keys torch.optim.Muon reads."""
        groups = [dict(g, **{k: v for k, v in _MUON_KEYS.items() if k not in g}) if g.get("use_muon") else g
                  for g in state_dict["param_groups"]]
        mu = {i: g.get("momentum", self.defaults["momentum"]) for g in groups if g.get("use_muon") for i in g["params"]}
        state = {}
        for i, entry in state_dict["state"].items():
            entry = dict(entry)
            if "momentum" in entry and "momentum_buffer" not in entry and mu.get(i) is not None:
                entry["momentum_buffer"] = entry.pop("momentum") * (1 - mu[i])
            state[i] = entry
        super().load_state_dict({"state": state, "param_groups": groups})

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        if self._torch_muon is not None:  # the same group dicts and state, re-linked after a load
            self._torch_muon.param_groups = [g for g in self.param_groups if g["use_muon"]]
            self._torch_muon.state = self.state
            self._torch_muon.step()
        for group in self.param_groups:
            if group["use_muon"] and self._torch_muon is not None:
                continue
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if group["use_muon"]:
                    buf = state.setdefault("momentum_buffer", torch.zeros_like(p))
                    muon_update(p, p.grad, buf, lr=lr, weight_decay=wd, momentum=group["momentum"],
                                ns_steps=group["ns_steps"], eps=group["eps"],
                                dtype=torch.bfloat16 if group["ns_bf16"] else torch.float32)
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


# What a Muon group holds beside ours for torch.optim.Muon (the module docstring's mapping); eps
# is Muon's normalisation floor there, AdamW's denominator term in the other groups.
_MUON_KEYS = dict(nesterov=True, ns_coefficients=NS_COEFFS, eps=NS_EPS, adjust_lr_fn=None)
