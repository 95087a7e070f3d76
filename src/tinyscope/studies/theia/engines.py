"""THEIA's 4-domain network (Li 2026, seed003-details Sec. 1.3): number, set and embedding
encoders, the arithmetic, order, set and logic engines, the bridges between them and the
prototype head, and the shared building blocks (``mlp``, ``fuse``, :class:`Encoder`).

Every model of the study reads the flat 31-integer record of :mod:`tinyscope.studies.theia.task`
(fields through :func:`~tinyscope.studies.theia.task.split_record`, shape (B, 31)) and returns
(B, 3) logits over F, T, U.

:class:`Theia` (``IsisV9``; 2,751,232 parameters at D = 128)::

    c     = Arith([enc(a); enc(b); emb_arith])                     arith.hook_out
    ord   = Order(bridge_o(c), enc_d(d), emb_rel)                   order.hook_out
    set   = Set(bridge_s(c), set_enc(S))                            set.hook_out
    out   = Head(Logic(ord, set, emb_op))                           logic.hook_out, head.hook_out
    logits = out . protos^T  (training)     predict = argmax cos(out, protos)  (inference)

An encoder whose Unknown flag is set outputs its learned ``unknown`` vector instead.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.studies.theia.task import ARITH_OPS, RELATIONS, SET_SIZE, VALUE_NAMES, split_record

N_CLASSES, N_ARITH, N_REL = len(VALUE_NAMES), len(ARITH_OPS), len(RELATIONS)  # 3, 4, 6


def mlp(d_in: int, d_out: int, hidden: int | None = None) -> nn.Sequential:
    """MLP(i -> o) = Linear(i, h) -> GELU -> LayerNorm(h) -> Linear(h, o), h = 2i by default."""
    h = hidden or 2 * d_in
    return nn.Sequential(nn.Linear(d_in, h), nn.GELU(), nn.LayerNorm(h), nn.Linear(h, d_out))


def fuse(d_in: int, d_out: int) -> nn.Sequential:
    """Fuse(i) = Linear(i, D) -> GELU -> LayerNorm(D)."""
    return nn.Sequential(nn.Linear(d_in, d_out), nn.GELU(), nn.LayerNorm(d_out))


class Encoder(nn.Module):
    """Linear(n_in, h) -> GELU -> Linear(h, D), replaced by a learned ``unknown`` vector where
    the flag is set (``where(flag, unknown, net(x))``; the chain code's mask blend is the same
    map for 0/1 flags)."""

    def __init__(self, n_in: int, hidden: int, d: int, unknown_std: float):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, hidden), nn.GELU(), nn.Linear(hidden, d))
        self.unknown = nn.Parameter(torch.randn(d) * unknown_std)

    def forward(self, x: torch.Tensor, unk: torch.Tensor) -> torch.Tensor:
        if x.dim() == 1:
            x = x.unsqueeze(-1)  # (B, 1)
        return torch.where(unk.unsqueeze(-1), self.unknown, self.net(x))  # (B, D)


class Bridge(nn.Module):
    """Residual bridge between engines: c' = LN(GELU(W c)) + c."""

    def __init__(self, d: int):
        super().__init__()
        self.net = fuse(d, d)
        self.hook_out = HookPoint()

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        return self.hook_out(self.net(c) + c)  # (B, D)


class ThreeBranchCore(nn.Module):
    """Three branch MLPs over one input, then fusion around the shared third branch s:
    p <- Fuse([p; s]), q <- Fuse([q; s]), s <- Fuse([s; p; q]) (with the updated p, q).
    Order: (p, q, s) = (G, L, E); Logic: (C, D, I)."""

    def __init__(self, d_in: int, d: int):
        super().__init__()
        self.p, self.q, self.s = (mlp(d_in, d, hidden=2 * d) for _ in range(3))
        self.fuse_p, self.fuse_q, self.fuse_s = fuse(2 * d, d), fuse(2 * d, d), fuse(3 * d, d)
        self.hook_p, self.hook_q, self.hook_s = HookPoint(), HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        p, q, s = self.p(x), self.q(x), self.s(x)  # (B, D) each
        p = self.fuse_p(torch.cat([p, s], -1))  # (B, D)
        q = self.fuse_q(torch.cat([q, s], -1))  # (B, D)
        s = self.fuse_s(torch.cat([s, p, q], -1))  # (B, D)
        return self.hook_p(p), self.hook_q(q), self.hook_s(s)


class ArithEngine(nn.Module):
    """c = MLP(3D -> D)([enc(a); enc(b); emb_arith]) with one number encoder shared by a and b."""

    def __init__(self, d: int, num_hidden: int, unknown_std: float):
        super().__init__()
        self.enc = Encoder(1, num_hidden, d, unknown_std)
        self.emb = nn.Embedding(N_ARITH, d)
        self.net = mlp(3 * d, d)
        self.hook_out = HookPoint()

    def forward(self, f: dict) -> torch.Tensor:
        x = torch.cat([self.enc(f["a"], f["a_unk"]), self.enc(f["b"], f["b_unk"]), self.emb(f["arith"])], -1)
        return self.hook_out(self.net(x))  # (B, D)


class OrderEngine(nn.Module):
    """Branches G, L, E over [c'; enc(d); emb_rel], fused around E; out = MLP(4D -> D)([g; l; e; c'])."""

    def __init__(self, d: int, num_hidden: int, unknown_std: float):
        super().__init__()
        self.enc = Encoder(1, num_hidden, d, unknown_std)
        self.emb = nn.Embedding(N_REL, d)
        self.core = ThreeBranchCore(3 * d, d)
        self.out = mlp(4 * d, d)
        self.hook_out = HookPoint()

    def forward(self, c: torch.Tensor, f: dict) -> torch.Tensor:
        g, l, e = self.core(torch.cat([c, self.enc(f["d"], f["d_unk"]), self.emb(f["rel"])], -1))
        return self.hook_out(self.out(torch.cat([g, l, e, c], -1)))  # (B, D)


class SetEngine(nn.Module):
    """set = MLP(2D -> D)([c'; set_enc(S)])."""

    def __init__(self, d: int, set_hidden: int, unknown_std: float):
        super().__init__()
        self.enc = Encoder(SET_SIZE, set_hidden, d, unknown_std)
        self.net = mlp(2 * d, d)
        self.hook_out = HookPoint()

    def forward(self, c: torch.Tensor, f: dict) -> torch.Tensor:
        return self.hook_out(self.net(torch.cat([c, self.enc(f["S"], f["s_unk"])], -1)))  # (B, D)


class LogicEngine(nn.Module):
    """Branches C, D, I over [ord; set; emb_op], fused around I; out = MLP(3D -> D)([c; d; i])."""

    def __init__(self, d: int, n_ops: int):
        super().__init__()
        self.emb = nn.Embedding(n_ops, d)
        self.core = ThreeBranchCore(3 * d, d)
        self.out = mlp(3 * d, d)
        self.hook_out = HookPoint()

    def forward(self, v_ord: torch.Tensor, v_set: torch.Tensor, op: torch.Tensor) -> torch.Tensor:
        c, d, i = self.core(torch.cat([v_ord, v_set, self.emb(op)], -1))
        return self.hook_out(self.out(torch.cat([c, d, i], -1)))  # (B, D)


class SingleMLPLogic(nn.Module):
    """The ablation's logic engine (the code's subspace ablation): one capacity-matched MLP in place
    of the C / D / I branches, Linear(3D, 6D) -> GELU -> LN -> Linear(6D, 3D) -> GELU -> LN ->
    Linear(3D, D) over [ord; set; emb_op] (643,200 parameters with the embedding at D = 128;
    the model has 2,486,400)."""

    def __init__(self, d: int, n_ops: int):
        super().__init__()
        self.emb = nn.Embedding(n_ops, d)
        self.net = nn.Sequential(nn.Linear(3 * d, 6 * d), nn.GELU(), nn.LayerNorm(6 * d),
                                 nn.Linear(6 * d, 3 * d), nn.GELU(), nn.LayerNorm(3 * d), nn.Linear(3 * d, d))
        self.hook_out = HookPoint()

    def forward(self, v_ord: torch.Tensor, v_set: torch.Tensor, op: torch.Tensor) -> torch.Tensor:
        return self.hook_out(self.net(torch.cat([v_ord, v_set, self.emb(op)], -1)))  # (B, D)


class PrototypeHead(nn.Module):
    """out = LN(Dropout(GELU(W x))); logits = out . P^T with orthogonally initialised prototypes
    P (3, D); inference takes the argmax of the cosine between out and P."""

    def __init__(self, d: int, dropout: float):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Dropout(dropout), nn.LayerNorm(d))
        self.prototypes = nn.Embedding(N_CLASSES, d)
        nn.init.orthogonal_(self.prototypes.weight)
        self.hook_out = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_out(self.net(x))  # (B, D)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        return out @ self.prototypes.weight.T  # (B, 3)

    def cosine(self, out: torch.Tensor) -> torch.Tensor:
        return F.normalize(out, dim=-1) @ F.normalize(self.prototypes.weight, dim=-1).T  # (B, 3)


class Theia(HookedModule):
    """The 4-domain THEIA (``IsisV9``); see the module docstring. The ablations of Sec. 1.8:
    ``logic_engine="single_mlp"`` (:class:`SingleMLPLogic`, 2,486,400 parameters) and
    ``bridges=False`` (c goes to Order and Set unchanged, 2,717,696)."""

    def __init__(self, d: int = 128, num_hidden: int = 64, n_ops: int = 5, number_scale: float = 1 / 20,
                 dropout: float = 0.1, unknown_std: float = 1.0, logic_engine: str = "three_branch",
                 bridges: bool = True):
        super().__init__()
        self.number_scale = number_scale
        self.arith = ArithEngine(d, num_hidden, unknown_std)
        if bridges:
            self.bridge_order, self.bridge_set = Bridge(d), Bridge(d)
        else:
            self.bridge_order, self.bridge_set = nn.Identity(), nn.Identity()
        self.order = OrderEngine(d, num_hidden, unknown_std)
        self.set = SetEngine(d, num_hidden, unknown_std)
        self.logic = LogicEngine(d, n_ops) if logic_engine == "three_branch" else SingleMLPLogic(d, n_ops)
        self.head = PrototypeHead(d, dropout)
        self.setup_hooks()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        f = split_record(x, self.number_scale)
        c = self.arith(f)  # (B, D)
        v_ord = self.order(self.bridge_order(c), f)  # (B, D)
        v_set = self.set(self.bridge_set(c), f)  # (B, D)
        return self.head(self.logic(v_ord, v_set, f["op"]))  # (B, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head.logits(self.features(x))  # (B, 3)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.head.cosine(self.features(x)).argmax(-1)  # (B,)
