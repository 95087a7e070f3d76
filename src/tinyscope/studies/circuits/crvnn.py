"""Continuous Recursive Neural Network (CRvNN; Ray Chowdhury & Caragea, ICML 2021), the ListOps
baseline of the circuit paper (Ito et al., Table 2 text: 521,611 parameters).

A sequence of n token states h_1..h_n (framed by learned START and END states) is reduced by
soft compositions. Each position i carries an *existence* probability a_i (1 at the start).
One iteration t:

* neighbours: the soft right neighbour of i puts weight
  R_ij = min(a_j, relu(1 - sum_{i<k<j} a_k)) on each j > i (the first unit of existence mass to
  the right); the left neighbour L mirrors it (paper Sec. 3, "neighbour retrieval");
* decision: a score s_i = w . gelu(W [L^2 h, L h, h, R h, R^2 h, m_i] + b) over a window of
  five neighbours plus a 64-dim "recurrent momentum" feature m_i (a learned mix of two vectors
  by the probability that i's left neighbour composed in the previous iteration); the
  composition probability is p_i = e^{s_i} / (e^{s_i} + 1 + (L e^s)_i + (R e^s)_i), i.e. it
  competes with "no-op" (score 0) and the two neighbours' scores (modulation). START, END and
  the last token never compose;
* composition: the left neighbour folds into i with probability q_i = (L p)_i:
  h_i <- q_i cell(L h, h)_i + (1 - q_i) h_i, and a_i <- a_i (1 - p_i);
* cell: [f1, f2, g, u] = W2 gelu(W1 [c1; c2] + b1) + b2, parent = LN(s(f1) c1 + s(f2) c2 + s(g) u);
* halting: stop once at most one token has a_i > ``stop_threshold``, or after n iterations (the
  authors cap the batch at its longest n, so a shorter sequence could get n + 1; here each
  sequence gets its own n, which keeps its result independent of the batch); the last token's
  state is the sentence vector, classified by one linear layer.

The entropy penalty -log(a_last / sum_i a_i), added with weight ``entropy_gamma`` for sequences
that did not end with the last token alone active, pushes the recursion to finish.
Hyperparameter defaults are those of the authors' ListOps config (see docs/circuits.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from tinyscope.errors import ConfigError

EPS = 1e-8


@dataclass
class CRvNNConfig:
    vocab_size: int = 16          # the circuit paper's ListOps symbols ( ) 0-9 MAX MIN SM MED
    n_classes: int = 10
    embed_dim: int = 128          # authors' ListOps config: embd_dim
    hidden: int = 128             # hidden_size
    cell_hidden: int = 512        # cell_hidden_size (4 x hidden)
    momentum_dim: int = 64        # small_d, the recurrent-momentum feature
    window: int = 5               # window_size of the decision function
    stop_threshold: float = 0.01  # a_i above this counts as still existing (halting)
    entropy_gamma: float = 0.01
    in_dropout: float = 0.3
    hidden_dropout: float = 0.1
    out_dropout: float = 0.2

    def __post_init__(self):
        for name in ("vocab_size", "n_classes", "embed_dim", "hidden", "cell_hidden", "momentum_dim"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be >= 1")
        if self.window < 3 or self.window % 2 == 0:
            raise ConfigError(f"model.window={self.window} must be an odd number >= 3")
        if not 0 < self.stop_threshold < 1:
            raise ConfigError(f"model.stop_threshold={self.stop_threshold} must lie in (0, 1)")
        if self.entropy_gamma < 0:
            raise ConfigError(f"model.entropy_gamma={self.entropy_gamma} must be >= 0")
        for name in ("in_dropout", "hidden_dropout", "out_dropout"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must lie in [0, 1)")


class CRvNNOutput(NamedTuple):
    logits: torch.Tensor      # (B, C)
    penalty: torch.Tensor     # (B,) entropy penalty (0 for sequences that ended properly)
    iterations: torch.Tensor  # (B,) iterations before each sequence halted
    states: torch.Tensor      # (B, n, H) final token states (START and END removed)
    existence: torch.Tensor   # (B, n) final existence probabilities a_i


def _linear(fan_in: int, fan_out: int) -> nn.Linear:
    layer = nn.Linear(fan_in, fan_out)
    nn.init.xavier_uniform_(layer.weight)  # the authors' glorot-uniform init, zero bias
    nn.init.zeros_(layer.bias)
    return layer


def right_neighbours(a: torch.Tensor) -> torch.Tensor:
    """R[b, i, j] = min(a_j, relu(1 - sum_{i<k<j} a_k)) for j > i, else 0.  a: (B, S) -> (B, S, S)."""
    S = a.shape[1]
    w = torch.triu(a[:, None, :].expand(-1, S, -1), diagonal=1)  # (B, S, S)
    before = w.cumsum(-1) - w  # existence mass strictly between i and j
    return torch.minimum(w, F.relu(1 - before))


def left_neighbours(a: torch.Tensor) -> torch.Tensor:
    """The mirror of :func:`right_neighbours`: weights on j < i, nearest first."""
    return right_neighbours(a.flip(1)).flip(1, 2)


class CRvNN(nn.Module):
    """Token ids (B, n) and a mask (B, n) -> class logits via soft recursive composition."""

    def __init__(self, cfg: CRvNNConfig):
        super().__init__()
        self.cfg = cfg
        H = cfg.hidden
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.embed_dim)
        self.word = _linear(cfg.embed_dim, H)              # word-dim transform before the encoder
        self.start = nn.Parameter(torch.randn(H))
        self.end = nn.Parameter(torch.randn(H))
        self.moved = nn.Parameter(torch.randn(cfg.momentum_dim))      # left neighbour composed last time
        self.stayed = nn.Parameter(torch.randn(cfg.momentum_dim))     # ... did not
        self.window_layer = _linear(cfg.window * H + cfg.momentum_dim, H)
        self.scorer = _linear(H, 1)
        self.initial = _linear(H, H)
        self.cell1 = _linear(2 * H, cfg.cell_hidden)
        self.cell2 = _linear(cfg.cell_hidden, 4 * H)
        self.norm = nn.LayerNorm(H)
        self.classifier = _linear(H, cfg.n_classes)

    # ------------------------------------------------------------ parts
    def cell(self, c1: torch.Tensor, c2: torch.Tensor) -> torch.Tensor:
        """parent = LN(s(f1) c1 + s(f2) c2 + s(g) u), [f1, f2, g, u] = W2 gelu(W1 [c1; c2])."""
        z = F.gelu(self.cell1(torch.cat([c1, c2], -1)), approximate="tanh")  # (..., cell_hidden)
        z = F.dropout(z, self.cfg.hidden_dropout, self.training)
        f1, f2, g, u = self.cell2(z).chunk(4, -1)  # each (..., H)
        return self.norm(torch.sigmoid(f1) * c1 + torch.sigmoid(f2) * c2 + torch.sigmoid(g) * u)

    def leaves(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Initial token states LN(W word(embed(x))), zero at padding.  (B, n) -> (B, n, H)."""
        x = self.word(self.embedding(tokens)) * mask[..., None]  # (B, n, H)
        x = F.dropout(x, self.cfg.in_dropout, self.training)
        return self.norm(self.initial(x)) * mask[..., None]

    def _frame(self, h: torch.Tensor, mask: torch.Tensor):
        """Prepend START and put END right after each sequence's last token: (B, n+2, H) states,
        the (B, n+2) validity mask and the one-hot of END's and the last token's positions."""
        B, n, H = h.shape
        lengths = mask.sum(1)  # (B,)
        pos = torch.arange(n + 2, device=h.device)[None]  # (1, S)
        end = (pos == lengths[:, None] + 1).to(h.dtype)  # (B, S)
        last = (pos == lengths[:, None]).to(h.dtype)  # (B, S)
        valid = (pos <= lengths[:, None] + 1).to(h.dtype)  # (B, S)
        x = torch.cat([self.start.expand(B, 1, H), h, h.new_zeros(B, 1, H)], 1)  # (B, S, H)
        x = x * (1 - end[..., None]) + end[..., None] * self.end
        return x, valid, end, last

    # ------------------------------------------------------------ the recursion
    def forward(self, tokens: torch.Tensor, mask: torch.Tensor,
                transitions: Sequence[torch.Tensor] | None = None) -> CRvNNOutput:
        """``transitions``, when given, replaces the learned decisions: entry t is the (B, n)
        composition probability p of iteration t (the recursion then runs len(transitions)
        iterations); with 0/1 entries it applies a hard composition schedule."""
        cfg = self.cfg
        mask = mask.to(torch.float32)
        h = self.leaves(tokens, mask)  # (B, n, H)
        x, valid, end, last = self._frame(h, mask)  # (B, S, H), (B, S) x3
        B, S, H = x.shape
        start = torch.zeros_like(valid)
        start[:, 0] = 1
        can_compose = valid * (1 - start) * (1 - end) * (1 - last)  # (B, S)
        n_tokens = mask.sum(1)  # (B,)
        a = valid.clone()  # existence
        q_prev = torch.zeros_like(valid)  # (B, S) probability that the left neighbour composed
        running = torch.ones(B, dtype=torch.bool, device=x.device)
        improper = torch.ones_like(n_tokens)
        iterations = torch.zeros_like(n_tokens)
        n_iter = len(transitions) if transitions is not None else S - 2
        half = cfg.window // 2
        for t in range(n_iter):
            L, R = left_neighbours(a * valid), right_neighbours(a * valid)  # (B, S, S)
            lefts, rights, cur_l, cur_r = [], [], x, x
            for _ in range(half):
                cur_l, cur_r = L @ cur_l, R @ cur_r  # (B, S, H)
                lefts.insert(0, cur_l)
                rights.append(cur_r)
            if transitions is None:
                mom = q_prev[..., None] * self.moved + (1 - q_prev[..., None]) * self.stayed  # (B, S, m)
                feats = torch.cat(lefts + [x] + rights + [mom], -1)  # (B, S, W*H + m)
                s = self.scorer(F.gelu(self.window_layer(feats), approximate="tanh")).squeeze(-1)  # (B, S)
                shift = torch.maximum(s.max(), s.new_zeros(()))
                e = torch.exp(s - shift) * can_compose  # (B, S)
                noop = torch.exp(-shift)
                l_e = (L @ e[..., None]).squeeze(-1)
                r_e = (R @ e[..., None]).squeeze(-1)
                p = e / (e + noop + l_e + r_e + EPS)  # (B, S)
            else:
                p = F.pad(transitions[t].to(x.dtype), (1, 1))  # START and END never compose
            p = p * can_compose
            q = (L @ p[..., None]).squeeze(-1) * valid * (1 - start) * (1 - end)  # (B, S)
            composed = self.cell(lefts[-1], x)  # (B, S, H)
            new_x = (q[..., None] * composed + (1 - q[..., None]) * x) * valid[..., None]
            new_a = a * (1 - p) * valid
            keep = running[:, None]
            x = torch.where(keep[..., None], new_x, x)
            a = torch.where(keep, new_a, a)
            q_prev = q
            iterations = iterations + running.to(iterations.dtype)
            alive = (a > cfg.stop_threshold).to(a.dtype)  # (B, S)
            remaining = alive.sum(1) - 2  # START and END always exist
            improper = improper * ~((remaining == 1) & ((alive * last).sum(1) == 1))
            running = running & (remaining > 1) & (n_tokens > t + 1)  # at most n iterations
            if transitions is None and not bool(running.any()):
                break
        states = x[:, 1:-1] * mask[..., None]  # (B, n, H)
        exist = a[:, 1:-1] * mask  # (B, n)
        last_n = last[:, 1:-1]  # (B, n)
        sentence = (states * last_n[..., None]).sum(1)  # (B, H)
        share = (exist * last_n).sum(1) / (exist.sum(1) + EPS)
        penalty = -torch.log(share + EPS) * improper.to(share.dtype)  # (B,)
        logits = self.classifier(F.dropout(sentence, cfg.out_dropout, self.training))  # (B, C)
        return CRvNNOutput(logits, penalty, iterations, states, exist)


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

