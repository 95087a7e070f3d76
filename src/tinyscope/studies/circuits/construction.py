"""Hand-set weights of the circuit transformer: an exact evaluator for every depth.

* G_PE = diag(1, -1, 0, ..., 0): A1 counts open parentheses forward, A2 close ones backward,
  so ``max(A1, A2)`` is a token's nesting level and the hardmax marks the deepest spans.
* W_K sends every literal to the operand dimension 0 and operator number m to dimension 1 + m;
  W_Q gives operator m the query e_0 + e_{1+m}; everything else is 0. Per cluster, the operator's
  row of H is then the bag of tokens ``counts of each literal + its own one-hot``; every other
  row of H is 0 (parentheses and BLANKs have zero keys and queries).
* The MLP maps each bag to logits whose largest entry is the result and is positive, and maps 0
  to all-negative logits (the gated normalisation then writes the zero vector):

  - Boolean (quadratic, width 14): with u, v the counts of 1 and 0 and a, o, n the indicators of
    ∧, ∨, ∼, z_1 = 4[u(a+o) - 1.5a - 0.5o + vn - 0.5n - 1/4] and
    z_0 = 4[v(a+o) - 0.5a - 1.5o + un - 0.5n - 1/4] are +-1 on all 8 cases; products come from
    ``pq = ((p+q)^2 - (p-q)^2) / 4`` and ``a = a^2`` for indicators (11 of 14 units used).
  - ListOps (ReLU, width 128): MAX, MIN and MED are order statistics: with L_k = #{operands <= k}
    and n operands, the r-th smallest is k iff ``s(L_k - r) - s(L_{k-1} - r) = 1`` where
    ``s(z) = relu(z+1) - relu(z)`` is the step 1[z >= 0] on integers (r = n, 1, and the floor
    median via ``2 L_k - n >= 0``); SM uses hat functions of the sum S at S = k, k+10, k+20.
    Each unit is gated off by ``-40 (1 - indicator of its operator)`` (90 of 128 units used).
  - Arithmetic (quadratic, width 28): no closed form is known to us; the MLP is solved from the
    110-case depth-1 table by a deterministic margin fit (seeded, about a second), and the solution
    is checked exact on the table before it is returned.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from tinyscope.studies.circuits.enumeration import enumerate_depth
from tinyscope.studies.circuits.grammar import Grammar, evaluate
from tinyscope.studies.circuits.grammar import grammar as get_grammar
from tinyscope.studies.circuits.model import CircuitConfig, CircuitTransformer

LOGIT = 6.0  # |logit| of binary weights: sigmoid(6) = 0.998, well clear of the 0.5 threshold
GATE = 40.0  # ListOps: larger than any integer argument a gated-off unit could reach
OUT_SCALE = 8.0  # output logits +-8 instead of +-1: the same circuit, confident soft surrogates (BCE ~ 0)


def routing_matrices(g: Grammar) -> tuple[np.ndarray, np.ndarray]:
    """The binary W_Q, W_K (D x (1 + #operators)) that build the bag of tokens at operators."""
    D, n_ops = g.D, len(g.operators)
    wq, wk = np.zeros((D, 1 + n_ops)), np.zeros((D, 1 + n_ops))
    for value in g.literals:
        wk[g.literal_id(value), 0] = 1
    for m, op in enumerate(g.operators):
        i = g.sym_id(op)
        wk[i, 1 + m] = 1
        wq[i, 0] = wq[i, 1 + m] = 1
    return wq, wk


def bag_table(g: Grammar) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct depth-1 bag of tokens H (rows) and its result id: the MLP's lookup table."""
    rows, labels, seen = [], [], set()
    for e in enumerate_depth(g, 1):
        h = np.zeros(g.D)
        h[g.sym_id(e[0])] = 1
        for v in e[1]:
            h[g.literal_id(v)] += 1
        key = tuple(h)
        if key not in seen:
            seen.add(key)
            rows.append(h)
            labels.append(g.literal_id(evaluate(g, e)))
    return np.stack(rows), np.array(labels)


def boolean_mlp() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(W_in (h, D), b_in, W_out (D, h), b_out) of the closed-form Boolean lookup."""
    D, h = 7, 14
    U, V, AND, OR, NOT = 2, 3, 4, 5, 6
    w_in = np.zeros((h, D))
    units = [{U: 1, AND: 1, OR: 1}, {U: 1, AND: -1, OR: -1}, {V: 1, AND: 1, OR: 1}, {V: 1, AND: -1, OR: -1},
             {V: 1, NOT: 1}, {V: 1, NOT: -1}, {U: 1, NOT: 1}, {U: 1, NOT: -1}, {AND: 1}, {OR: 1}, {NOT: 1}]
    for r, unit in enumerate(units):
        for col, w in unit.items():
            w_in[r, col] = w
    w_out = np.zeros((D, h))
    # z_1 = 4[u(a+o) + vn - 1.5a - 0.5o - 0.5n - 1/4];  z_0 = 4[v(a+o) + un - 0.5a - 1.5o - 0.5n - 1/4]
    w_out[U, [0, 1, 4, 5, 8, 9, 10]] = 4 * np.array([0.25, -0.25, 0.25, -0.25, -1.5, -0.5, -0.5])
    w_out[V, [2, 3, 6, 7, 8, 9, 10]] = 4 * np.array([0.25, -0.25, 0.25, -0.25, -0.5, -1.5, -0.5])
    b_out = -np.ones(D)
    b_out[[U, V]] = -1.0
    return w_in, np.zeros(h), w_out, b_out


def listops_mlp(g: Grammar | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(W_in (h, 16), b_in, W_out (16, h), b_out) of the closed-form ListOps lookup: h = 128 for
    ``listops`` (90 units used), h = 170 for ``listops-lra`` (all used; see :func:`_lra_median_units`)."""
    g = get_grammar("listops") if g is None else g
    max_args = max(max(arities) for arities, _ in g.operators.values())
    gate = max(GATE, 9 * max_args + 10)  # beats the largest SM ramp argument, 9 * max_args + 1
    lra = g.name == "listops-lra"
    D, h = g.D, (20 + 20 + 37 + 9 * max_args + 3) if lra else 128
    digit = [g.literal_id(k) for k in range(10)]
    w_in, b_in, w_out = np.zeros((h, D)), np.zeros(h), np.zeros((D, h))
    unit = 0

    def add_unit(weights: dict[int, float], bias: float) -> int:
        nonlocal unit
        for col, w in weights.items():
            w_in[unit, col] += w
        b_in[unit] = bias
        unit += 1
        return unit - 1

    # order statistics: z_k = coef * L_k - n_coef * n - const >= 0, gated by the operator
    stats = (("MAX", 1, 1, 0), ("MIN", 1, 0, 1)) + (() if lra else (("MED", 2, 1, 0),))
    for op, coef, n_coef, const in stats:
        gate_col = g.sym_id(op)
        for k in range(10):
            lin = {digit[j]: coef * (j <= k) - n_coef for j in range(10)} | {gate_col: gate}
            hi = add_unit(lin, 1.0 - const - gate)   # relu(z + 1)
            lo = add_unit(lin, 0.0 - const - gate)   # relu(z)
            # step s_k = hi - lo counts +1 for result k and -1 for result k + 1
            w_out[digit[k], hi] += 2
            w_out[digit[k], lo] -= 2
            if k + 1 < 10:
                w_out[digit[k + 1], hi] -= 2
                w_out[digit[k + 1], lo] += 2
    if lra:
        _lra_median_units(g, add_unit, w_out, gate)
    # SM: r_t = relu(S - t) for t = -1..9 max_args + 1; [S = v] = r_{v-1} - 2 r_v + r_{v+1}
    sum_lin = {digit[j]: float(j) for j in range(10)} | {g.sym_id("SM"): gate}
    top = 9 * max_args
    ramp = {t: add_unit(sum_lin, -t - gate) for t in range(-1, top + 2)}
    for v in range(top + 1):
        k = digit[v % 10]
        for t, w in ((v - 1, 1), (v, -2), (v + 1, 1)):
            w_out[k, ramp[t]] += 2 * w
    return w_in, b_in, w_out, -np.ones(D)


def _lra_median_units(g: Grammar, add_unit, w_out: np.ndarray, gate: float) -> None:
    """MED as the integer part of the median (37 units). With n operands and L_k = #{operands <= k},
    the two middle order statistics are lo = #{k : 2 L_k < n} and hi = #{k : 2 L_k <= n} (equal for
    odd n), and the result is floor((lo + hi) / 2). Logit j is
    ``-2[(lo - j)^2 + (hi - j)^2] - j + 94 [MED]``: as a function of j it is
    ``-4 (j - (lo+hi)/2)^2 - j + const``, largest at the nearest integer with ties to the lower
    one, at least 1 above the others, and positive (>= 94 - 2 * 81/2 - 1 - 9). Any function of lo is
    ``f(0) + sum_k [lo > k] (f(k+1) - f(k))``; the steps ``[lo > k] = s(n - 2 L_k - 1)`` and
    ``[hi > k] = s(n - 2 L_k)`` come from ``s(z) = relu(z + 1) - relu(z)`` as for the other order
    statistics, gated by the operator; the constant sits on one unit that is 1 exactly on MED rows."""
    digit = [g.literal_id(k) for k in range(10)]
    col = g.sym_id("MED")

    def f(j: int, x: int) -> float:
        return -2.0 * (x - j) ** 2

    for shift in (1, 0):  # lo's steps (n - 2 L_k - 1 >= 0), then hi's (n - 2 L_k >= 0)
        for k in range(9):
            lin = {digit[d]: 1 - 2 * (d <= k) for d in range(10)} | {col: gate}
            up = add_unit(lin, 1.0 - shift - gate)
            down = add_unit(lin, 0.0 - shift - gate)
            for j in range(10):
                w_out[digit[j], up] += f(j, k + 1) - f(j, k)
                w_out[digit[j], down] -= f(j, k + 1) - f(j, k)
    on = add_unit({col: gate}, 1.0 - gate)  # 1 on MED rows, 0 elsewhere
    for j in range(10):
        w_out[digit[j], on] += 2 * f(j, 0) - j + 95.0  # +95 - 1 (b_out) = 94


@lru_cache(maxsize=None)
def fitted_mlp(grammar_name: str, d_hidden: int, act: str, seed: int = 0, margin: float = 1.0,
               max_iters: int = 20000) -> tuple[np.ndarray, ...]:
    """An MLP solved from the depth-1 table: largest logit = result with a positive ``margin``
    over the others and over 0, and all logits < -margin on the zero vector. Raises if no exact
    solution is reached."""
    g = get_grammar(grammar_name)
    H, y = bag_table(g)
    X = torch.tensor(np.concatenate([H, np.zeros((1, g.D))]), dtype=torch.float64)
    Y = torch.tensor(y)
    gen = torch.Generator().manual_seed(seed)
    lin_in = torch.nn.Linear(g.D, d_hidden, dtype=torch.float64)
    lin_out = torch.nn.Linear(d_hidden, g.D, dtype=torch.float64)
    with torch.no_grad():
        for p in (*lin_in.parameters(), *lin_out.parameters()):
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.3)
    opt = torch.optim.Adam([*lin_in.parameters(), *lin_out.parameters()], lr=0.1)
    onehot = torch.nn.functional.one_hot(Y, g.D).bool()
    for _ in range(max_iters):
        z = lin_in(X)
        z = lin_out(z * z if act == "quadratic" else torch.relu(z))  # (N+1, D)
        zc = z[:-1].gather(1, Y[:, None])  # (N, 1)
        other = z[:-1].masked_fill(onehot, -1e9).max(1, keepdim=True).values  # (N, 1)
        gaps = torch.cat([(zc - other).flatten(), zc.flatten(), -z[-1]])
        if bool((gaps > margin).all()):
            break
        loss = torch.nn.functional.softplus(2 * (2 * margin - gaps)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    else:
        raise RuntimeError(f"no exact {grammar_name} MLP of width {d_hidden} found in {max_iters} iterations")
    return tuple(t.detach().numpy().copy() for t in (lin_in.weight, lin_in.bias, lin_out.weight, lin_out.bias))


def construction_mlp(g: Grammar) -> tuple[np.ndarray, ...]:
    if g.name == "boolean":
        return boolean_mlp()
    if g.name in ("listops", "listops-lra"):
        return listops_mlp(g)
    cfg = CircuitConfig(grammar=g.name)
    return fitted_mlp(g.name, cfg.d_hidden, cfg.act)


def construct(name: str | Grammar) -> CircuitTransformer:
    """A CircuitTransformer with the hand-set weights for ``name`` (boolean | arithmetic | listops)."""
    g = get_grammar(name)
    wq, wk = routing_matrices(g)
    w_in, b_in, w_out, b_out = construction_mlp(g)
    model = CircuitTransformer(CircuitConfig(grammar=g.name, d_hidden=w_in.shape[0]))
    pe = np.zeros(g.D)
    pe[0], pe[1] = 1.0, -1.0
    with torch.no_grad():
        model.g_pe.copy_(torch.tensor(pe))
        model.w_q.copy_(torch.tensor(LOGIT * (2 * wq - 1)))
        model.w_k.copy_(torch.tensor(LOGIT * (2 * wk - 1)))
        model.mlp_in.weight.copy_(torch.tensor(w_in))
        model.mlp_in.bias.copy_(torch.tensor(b_in))
        model.mlp_out.weight.copy_(OUT_SCALE * torch.tensor(w_out))
        model.mlp_out.bias.copy_(OUT_SCALE * torch.tensor(b_out))
    return model.eval()


def compare_weights(learned: CircuitTransformer) -> dict:
    """Learned vs constructed discrete weights: G_PE (ternary), W_Q and W_K (binary).

    W_Q, W_K are compared up to a permutation of the d_head columns (the routing dimensions have
    no order); ``*_equal`` says whether they match exactly, ``*_agreement`` the best fraction of
    equal entries, and ``pe_learned`` / ``pe_constructed`` list the ternary diagonals.
    """
    from itertools import permutations

    g = get_grammar(learned.cfg.grammar)
    pe_c = torch.zeros(g.D, dtype=torch.long)
    pe_c[0], pe_c[1] = 1, -1
    qc, kc = (torch.tensor(m, dtype=torch.float32) for m in routing_matrices(g))
    with torch.no_grad():
        pe_l = learned.pe_values().long()
        ql, kl = (m.float() for m in learned.qk_values())
    out = {"pe_learned": pe_l.tolist(), "pe_constructed": pe_c.tolist(), "pe_equal": bool((pe_l == pe_c).all())}
    if ql.shape != qc.shape:
        return out | {"w_q_equal": False, "w_k_equal": False}
    best = max(permutations(range(ql.shape[1])),
               key=lambda p: float((ql[:, p] == qc).float().mean() + (kl[:, p] == kc).float().mean()))
    perm = list(best)
    out["qk_permutation"] = perm
    for name, a, b in (("w_q", ql[:, perm], qc), ("w_k", kl[:, perm], kc)):
        out[f"{name}_agreement"] = float((a == b).float().mean())
        out[f"{name}_equal"] = bool((a == b).all())
    return out
