"""The looped circuit transformer (Ito et al., "Universal Transformers for Circuit Computations").

One weight-shared block reduces every deepest parenthesised span of a fully parenthesised
expression per iteration (spec: ``shared/papers/seed003-details.md`` Sec. 3). The state X is
(B, T, D) with D = vocabulary size: tokens are one-hot rows and BLANK is the zero row. With
L the lower-triangular ones matrix, one iteration t computes

    A1 = (L X G_PE) 1,  A2 = -(L^T X G_PE) 1,  A = [A1, A2]                     hook_depth  (B, T, 2)
    P_i = 1[max_j A_ij = max_{i'j'} A_i'j']      (hardmax over the deepest spans) hook_mask   (B, T)
    id  = P * cumsum(1[P_i - P_{i-1} > 0])       (one id per contiguous span)     hook_cluster (B, T)
    H_i = q_i (sum_{j in C(i)} k_j x_j^T),  q = X W_Q, k = X W_K, W_V = I         hook_attn   (B, T, D)
    Y   = 1[max z > 0] onehot(argmax z), z = MLP(H)  (gated normalisation)     hook_mlp    (B, T, D)
    X^{t+1} = (1 - P) X^t + P Y                                          (gated residual)

and the loop halts when A = 0 (no parentheses remain): exactly d iterations for depth d, O(n)
each. The readout max-pools each of the D dimensions over positions.

Learnable parameters (the paper's counts 280 / 924 / 4416): G_PE as D logits, ternarised at
+-``pe_threshold`` in the forward pass with an identity gradient; W_Q and W_K (D x d_head) as
logits, binarised by ``sigmoid > 0.5`` with the sigmoid's gradient; the MLP D -> h -> D with
biases, quadratic (h = 2D) or ReLU (h = 8D) hidden units. The gated normalisation thresholds the
MLP output to {0, 1}: the one-hot of the largest logit, gated off (zero vector) when no logit is
positive; backward it takes the gradient of ``sigmoid(z)`` or of ``softmax(z) sigmoid(max z)``
(``norm_surrogate``). A per-dimension
threshold 1[z > 0] cannot be exact for arithmetic: no quadratic function of the bag of tokens
separates "result 0" (or 6) from the rest for + and * together (an LP shows it infeasible), while
the argmax form is feasible at the paper's width 28.

The routing's gradient (``routing_grad``): ``"weights"`` binarizes W_Q and W_K each with a
sigmoid straight-through estimator, so the gradient reaching one of them is computed with the
other's hard {0, 1} values (a routing whose hard keys are all off inside a span passes no gradient
to its queries, and the other way round); ``"soft"`` keeps that forward and takes the backward of
the whole attention with sigmoid(W_Q), sigmoid(W_K) in place of both (H's straight-through estimator),
so an operator whose hard query or keys are off still receives a gradient. The paper says only
that "gradients pass through the sigmoid"; ``"weights"`` is tinyscope's earlier reading.

The hardmax mask has a straight-through gradient too: forward ``P``, backward through
``exp((a_i - max a) / mask_temperature)`` with ``a_i = max_j A_ij`` (the paper does not say
which surrogate it used; see docs/circuit.md).

Three paths must agree (tests/studies/circuits/test_model.py): :meth:`CircuitTransformer.attend`
(``use_fast``) sums k x^T per cluster with a scatter (O(T)); :meth:`CircuitTransformer.attend_reference`
builds the dense (T, T) same-cluster score matrix; and inference on token ids takes
:meth:`CircuitTransformer._run_sparse`, which keeps the state as ids and runs attention and MLP
only on the masked non-BLANK rows.

Input checks (once per call, before the first iteration): ``forward``, ``run``, ``predict``,
``embed`` (hence ``run_with_cache`` / ``run_with_hooks``) take integer ids (B, T), T >= 1, in
[0, D] (D is BLANK); ``step`` and ``run(x=...)`` a float state (B, T, D). Anything else raises
:class:`~tinyscope.errors.InputError` naming the argument (:mod:`tinyscope.models.inputs`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.errors import InputError, check, check_choice
from tinyscope.models.hooks import ActivationCache, HookedModule, HookPoint, _matcher
from tinyscope.models.inputs import check_tokens

GRAMMAR_SHAPES = {  # grammar -> (D, d_head, activation); d_head = 1 operand dim + 1 per operator
    "boolean": (7, 4, "quadratic"),
    "arithmetic": (14, 3, "quadratic"),
    "listops": (16, 5, "relu"),
    "listops-lra": (16, 5, "relu"),
}
# Backward surrogate of the gated normalisation that trains reliably per grammar (docs/circuit.md):
# Boolean's per-dimension lookup is separable and learns with sigmoid; arithmetic's is not (only
# the argmax form is exact) and learns with the softmax surrogate.
NORM_SURROGATE = {"boolean": "sigmoid", "arithmetic": "softmax", "listops": "softmax", "listops-lra": "softmax"}


@dataclass
class CircuitConfig:
    """Shape of the circuit block. ``None`` widths take the paper's value for ``grammar``."""

    grammar: str = "boolean"
    d_head: int | None = None
    d_hidden: int | None = None               # None: 2D (quadratic) or 8D (relu)
    act: Literal["quadratic", "relu"] | None = None
    pe_threshold: float = 0.5                 # G_PE ternarisation threshold
    mask_temperature: float = 1.0             # straight-through surrogate of the hardmax mask
    norm_surrogate: Literal["sigmoid", "softmax"] | None = None  # backward of the gated normalisation;
                                                                  # None = NORM_SURROGATE[grammar]
    init_std: float = 0.1                     # "small and random": starts near the thresholds
    mlp_init: Literal["small", "torch"] = "small"  # small: N(0, init_std) weights and zero biases;
                                                    # torch: nn.Linear's own uniform(+-1/sqrt(fan_in))
    routing_grad: Literal["weights", "soft"] = "weights"  # backward of the binarized W_Q, W_K (module doc)
    max_iterations: int = 0                   # safety cap on the loop; 0 = sequence length

    def __post_init__(self):
        check_choice("model.grammar", self.grammar, tuple(GRAMMAR_SHAPES))
        D, dh, act = GRAMMAR_SHAPES[self.grammar]
        if self.d_head is None:
            self.d_head = dh
        if self.act is None:
            self.act = act
        check_choice("model.act", self.act, ("quadratic", "relu"))
        if self.d_hidden is None:
            self.d_hidden = (2 if self.act == "quadratic" else 8) * D
        check(self.d_head >= 1, f"model.d_head={self.d_head} must be >= 1")
        check(self.d_hidden >= 1, f"model.d_hidden={self.d_hidden} must be >= 1")
        check(self.pe_threshold > 0, f"model.pe_threshold={self.pe_threshold} must be > 0")
        check(self.mask_temperature > 0, f"model.mask_temperature={self.mask_temperature} must be > 0")
        if self.norm_surrogate is None:
            self.norm_surrogate = NORM_SURROGATE[self.grammar]
        check_choice("model.norm_surrogate", self.norm_surrogate, ("sigmoid", "softmax"))
        check(self.init_std >= 0, f"model.init_std={self.init_std} must be >= 0")
        check_choice("model.mlp_init", self.mlp_init, ("small", "torch"))
        check_choice("model.routing_grad", self.routing_grad, ("weights", "soft"))
        check(self.max_iterations >= 0, f"model.max_iterations={self.max_iterations} must be >= 0")

    @property
    def D(self) -> int:
        return GRAMMAR_SHAPES[self.grammar][0]


# ---------------------------------------------------------------- straight-through estimators
def _straight_through(hard: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
    """Forward ``hard``; backward the gradient of ``soft`` (only when autograd is recording)."""
    return hard + (soft - soft.detach()) if torch.is_grad_enabled() and soft.requires_grad else hard


def ternarize(logits: torch.Tensor, threshold: float = 0.5) -> torch.Tensor:
    """-1 below -threshold, +1 above +threshold, else 0; identity gradient."""
    hard = (logits > threshold).to(logits.dtype) - (logits < -threshold).to(logits.dtype)
    return _straight_through(hard, logits)


def binarize(logits: torch.Tensor) -> torch.Tensor:
    """1[sigmoid(logits) > 0.5]; gradient of the sigmoid."""
    soft = torch.sigmoid(logits)
    return _straight_through((soft > 0.5).to(logits.dtype), soft)


def gated_argmax(logits: torch.Tensor) -> torch.Tensor:
    """Gated normalisation, forward: one-hot of argmax_d z_d where max_d z_d > 0, else the zero vector."""
    top = logits.max(-1, keepdim=True)  # (..., 1)
    hot = torch.zeros_like(logits).scatter_(-1, top.indices, 1.0)  # (..., D)
    return hot * (top.values > 0).to(logits.dtype)  # (..., D)


@dataclass
class StepOutput:
    """One iteration: the next state (hard forward, straight-through backward) and its soft
    counterpart ``(1 - P) X + P sigmoid(MLP(H))`` used by the training loss."""

    state: torch.Tensor     # (B, T, D)
    soft: torch.Tensor      # (B, T, D)
    depth: torch.Tensor     # (B, T, 2)  A
    attn: torch.Tensor      # (B, T, D)  H
    mlp_soft: torch.Tensor  # (B, T, D)  sigmoid surrogate of the gated normalisation


@dataclass
class RunOutput:
    readout: torch.Tensor      # (B, D) max-pooled final state
    state: torch.Tensor        # (B, T, D) final state
    iterations: torch.Tensor   # (B,) iterations each example ran before halting
    halted: torch.Tensor       # (B,) bool: halted by the criterion (not by the cap)


class CircuitTransformer(HookedModule):
    """The one-layer looped block; ``forward(tokens) -> (B, D)`` readout of the final state."""

    def __init__(self, cfg: CircuitConfig):
        super().__init__()
        self.cfg = cfg
        D, dh, h = cfg.D, cfg.d_head, cfg.d_hidden
        self.g_pe = nn.Parameter(torch.randn(D) * cfg.init_std)            # (D,)
        self.w_q = nn.Parameter(torch.randn(D, dh) * cfg.init_std)         # (D, dh)
        self.w_k = nn.Parameter(torch.randn(D, dh) * cfg.init_std)         # (D, dh)
        self.mlp_in = nn.Linear(D, h)
        self.mlp_out = nn.Linear(h, D)
        if cfg.mlp_init == "small":
            with torch.no_grad():
                for lin in (self.mlp_in, self.mlp_out):
                    lin.weight.normal_(0.0, cfg.init_std)
                    lin.bias.zero_()
        self.hook_depth, self.hook_mask, self.hook_cluster = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn, self.hook_mlp = HookPoint(), HookPoint()
        self.use_fast = True
        self.setup_hooks()

    # ------------------------------------------------------------ discrete views of the weights
    def pe_values(self) -> torch.Tensor:
        """G_PE's diagonal as used in the forward pass, in {-1, 0, 1}. (D,)"""
        return ternarize(self.g_pe, self.cfg.pe_threshold)

    def qk_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W_Q, W_K as used in the forward pass, in {0, 1}. (D, dh) each"""
        return binarize(self.w_q), binarize(self.w_k)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """One-hot rows; id D (BLANK) is the zero vector. (B, T) -> (B, T, D)"""
        D = self.cfg.D
        return F.one_hot(self._check_ids(tokens).long(), D + 1)[..., :D].to(self.g_pe.dtype)

    # ------------------------------------------------------------ stages
    def depth_encoding(self, x: torch.Tensor) -> torch.Tensor:
        """A = [A1, A2]: signed parenthesis counts forward and backward. (B, T, D) -> (B, T, 2)"""
        s = x @ self.pe_values()  # (B, T)   X G_PE 1
        a1 = s.cumsum(1)  # (B, T)
        a2 = -s.flip(1).cumsum(1).flip(1)  # (B, T)
        return torch.stack([a1, a2], dim=-1)  # (B, T, 2)

    def reduction_mask(self, A: torch.Tensor) -> torch.Tensor:
        """P_i = 1[max_j A_ij = max A]: every token of the deepest spans. (B, T, 2) -> (B, T)"""
        a = A.max(-1).values  # (B, T)
        top = a.max(-1, keepdim=True).values  # (B, 1)
        hard = (a == top).to(A.dtype)  # (B, T)
        if not (torch.is_grad_enabled() and A.requires_grad):
            return hard
        return _straight_through(hard, torch.exp((a - top) / self.cfg.mask_temperature))

    @staticmethod
    def cluster_ids(P: torch.Tensor) -> torch.Tensor:
        """id = P * cumsum(1[P_i - P_{i-1} > 0]): spans numbered 1..k, unmasked positions 0. (B, T) long"""
        m = (P > 0.5).long()  # (B, T)
        starts = (m - F.pad(m, (1, 0))[:, :-1]) > 0  # (B, T)
        return starts.long().cumsum(1) * m  # (B, T)

    def attend(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Per-cluster linear attention H_i = q_i S_{id_i} with the binarized W_Q, W_K; its backward
        as ``routing_grad`` says (module doc). (B, T, D)"""
        path = self._attend_scatter if self.use_fast else self._attend_dense
        if self.cfg.routing_grad == "weights" or not torch.is_grad_enabled():
            return path(x, ids, *self.qk_values())
        hard = path(x, ids, *(w.detach() for w in self.qk_values()))  # (B, T, D)
        return _straight_through(hard, path(x, ids, torch.sigmoid(self.w_q), torch.sigmoid(self.w_k)))

    def attend_reference(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Per-cluster linear attention, plain: dense (T, T) scores q_i.k_j on same-cluster pairs. (B, T, D)"""
        return self._attend_dense(x, ids, *self.qk_values())

    @staticmethod
    def _attend_scatter(x: torch.Tensor, ids: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor) -> torch.Tensor:
        """Fast: H_i = q_i S_{id_i}, S_c = sum_{j in c} k_j x_j^T, with a scatter (O(T)). (B, T, D)"""
        inside = (ids > 0).unsqueeze(-1).to(x.dtype)  # (B, T, 1)
        xc = x * inside  # (B, T, D)
        q, k = xc @ wq, xc @ wk  # (B, T, dh)
        B, T, D = x.shape
        C = int(ids.max()) + 1 if ids.numel() else 1
        kx = (k.unsqueeze(-1) * xc.unsqueeze(-2)).flatten(2)  # (B, T, dh*D)
        S = x.new_zeros(B, C, kx.shape[-1]).scatter_add_(1, ids.unsqueeze(-1).expand_as(kx), kx)  # (B, C, dh*D)
        S = S.gather(1, ids.unsqueeze(-1).expand_as(kx)).view(B, T, -1, D)  # (B, T, dh, D)
        return torch.einsum("btd,btdv->btv", q, S) * inside  # (B, T, D)

    @staticmethod
    def _attend_dense(x: torch.Tensor, ids: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor) -> torch.Tensor:
        """Plain: dense (T, T) scores q_i.k_j on same-cluster pairs, no softmax. (B, T, D)"""
        q, k = x @ wq, x @ wk  # (B, T, dh)
        same = (ids.unsqueeze(2) == ids.unsqueeze(1)) & (ids > 0).unsqueeze(2)  # (B, T, T)
        scores = torch.einsum("bid,bjd->bij", q, k) * same  # (B, T, T), no softmax
        return scores @ x  # (B, T, D)

    def mlp_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The lookup MLP's output logits. (..., D) -> (..., D)"""
        z = self.mlp_in(h)  # (..., hidden)
        z = z * z if self.cfg.act == "quadratic" else torch.relu(z)
        return self.mlp_out(z)  # (..., D)

    def normalise_soft(self, logits: torch.Tensor) -> torch.Tensor:
        """The continuous surrogate of the gated normalisation (its gradient is the one used)."""
        if self.cfg.norm_surrogate == "sigmoid":
            return torch.sigmoid(logits)  # (..., D)
        return torch.softmax(logits, -1) * torch.sigmoid(logits.max(-1, keepdim=True).values)  # (..., D)

    # ------------------------------------------------------------ one iteration
    def step(self, x: torch.Tensor, A: torch.Tensor | None = None) -> StepOutput:
        """One reduction iteration on the state ``x`` (B, T, D), dense over all positions."""
        return self._step(self._check_state(x), A)

    def _step(self, x: torch.Tensor, A: torch.Tensor | None = None) -> StepOutput:
        A = self.hook_depth(self.depth_encoding(x) if A is None else A)  # (B, T, 2)
        P = self.hook_mask(self.reduction_mask(A))  # (B, T)
        ids = self.hook_cluster(self.cluster_ids(P))  # (B, T)
        H = self.hook_attn(self.attend(x, ids))  # (B, T, D)
        logits = self.mlp_logits(H)  # (B, T, D)
        y_soft = self.normalise_soft(logits)  # (B, T, D)
        Y = self.hook_mlp(_straight_through(gated_argmax(logits), y_soft))  # (B, T, D)
        Pd = P.unsqueeze(-1)  # (B, T, 1)
        return StepOutput(state=(1 - Pd) * x + Pd * Y, soft=(1 - Pd) * x + Pd * y_soft, depth=A, attn=H,
                          mlp_soft=y_soft)

    # ------------------------------------------------------------ the loop
    def run(self, tokens: torch.Tensor | None = None, x: torch.Tensor | None = None,
            max_iterations: int | None = None) -> RunOutput:
        """Iterate until A = 0 (no parentheses) in every example, or the cap.

        The halting test is ``A != 0`` somewhere (the paper's sum A = 0: with the learned or
        constructed G_PE both say "no parentheses remain"). Given token ids, without autograd and
        without hooks on the attention or MLP, the loop takes the sparse path :meth:`_run_sparse`.
        """
        if (tokens is None) == (x is None):
            raise InputError("run takes exactly one of tokens= (ids (B, T)) and x= (a state (B, T, D))")
        if x is not None:
            self._check_state(x)
        if x is None and self.use_fast and not torch.is_grad_enabled() \
                and not (self.hook_attn.has_hooks or self.hook_mlp.has_hooks):
            return self._run_sparse(self._check_ids(tokens), max_iterations)
        if x is None:
            x = self.embed(tokens)  # (B, T, D)
        B, T, _ = x.shape
        cap = max_iterations or self.cfg.max_iterations or T
        iterations = torch.zeros(B, dtype=torch.long, device=x.device)
        for it in range(cap + 1):
            A = self.depth_encoding(x)  # (B, T, 2)
            active = A.detach().abs().sum(dim=(1, 2)) > 0  # (B,)
            if it == cap or not bool(active.any()):
                break
            gate = active.view(B, 1, 1).to(x.dtype)
            x = gate * self._step(x, A).state + (1 - gate) * x  # (B, T, D)
            iterations = iterations + active.long()
        return RunOutput(readout=x.max(dim=1).values, state=x, iterations=iterations, halted=~active)

    @torch.no_grad()
    def _run_sparse(self, tokens: torch.Tensor, max_iterations: int | None = None) -> RunOutput:
        """The inference fast path: the state kept as token ids (every row of a hard state is a
        one-hot or the zero vector = BLANK), attention and MLP only on the N masked non-BLANK rows.

        Per iteration: O(T) scalar work for A, P and the cluster ids, and O(N) for the per-cluster
        sums ``S_c[v] = sum_j k_j 1[tok_j = v]`` (an ``index_put`` with accumulation), H and the
        MLP. Masked BLANK rows have H = 0 and become ``gated_argmax(MLP(0))`` (BLANK for a working
        model). Equal to the dense loop (tests/studies/circuits/test_model.py).
        """
        D = self.cfg.D
        state = tokens.long().clone()  # (B, T) ids; D = BLANK
        B, T = state.shape
        cap = max_iterations or self.cfg.max_iterations or T
        pe = torch.cat([self.pe_values(), self.g_pe.new_zeros(1)])  # (D+1,)
        wq, wk = (torch.cat([w, w.new_zeros(1, w.shape[1])]) for w in self.qk_values())  # (D+1, dh)
        y0 = gated_argmax(self.mlp_logits(pe.new_zeros(D)))  # (D,)
        blank_to = int(y0.argmax()) if bool(y0.any()) else D
        iterations = torch.zeros(B, dtype=torch.long, device=state.device)
        for it in range(cap + 1):
            s = pe[state]  # (B, T)  X G_PE 1
            a1 = s.cumsum(1)  # (B, T)
            a2 = a1 - s - s.sum(1, keepdim=True)  # (B, T)  -(suffix sum from i)
            A = self.hook_depth(torch.stack([a1, a2], dim=-1))  # (B, T, 2)
            active = (A != 0).flatten(1).any(1)  # (B,)
            if it == cap or not bool(active.any()):
                break
            P = self.hook_mask(self.reduction_mask(A))  # (B, T)
            ids = self.hook_cluster(self.cluster_ids(P))  # (B, T)
            masked = (ids > 0) & active.unsqueeze(1)  # (B, T)
            filled = state != D  # (B, T)
            if blank_to != D:
                state[masked & ~filled] = blank_to
            b_idx, t_idx = (masked & filled).nonzero(as_tuple=True)  # (N,), (N,)
            if b_idx.numel():
                tok = state[b_idx, t_idx]  # (N,)
                C = int(ids.max()) + 1
                gid = b_idx * C + ids[b_idx, t_idx]  # (N,) cluster ids unique over the batch
                S = pe.new_zeros(B * C, D + 1, wk.shape[1]).index_put_((gid, tok), wk[tok], accumulate=True)
                H = torch.einsum("nvd,nd->nv", S[gid, :D], wq[tok])  # (N, D)
                top = self.mlp_logits(H).max(-1)  # (N,)
                state[b_idx, t_idx] = torch.where(top.values > 0, top.indices, torch.full_like(top.indices, D))
            iterations = iterations + active.long()
        x = F.one_hot(state, D + 1)[..., :D].to(pe.dtype)  # (B, T, D)
        return RunOutput(readout=x.max(dim=1).values, state=x, iterations=iterations, halted=~active)

    def _check_ids(self, tokens: torch.Tensor) -> torch.Tensor:
        """Raise :class:`~tinyscope.errors.InputError` unless ``tokens`` is an integer (B, T) tensor,
        T >= 1, with ids in [0, D] (D is BLANK) on the model's device; returns it."""
        D = self.cfg.D
        return check_tokens(tokens, vocab_size=D + 1, range_note=f"the {self.cfg.grammar} vocabulary; id {D} is BLANK",
                            device=self.g_pe.device)

    def _check_state(self, x: torch.Tensor, name: str = "x") -> torch.Tensor:
        """Raise :class:`~tinyscope.errors.InputError` unless ``x`` is a float state (B, T, D), T >= 1."""
        D = self.cfg.D
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            what = f"dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise InputError(f"{name} must be a float state tensor (batch, positions, {D}), got {what}; "
                             f"pass token ids as tokens= instead")
        if x.dim() != 3 or x.shape[2] != D or x.shape[1] == 0:
            raise InputError(f"{name} has shape {tuple(x.shape)}; a state is (batch, positions >= 1, {D}) "
                             f"for the {self.cfg.grammar} grammar")
        return x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, D) max-pooled final state (the answer's one-hot)."""
        return self.run(tokens).readout

    def predict(self, tokens: torch.Tensor, n_literals: int) -> torch.Tensor:
        """Literal index of the answer (argmax over the literal dims 2..2+n_literals). (B,)"""
        return self.run(tokens).readout[:, 2:2 + n_literals].argmax(-1)

    # ------------------------------------------------------------ caching across iterations
    def run_with_cache(self, *args, names_filter=None, detach: bool = True, **kwargs):
        """Like :meth:`HookedModule.run_with_cache`, but a hook that fires on every iteration is
        cached with a leading iteration axis: ``cache["hook_mask"]`` is (I, B, T)."""
        match = _matcher(names_filter)
        store: dict[str, list[torch.Tensor]] = {}

        def save(t: torch.Tensor, hook: HookPoint):
            store.setdefault(hook.name, []).append(t.detach() if detach else t)

        with self.hooks([(n, save) for n in self.hook_dict if match(n)]):
            out = self(*args, **kwargs)
        return out, ActivationCache({k: torch.stack(v) for k, v in store.items()})
