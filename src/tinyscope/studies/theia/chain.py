"""THEIA's mod-3 chain (Li 2026, seed003-details Sec. 1.6): the step model, the TransitionNet
and the chain model that composes them.

* :class:`TheiaStep` (1,508,096 parameters): raw-integer inputs through :class:`ChainEncoders`,
  an arithmetic MLP, bridges and three :class:`SubspaceEngine` s, a cosine head against block
  one-hot prototypes; (B, 31) records -> (B, 3) logits.
* :class:`TransitionNet` (4,803): y_t = MLP([onehot(y_{t-1}); onehot(local_t)]).
* :class:`ChainModel` = step + transition over chains (B, T, 31) -> (B, T, 3): both modules exist
  from construction, so every training phase's checkpoint holds the same parameter names.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.studies.theia.engines import N_ARITH, N_CLASSES, N_REL, Bridge, Encoder, fuse, mlp
from tinyscope.studies.theia.task import SET_SIZE, split_record


class SubspaceEngine(nn.Module):
    """The chain model's engine: g, l, e = LN(GELU(Linear([x; ctx]))); g' = GELU(W[g; e]),
    l' = GELU(W[l; e]), e' = GELU(W[e; g'; l']); out = MLP'(4D -> D)([g'; l'; e'; x]) where
    MLP' ends in GELU -> LN."""

    def __init__(self, d_in: int, d: int):
        super().__init__()
        self.g, self.l, self.e = (fuse(d_in, d) for _ in range(3))
        self.fg = nn.Sequential(nn.Linear(2 * d, d), nn.GELU())
        self.fl = nn.Sequential(nn.Linear(2 * d, d), nn.GELU())
        self.fe = nn.Sequential(nn.Linear(3 * d, d), nn.GELU())
        self.out = nn.Sequential(mlp(4 * d, d, hidden=2 * d), nn.GELU(), nn.LayerNorm(d))
        self.hook_out = HookPoint()

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        inp = torch.cat([x, ctx], -1)
        g, l, e = self.g(inp), self.l(inp), self.e(inp)  # (B, D) each
        g = self.fg(torch.cat([g, e], -1))  # (B, D)
        l = self.fl(torch.cat([l, e], -1))  # (B, D)
        e = self.fe(torch.cat([e, g, l], -1))  # (B, D)
        return self.hook_out(self.out(torch.cat([g, l, e, x], -1)))  # (B, D)


class ChainEncoders(nn.Module):
    """The chain models' input encoders: separate number encoders for a, b, d (hidden D, unknown
    init N(0, 0.02^2)), arith / relation / logic-op embeddings, and the set encoder."""

    def __init__(self, d: int, n_ops: int):
        super().__init__()
        self.a, self.b, self.d = (Encoder(1, d, d, 0.02) for _ in range(3))
        self.arith, self.rel, self.op = nn.Embedding(N_ARITH, d), nn.Embedding(N_REL, d), nn.Embedding(n_ops, d)
        self.set = Encoder(SET_SIZE, d, d, 0.02)

    def forward(self, f: dict) -> dict[str, torch.Tensor]:
        return {"a": self.a(f["a"], f["a_unk"]), "b": self.b(f["b"], f["b_unk"]), "d": self.d(f["d"], f["d_unk"]),
                "S": self.set(f["S"], f["s_unk"]), "arith": self.arith(f["arith"]), "rel": self.rel(f["rel"]),
                "op": self.op(f["op"])}


class TheiaStep(HookedModule):
    """THEIA's step model for the mod-3 chain (Sec. 1.6): raw-integer inputs, SubspaceEngines,
    and a cosine head against learnable block one-hot prototypes scaled by 10."""

    def __init__(self, d: int = 128, n_ops: int = 5, number_scale: float = 1.0, cosine_scale: float = 10.0):
        super().__init__()
        self.number_scale, self.cosine_scale = number_scale, cosine_scale
        self.enc = ChainEncoders(d, n_ops)
        self.arith = nn.Sequential(mlp(3 * d, d, hidden=2 * d), nn.GELU(), nn.LayerNorm(d))
        self.bridge_order, self.bridge_set = Bridge(d), Bridge(d)
        self.order, self.set, self.logic = SubspaceEngine(3 * d, d), SubspaceEngine(2 * d, d), SubspaceEngine(3 * d, d)
        self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        proto = torch.zeros(N_CLASSES, d)
        for k in range(N_CLASSES):
            proto[k, k * d // 3: (k + 1) * d // 3 if k < N_CLASSES - 1 else d] = 1.0
        self.prototypes = nn.Parameter(proto)
        self.hook_arith = HookPoint()
        self.setup_hooks()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.enc(split_record(x, self.number_scale))
        c = self.hook_arith(self.arith(torch.cat([e["a"], e["b"], e["arith"]], -1)))  # (B, D)
        v_ord = self.order(self.bridge_order(c), torch.cat([e["d"], e["rel"]], -1))  # (B, D)
        v_set = self.set(self.bridge_set(c), e["S"])  # (B, D)
        out = self.head(self.logic(v_ord, torch.cat([v_set, e["op"]], -1)))  # (B, D)
        return self.cosine_scale * F.normalize(out, dim=-1) @ F.normalize(self.prototypes, dim=-1).T  # (B, 3)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


# ---------------------------------------------------------------- the chain
class TransitionNet(nn.Module):
    """y_t = MLP([onehot(y_{t-1}); onehot(local_t)]): 6 -> 64 -> 64 -> 3 with GELU (4,803 parameters)."""

    def __init__(self, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, N_CLASSES))

    def forward(self, prev: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([prev, local], -1))  # (B, 3)


def straight_through_gumbel(logits: torch.Tensor, tau: float, generator: torch.Generator | None = None,
                            u: torch.Tensor | None = None) -> torch.Tensor:
    """Hard one-hot of a Gumbel-softmax sample in the forward pass, the soft sample's gradient.
    ``u`` (B, 3): the uniform draws in (0, 1) of the Gumbel noise -log(-log u); None draws them
    with ``generator``."""
    if u is None:
        u = torch.rand(logits.shape, generator=generator, device=logits.device)  # (B, 3)
    u = u.to(logits.dtype).clamp(1e-10, 1 - 1e-10)  # (B, 3)
    soft = torch.softmax((logits - torch.log(-torch.log(u))) / tau, -1)  # (B, 3)
    hard = F.one_hot(soft.argmax(-1), N_CLASSES).to(soft.dtype)  # (B, 3)
    return hard - soft.detach() + soft


class ChainModel(nn.Module):
    """Step model + TransitionNet over chains (B, T, 31): step 0's prediction is y_0; then
    y_t = Transition(onehot(y_{t-1}), onehot(local_t)). Inference passes hard argmax one-hots;
    training (``tau`` given) passes straight-through Gumbel-softmax samples, their uniform draws
    ``noise`` (B, T, 2, 3) given with the batch (``[:, t, 0]`` for the local label of step t,
    ``[:, t, 1]`` for the running label after step t; ``[:, 0, 1]`` is unused) or, when None,
    drawn from ``generator``."""

    def __init__(self, step: nn.Module, transition: TransitionNet | None = None):
        super().__init__()
        self.step = step
        self.transition = transition or TransitionNet()

    def forward(self, chains: torch.Tensor, tau: float | None = None, generator: torch.Generator | None = None,
                noise: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, 3) of every step's running label."""
        B, T, _ = chains.shape
        local_logits = self.step(chains.reshape(B * T, -1)).reshape(B, T, N_CLASSES)  # (B, T, 3)

        def pick(z: torch.Tensor, t: int, which: int) -> torch.Tensor:
            if tau is None:
                return F.one_hot(z.argmax(-1), N_CLASSES).to(z.dtype)  # (B, 3)
            return straight_through_gumbel(z, tau, generator, None if noise is None else noise[:, t, which])

        out, prev = [local_logits[:, 0]], pick(local_logits[:, 0], 0, 0)
        for t in range(1, T):
            logits = self.transition(prev, pick(local_logits[:, t], t, 0))  # (B, 3)
            out.append(logits)
            prev = pick(logits, t, 1)
        return torch.stack(out, 1)  # (B, T, 3)
