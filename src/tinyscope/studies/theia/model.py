"""THEIA: a modular network of arithmetic, order, set and logic engines (Li 2026,
seed003-details Sec. 1.3 and 1.6), its chain step model and TransitionNet, and the baselines.

Every model here reads the flat 31-integer record of :mod:`tinyscope.studies.theia.task`
(``[a, b, arith, d, rel, S_0..S_20, logic, a_unk, b_unk, d_unk, s_unk]``, shape (B, 31)) and
returns (B, 3) logits over F, T, U; ``predict`` gives the class the paper reads off.

* :class:`Theia` (4-domain, 2,751,232 parameters at D = 128)::

      c     = Arith([enc(a); enc(b); emb_arith])                     arith.hook_out
      ord   = Order(bridge_o(c), enc_d(d), emb_rel)                   order.hook_out
      set   = Set(bridge_s(c), set_enc(S))                            set.hook_out
      out   = Head(Logic(ord, set, emb_op))                           logic.hook_out, head.hook_out
      logits = out . protos^T  (training)     predict = argmax cos(out, protos)  (inference)

  An encoder whose Unknown flag is set outputs its learned ``unknown`` vector instead.
* :class:`TheiaStep` (the chain's step model, 1,508,096 parameters), :class:`TransitionNet`
  (4,803), :class:`ChainModel` (step + transition, hard one-hots between steps).
* :class:`FlatMLP`: the chain encoders, concatenated (7 x 128 + 4 flags = 900) into a 3-layer
  MLP; hidden 512 (799,619 parameters) or the parameter-matched 1243 (2,747,003).
* :class:`TheiaTransformer`: 8 tokens, 8 pre-LN layers of tinyscope's own transformer blocks
  (non-causal), mean-pool, LN, Linear(3): 3,582,147 parameters.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.errors import check, check_choice
from tinyscope.models.hooks import HookedModule, HookPoint
from tinyscope.models.transformer import Block, TransformerConfig

N_CLASSES = 3
N_ARITH, N_REL, SET_SIZE = 4, 6, 21


def split_record(x: torch.Tensor, number_scale: float) -> dict[str, torch.Tensor]:
    """Fields of flat records ``x`` (B, 31): numbers as floats times ``number_scale``,
    categorical fields as long, the set as float bits, the four flags as bool."""
    x = x.long()
    return {"a": x[:, 0].float() * number_scale, "b": x[:, 1].float() * number_scale,
            "arith": x[:, 2], "d": x[:, 3].float() * number_scale, "rel": x[:, 4],
            "S": x[:, 5:26].float(), "op": x[:, 26],
            "a_unk": x[:, 27].bool(), "b_unk": x[:, 28].bool(), "d_unk": x[:, 29].bool(), "s_unk": x[:, 30].bool()}


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
    """The 4-domain THEIA (``IsisV9``); see the module docstring."""

    def __init__(self, d: int = 128, num_hidden: int = 64, n_ops: int = 5, number_scale: float = 1 / 20,
                 dropout: float = 0.1, unknown_std: float = 1.0):
        super().__init__()
        self.number_scale = number_scale
        self.arith = ArithEngine(d, num_hidden, unknown_std)
        self.bridge_order, self.bridge_set = Bridge(d), Bridge(d)
        self.order = OrderEngine(d, num_hidden, unknown_std)
        self.set = SetEngine(d, num_hidden, unknown_std)
        self.logic = LogicEngine(d, n_ops)
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


# ---------------------------------------------------------------- the chain step model
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


class FlatMLP(HookedModule):
    """The flat baseline: chain encoders -> [7 x D features; 4 flags] -> Linear(900, H) -> GELU
    -> LN -> Linear(H, H) -> GELU -> LN -> Linear(H, 3). H = 512 (0.80M) or 1243 (2.75M)."""

    def __init__(self, d: int = 128, hidden: int = 512, n_ops: int = 5, number_scale: float = 1.0):
        super().__init__()
        self.number_scale = number_scale
        self.enc = ChainEncoders(d, n_ops)
        self.net = nn.Sequential(nn.Linear(7 * d + 4, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.out = nn.Linear(hidden, N_CLASSES)
        self.hook_hidden = HookPoint()
        self.setup_hooks()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = split_record(x, self.number_scale)
        e = self.enc(f)
        flags = torch.stack([f[k] for k in ("a_unk", "b_unk", "d_unk", "s_unk")], -1).float()  # (B, 4)
        feats = torch.cat([e[k] for k in ("a", "b", "d", "S", "arith", "rel", "op")] + [flags], -1)  # (B, 7D+4)
        return self.out(self.hook_hidden(self.net(feats)))  # (B, 3)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class TheiaTransformer(HookedModule):
    """The pre-LN transformer baseline (``TF8LTuned``): 8 tokens [a, b, arith, d, rel, S, op,
    flags] (a, b, d: own embeddings over 0..20 plus an Unknown sentinel 21; S and the flags:
    linear projections) plus learned positions, tinyscope transformer blocks without a causal
    mask, mean-pool, LN, Linear(D, 3)."""

    N_TOKENS = 8

    def __init__(self, d: int = 192, n_heads: int = 8, n_layers: int = 8, d_mlp: int = 768, n_ops: int = 5,
                 act: str = "gelu"):
        super().__init__()
        self.cfg = TransformerConfig(vocab_size=1, n_ctx=self.N_TOKENS, d_model=d, d_head=d // n_heads,
                                     n_heads=[n_heads] * n_layers, d_mlp=[d_mlp] * n_layers, act=act, norm="pre",
                                     attn_out_proj=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
                                     causal=False)
        self.emb_a, self.emb_b, self.emb_d = (nn.Embedding(22, d) for _ in range(3))
        self.emb_arith, self.emb_rel, self.emb_op = nn.Embedding(N_ARITH, d), nn.Embedding(N_REL, d), nn.Embedding(n_ops, d)
        self.set_proj, self.flag_proj = nn.Linear(SET_SIZE, d), nn.Linear(4, d)
        self.W_pos = nn.Parameter(torch.randn(self.N_TOKENS, d) * 0.02)
        self.blocks = nn.ModuleList(Block(self.cfg, layer) for layer in range(n_layers))
        self.ln_final = nn.LayerNorm(d)
        self.W_U = nn.Linear(d, N_CLASSES)
        self.hook_embed, self.hook_pooled = HookPoint(), HookPoint()
        self.setup_hooks()

    @staticmethod
    def number_id(x: torch.Tensor, col: int, flag: int) -> torch.Tensor:
        """Embedding id of a number: its value clamped to 0..20, or 21 when Unknown."""
        return torch.where(x[:, flag].bool(), 21, x[:, col].clamp(0, 20))  # (B,)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        x, num = x.long(), self.number_id
        tokens = torch.stack([self.emb_a(num(x, 0, 27)), self.emb_b(num(x, 1, 28)), self.emb_arith(x[:, 2]),
                              self.emb_d(num(x, 3, 29)), self.emb_rel(x[:, 4]), self.set_proj(x[:, 5:26].float()),
                              self.emb_op(x[:, 26]), self.flag_proj(x[:, 27:31].float())], 1)  # (B, 8, D)
        return self.hook_embed(tokens + self.W_pos)  # (B, 8, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, 8, D)
        for block in self.blocks:
            h = block(h)  # (B, 8, D)
        return self.W_U(self.ln_final(self.hook_pooled(h.mean(1))))  # (B, 3)

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


def straight_through_gumbel(logits: torch.Tensor, tau: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Hard one-hot of a Gumbel-softmax sample in the forward pass, the soft sample's gradient."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device).clamp_(1e-10, 1 - 1e-10)
    soft = torch.softmax((logits - torch.log(-torch.log(u))) / tau, -1)  # (B, 3)
    hard = F.one_hot(soft.argmax(-1), N_CLASSES).to(soft.dtype)  # (B, 3)
    return hard - soft.detach() + soft


class ChainModel(nn.Module):
    """Step model + TransitionNet over chains (B, T, 31): step 0's prediction is y_0; then
    y_t = Transition(onehot(y_{t-1}), onehot(local_t)). Inference passes hard argmax one-hots;
    training (``tau`` given) passes straight-through Gumbel-softmax samples."""

    def __init__(self, step: nn.Module, transition: TransitionNet | None = None):
        super().__init__()
        self.step = step
        self.transition = transition or TransitionNet()

    def forward(self, chains: torch.Tensor, tau: float | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Logits (B, T, 3) of every step's running label."""
        B, T, _ = chains.shape
        local_logits = self.step(chains.reshape(B * T, -1)).reshape(B, T, N_CLASSES)  # (B, T, 3)
        pick = (lambda z: F.one_hot(z.argmax(-1), N_CLASSES).to(z.dtype)) if tau is None else \
            (lambda z: straight_through_gumbel(z, tau, generator))
        out, prev = [local_logits[:, 0]], pick(local_logits[:, 0])
        for t in range(1, T):
            logits = self.transition(prev, pick(local_logits[:, t]))  # (B, 3)
            out.append(logits)
            prev = pick(logits)
        return torch.stack(out, 1)  # (B, T, 3)


# ---------------------------------------------------------------- config and factory
ARCHS = ("theia", "theia_step", "flat_mlp", "transformer")


@dataclass
class TheiaModelConfig:
    """Which network: ``theia`` (4-domain, D = 128), ``theia_step`` (chain step model),
    ``flat_mlp`` (hidden ``flat_hidden``: 512 or the parameter-matched 1243), ``transformer``."""

    arch: Literal["theia", "theia_step", "flat_mlp", "transformer"] = "theia"
    d_model: int = 128
    num_hidden: int = 64           # 4-domain number / set encoder hidden width
    dropout: float = 0.1
    flat_hidden: int = 512
    tf_d_model: int = 192
    tf_heads: int = 8
    tf_layers: int = 8
    tf_d_mlp: int = 768
    number_scale: float | None = None   # None: 1/20 for the 4-domain THEIA, raw integers otherwise
    number_init: Literal["default", "tiled"] = "default"   # tiled: see tile_number_encoders (no-op for transformer)
    tile_slope: float = 2.0             # tiled: pre-activation change per unit of the integer input

    def __post_init__(self):
        check_choice("model.arch", self.arch, ARCHS)
        check_choice("model.number_init", self.number_init, ("default", "tiled"))
        check(self.tile_slope > 0, f"model.tile_slope={self.tile_slope} must be > 0")
        check(self.d_model >= 3, f"model.d_model={self.d_model} must be >= 3")
        check(self.flat_hidden >= 1, f"model.flat_hidden={self.flat_hidden} must be >= 1")
        check(self.tf_d_model % self.tf_heads == 0,
              f"model.tf_d_model={self.tf_d_model} must be divisible by model.tf_heads={self.tf_heads}")
        check(0.0 <= self.dropout < 1.0, f"model.dropout={self.dropout} must lie in [0, 1)")


def tile_number_encoders(model: nn.Module, scale: float, slope: float = 2.0, span: tuple[int, int] = (0, 20)) -> int:
    """Re-initialise the first layer of every scalar number :class:`Encoder` (``Linear(1, h)``)
    so that its h GELU kinks tile the integer range: unit j computes
    GELU(s_j * slope * (n - t_j)) of the integer n = x / scale, with t_j ~ U(lo - 1/2, hi + 1/2)
    and a random sign s_j. PyTorch's default init (w, b ~ U(-1, 1)) puts most kinks outside
    the range of a/20, so the encoding starts nearly affine in n and the network must learn to
    tell neighbouring integers apart, which makes the set lookup S[c] slow (docs/theia.md).
    Draws from torch's global generator; returns the number of layers changed."""
    lo, hi = span
    changed = 0
    for mod in model.modules():
        if isinstance(mod, Encoder) and mod.net[0].in_features == 1:
            lin = mod.net[0]
            kinks = lo - 0.5 + (hi - lo + 1) * torch.rand(lin.out_features)  # (h,)
            sign = torch.where(torch.rand(lin.out_features) < 0.5, -1.0, 1.0)  # (h,)
            with torch.no_grad():
                lin.weight.copy_((sign * slope / scale).unsqueeze(-1))  # (h, 1)
                lin.bias.copy_(-sign * slope * kinks)  # (h,)
            changed += 1
    return changed


def build_theia_model(cfg: TheiaModelConfig, n_ops: int = 5) -> nn.Module:
    if cfg.arch == "theia":
        scale = 1 / 20 if cfg.number_scale is None else cfg.number_scale
        model = Theia(cfg.d_model, cfg.num_hidden, n_ops, scale, cfg.dropout)
    else:
        scale = 1.0 if cfg.number_scale is None else cfg.number_scale
        if cfg.arch == "theia_step":
            model = TheiaStep(cfg.d_model, n_ops, scale)
        elif cfg.arch == "flat_mlp":
            model = FlatMLP(cfg.d_model, cfg.flat_hidden, n_ops, scale)
        else:
            model = TheiaTransformer(cfg.tf_d_model, cfg.tf_heads, cfg.tf_layers, cfg.tf_d_mlp, n_ops)
    if cfg.number_init == "tiled":  # the transformer embeds numbers as tokens: nothing to tile
        tile_number_encoders(model, scale, cfg.tile_slope)
    return model


def predict(model: nn.Module, x: torch.Tensor, batch: int = 8192) -> torch.Tensor:
    """Class predictions (B,) of any model here, in batches, in eval mode."""
    was = model.training
    model.eval()
    with torch.no_grad():
        out = torch.cat([model.predict(x[i:i + batch]) for i in range(0, len(x), batch)]) if len(x) else \
            torch.zeros(0, dtype=torch.long)
    model.train(was)
    return out
