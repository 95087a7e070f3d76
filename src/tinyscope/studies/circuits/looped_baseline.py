"""The looped softmax baseline trained as a looped transformer (Fan et al. 2025), Table 2.

Ito et al. compare their circuit block with "a looped weight-shared transformer (Fan et al.)"
with learned, RoPE or FIRE positions, trained on the same data and curriculum and given the
true depth at test time. Fan et al.'s looped transformer keeps its state in the residual stream
and re-injects the input embedding at every iteration::

    e   = Embed(tokens) (+ learned positions)          (B, T, d_model)
    h_0 = 0,   h_t = Block(h_{t-1} + e),   t = 1 .. n   (one weight-shared block)
    logits_n = Unembed(LN_f(h_n))                        (B, T, vocab)

and is trained end to end on the output after n iterations. For an expression of depth d the
baseline runs n = d iterations and its target is the *fully reduced* state: the answer literal
at the root operator's position and BLANK at every other token (:func:`final_targets`; the
plain reference is :func:`~tinyscope.studies.circuits.reduction.reduce_once` applied until no
parentheses remain). The answer is read as for the token loop: the literal with the largest
logit anywhere in the last pass.

``loop = "tokens"`` keeps tinyscope's earlier reading (trained on the one-step reduction, looped
at test time on its own argmax tokens); a block so trained never sees BLANK inside an
expression and answers at about chance from depth 2 on (docs/results/circuits.md).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.models.transformer import Transformer
from tinyscope.studies.circuits.grammar import CLOSE, OPEN, Grammar
from tinyscope.studies.circuits.reduction import reduce_once

LOOPS = ("hidden", "tokens")

Parts = tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor],
              Callable[[torch.Tensor], torch.Tensor]]


def loop_parts(model) -> Parts:
    """(embed, block, head) of a one-block baseline: the foundation ``Transformer`` (learned
    positions) or :class:`~tinyscope.studies.circuits.relative_baseline.RelativeLoopedBlock`."""
    if isinstance(model, Transformer):
        block = model.blocks[0]
        return (lambda tokens: model.embed(tokens), lambda x: block(x),
                lambda x: model.W_U(model.ln_final(x)))
    return model.embed_tokens, model.block, model.head


def loop_logits(model, tokens: torch.Tensor, n: int) -> list[torch.Tensor]:
    """Logits after each of ``n`` input-injected iterations: [(B, T, vocab)] * n."""
    embed, block, head = loop_parts(model)
    e = embed(tokens)  # (B, T, D)
    h = torch.zeros_like(e)  # (B, T, D)
    out = []
    for _ in range(n):
        h = block(h + e)  # (B, T, D)
        out.append(head(h))  # (B, T, vocab)
    return out


def logits_at_depth(model, tokens: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
    """Each example's logits after as many iterations as its depth. tokens (B, T), depths (B,) -> (B, T, vocab)"""
    steps = loop_logits(model, tokens, int(depths.max()))
    stacked = torch.stack(steps)  # (n, B, T, vocab)
    return stacked[depths.long() - 1, torch.arange(tokens.shape[0], device=tokens.device)]  # (B, T, vocab)


def token_loop_logits(model, tokens: torch.Tensor, depths: torch.Tensor, pad: torch.Tensor,
                      blank: int) -> torch.Tensor:
    """The ``"tokens"`` loop: the block applied to its own argmax tokens (padding kept BLANK),
    each example's logits taken after as many passes as its depth. (B, T), (B,), (B, T) -> (B, T, vocab)"""
    out = None
    for t in range(1, int(depths.max()) + 1):
        logits = model(tokens)  # (B, T, vocab)
        out = logits if out is None else torch.where((depths >= t)[:, None, None], logits, out)
        tokens = logits.argmax(-1).masked_fill(pad, blank)  # (B, T)
    return out


def final_targets(g: Grammar, tokens: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The fully reduced state of well-formed expressions: the literal of ``values`` at the root
    operator (the operator at nesting depth 1) and BLANK elsewhere. tokens (B, T), values (B,) -> (B, T)"""
    step = (tokens == OPEN).long() - (tokens == CLOSE).long()  # (B, T)
    level = step.cumsum(1)  # (B, T) depth after each token (= before it, for an operator)
    is_op = torch.zeros(g.blank + 1, dtype=torch.bool, device=tokens.device)
    is_op[[g.sym_id(s) for s in g.op_symbols]] = True
    root = is_op[tokens] & (level == 1)  # (B, T)
    lit = torch.full((max(g.literals) + 1,), g.blank, dtype=torch.long, device=tokens.device)  # value -> id
    lit[list(g.literals)] = torch.tensor([g.literal_id(v) for v in g.literals], device=tokens.device)
    answer = lit[values.long()]  # (B,)
    return torch.where(root, answer[:, None], torch.full_like(tokens, g.blank))  # (B, T)


def final_targets_reference(g: Grammar, tokens: np.ndarray) -> np.ndarray:
    """Plain reference: :func:`reduce_once` until no parentheses remain. (T,) -> (T,)"""
    out = np.asarray(tokens, dtype=np.int64)
    while np.any((out == OPEN) | (out == CLOSE)):
        out = reduce_once(g, out)
    return out


def looped_ce(g: Grammar, model, batch: dict) -> torch.Tensor:
    """Cross-entropy of the fully reduced state after ``depth`` iterations, over every real token."""
    return looped_scores(g, model, batch)[1]


def looped_exact(g: Grammar, model, batch: dict) -> torch.Tensor:
    """Per example: the argmax after ``depth`` iterations equals the fully reduced state at every real token. (B,)"""
    return looped_scores(g, model, batch)[0]


def looped_scores(g: Grammar, model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(exact per example (B,), mean cross-entropy) from one looped pass over ``batch``."""
    logits = logits_at_depth(model, batch["tokens"], batch["depth"])  # (B, T, vocab)
    target = final_targets(g, batch["tokens"], batch["value"])  # (B, T)
    mask = batch["loss_mask"]  # (B, T)
    exact = ((logits.argmax(-1) == target) | ~mask).all(-1)  # (B,)
    return exact, F.cross_entropy(logits[mask].float(), target[mask])
