"""Fully parenthesised circuit expressions: Boolean logic, arithmetic mod 10 and ListOps.

The tasks of "Universal Transformers for Circuit Computations" (Ito et al.; spec in
``shared/papers/seed003-details.md`` Sec. 3). Each *grammar* fixes a vocabulary whose order is the
paper's one-hot order (so the model width D is the vocabulary size and dims 0, 1 are the
parentheses), the operators and their arities, and infix or prefix notation:

=============== ============================================== ===== ======= =================
grammar         vocabulary (ids 0..D-1)                        D     form    operand counts
=============== ============================================== ===== ======= =================
``boolean``     ( ) 1 0 ∧ ∨ ∼                                  7     infix   ∧ ∨: 2, ∼: 1
``arithmetic``  ( ) 0-9 + *   (values mod 10)                  14    infix   2
``listops``     ( ) 0-9 MAX MIN SM MED                         16    prefix  2 or 3
=============== ============================================== ===== ======= =================

Id ``D`` is BLANK, the zero vector: in ListOps one BLANK follows every ``)`` (adjacent prefix
subexpressions would otherwise touch and merge into one reduction span), and BLANK pads batches.
MED of an even number of operands takes the lower one (index ``(n-1)//2`` of the sorted list);
SM is the sum mod 10.

An expression is a literal value (``int``) or a node ``(op, (child, ...))``. Its depth is 0 for a
literal and 1 + the deepest child for a node. Everything here is numpy / pure Python.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Callable, Sequence, Union

import numpy as np

from tinyscope.errors import TinyscopeError, check_choice
from tinyscope.tasks.base import Batch

Expr = Union[int, tuple]
OPEN, CLOSE = 0, 1
BLANK_SYMBOL = "_"


class ParseError(TinyscopeError):
    """A malformed expression: ``position`` (token index, or character index for text) and ``reason``."""

    def __init__(self, position: int, reason: str):
        self.position, self.reason = int(position), reason
        super().__init__(f"malformed expression at position {position}: {reason}")


def _median_low(xs: Sequence[int]) -> int:
    return sorted(xs)[(len(xs) - 1) // 2]


@dataclass(frozen=True, eq=False)
class Grammar:
    """Vocabulary, operators and notation of one expression family."""

    name: str
    symbols: tuple[str, ...]                   # one-hot order; symbols[0:2] == ("(", ")")
    literals: tuple[int, ...]                  # value of the literal symbols, in vocabulary order
    operators: dict                            # symbol -> (allowed operand counts, fn(list[int]) -> int)
    notation: str                              # "infix" | "prefix"
    blank_after_close: bool = False
    aliases: tuple[tuple[str, str], ...] = ()  # accepted spellings in text -> vocabulary symbol

    @property
    def D(self) -> int:
        """Model width = vocabulary size (BLANK, id D, is the zero vector and takes no dimension)."""
        return len(self.symbols)

    @property
    def blank(self) -> int:
        return len(self.symbols)

    @property
    def n_classes(self) -> int:
        return len(self.literals)

    @property
    def op_symbols(self) -> tuple[str, ...]:
        return tuple(self.operators)

    # ------------------------------------------------------------- ids
    def sym_id(self, symbol: str) -> int:
        return self.symbols.index(symbol)

    def literal_id(self, value: int) -> int:
        return 2 + self.literals.index(int(value))

    def id_value(self, token: int) -> int:
        """The value of a literal token id."""
        return self.literals[int(token) - 2]

    def is_literal_id(self, token: int) -> bool:
        return 2 <= token < 2 + len(self.literals)

    def is_op_id(self, token: int) -> bool:
        return 2 + len(self.literals) <= token < self.D

    def apply(self, op: str, values: Sequence[int]) -> int:
        return int(self.operators[op][1](list(values)))


BOOLEAN = Grammar(
    "boolean", ("(", ")", "1", "0", "∧", "∨", "∼"), (1, 0),
    {"∧": ((2,), lambda v: int(all(v))), "∨": ((2,), lambda v: int(any(v))), "∼": ((1,), lambda v: 1 - v[0])},
    "infix", aliases=(("&", "∧"), ("|", "∨"), ("~", "∼"), ("¬", "∼"), ("!", "∼")))
ARITHMETIC = Grammar(
    "arithmetic", ("(", ")", *map(str, range(10)), "+", "*"), tuple(range(10)),
    {"+": ((2,), lambda v: sum(v) % 10), "*": ((2,), lambda v: (v[0] * v[1]) % 10)},
    "infix", aliases=(("×", "*"),))
LISTOPS = Grammar(
    "listops", ("(", ")", *map(str, range(10)), "MAX", "MIN", "SM", "MED"), tuple(range(10)),
    {"MAX": ((2, 3), max), "MIN": ((2, 3), min), "SM": ((2, 3), lambda v: sum(v) % 10), "MED": ((2, 3), _median_low)},
    "prefix", blank_after_close=True)

GRAMMARS: dict[str, Grammar] = {g.name: g for g in (BOOLEAN, ARITHMETIC, LISTOPS)}


def grammar(name: str | Grammar) -> Grammar:
    if isinstance(name, Grammar):
        return name
    check_choice("task.grammar", name, tuple(GRAMMARS))
    return GRAMMARS[name]


# ====================================================================== trees
def depth(e: Expr) -> int:
    """0 for a literal, 1 + deepest child otherwise (iterative: safe for deep trees)."""
    best, stack = 0, [(e, 0)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, tuple):
            stack.extend((c, d + 1) for c in node[1])
        else:
            best = max(best, d)
    return best


def evaluate(g: Grammar, e: Expr) -> int:
    """The exact value of expression ``e`` (the oracle)."""
    if not isinstance(e, tuple):
        return int(e)
    op, children = e
    return g.apply(op, [evaluate(g, c) for c in children])


def to_symbols(g: Grammar, e: Expr) -> list[str]:
    """Fully parenthesised token symbols; ListOps gets a BLANK after every ``)``."""
    if not isinstance(e, tuple):
        return [str(e) if g.name != "boolean" else ("1" if e else "0")]
    op, children = e
    if g.notation == "prefix":
        body = [op] + [s for c in children for s in to_symbols(g, c)]
    elif len(children) == 1:
        body = [op] + to_symbols(g, children[0])
    else:
        body = to_symbols(g, children[0]) + [op] + to_symbols(g, children[1])
    return ["("] + body + [")"] + ([BLANK_SYMBOL] if g.blank_after_close else [])


def to_text(g: Grammar, e: Expr) -> str:
    syms = [s for s in to_symbols(g, e) if s != BLANK_SYMBOL]
    if g.notation == "prefix":
        return re.sub(r"\( ", "(", re.sub(r" \)", ")", " ".join(syms)))
    return "".join(syms)


@lru_cache(maxsize=None)
def _symbol_table(g: Grammar) -> dict[str, int]:
    table = {s: i for i, s in enumerate(g.symbols)} | {BLANK_SYMBOL: g.blank}
    return table | {a: table[s] for a, s in g.aliases}


def encode(g: Grammar, e: Expr) -> np.ndarray:
    """Token ids (int64) of expression ``e``."""
    table = _symbol_table(g)
    return np.array([table[s] for s in to_symbols(g, e)], dtype=np.int64)


def tokenize(g: Grammar, text: str) -> np.ndarray:
    """Token ids of a text expression, e.g. ``"((1∧0)∨(∼0))"`` or ``"(MAX 3 (MIN 4 5))"``.

    Whitespace separates nothing in infix grammars (every symbol is one character) and words in
    ListOps. ListOps ids get a BLANK after every ``)``. Raises ParseError naming the character
    position of an unknown symbol.
    """
    ids, positions = _lex(g, text)
    return np.array(ids, dtype=np.int64)


def _lex(g: Grammar, text: str) -> tuple[list[int], list[int]]:
    table = _symbol_table(g)
    ids: list[int] = []
    positions: list[int] = []
    pattern = r"\(|\)|[^\s()]+" if g.notation == "prefix" else r"\S"
    for m in re.finditer(pattern, text):
        sym = m.group(0)
        sym = sym.upper() if g.notation == "prefix" else sym
        if sym not in table or sym == BLANK_SYMBOL:
            raise ParseError(m.start(), f"unknown symbol {m.group(0)!r}; {g.name} knows {' '.join(g.symbols)}")
        ids.append(table[sym])
        positions.append(m.start())
        if sym == ")" and g.blank_after_close:
            ids.append(g.blank)
            positions.append(m.start())
    return ids, positions


# ====================================================================== parser
def parse(g: Grammar, source: str | Sequence[int] | np.ndarray) -> Expr:
    """Parse text or token ids into an expression, rejecting malformed input.

    BLANK ids are ignored (they are zero vectors). Errors (``ParseError``) name the position (a
    character index for text, a token index for ids) and the reason: an unknown symbol, an
    unbalanced parenthesis, an operator with the wrong number of operands, a missing operator,
    or doubled parentheses (expressions are *fully* parenthesised: one pair per operation).
    """
    if isinstance(source, str):
        ids, positions = _lex(g, source)
    else:
        ids = [int(t) for t in np.asarray(source).reshape(-1)]
        positions = list(range(len(ids)))
    stack: list[tuple[int, list]] = []   # (position of "(", items inside)
    top: list = []                        # items at the outermost level
    for tok, pos in zip(ids, positions):
        items = stack[-1][1] if stack else top
        if tok == g.blank:
            continue
        if not 0 <= tok < g.blank:
            raise ParseError(pos, f"unknown token id {tok}; ids run from 0 to {g.blank} (BLANK)")
        if tok == OPEN:
            stack.append((pos, []))
        elif tok == CLOSE:
            if not stack:
                raise ParseError(pos, "unbalanced: ')' has no matching '('")
            open_pos, inner = stack.pop()
            node = _build(g, open_pos, inner, pos)
            (stack[-1][1] if stack else top).append(("expr", node, open_pos))
        elif g.is_literal_id(tok):
            items.append(("expr", g.id_value(tok), pos))
        else:
            items.append(("op", g.symbols[tok], pos))
    if stack:
        raise ParseError(stack[-1][0], "unbalanced: '(' is never closed")
    if not top:
        raise ParseError(0, "empty expression")
    if len(top) > 1 or top[0][0] != "expr":
        kind, _, pos = top[1] if top[0][0] == "expr" else top[0]
        raise ParseError(pos, "operators and operands outside parentheses; the expression must be one "
                              "literal or one parenthesised operation")
    return top[0][1]


def _build(g: Grammar, open_pos: int, items: list, close_pos: int) -> tuple:
    """Check the items between a '(' and its ')' form one operation and return its node."""
    if not items:
        raise ParseError(open_pos, "'(' encloses nothing")
    ops = [(sym, pos) for kind, sym, pos in items if kind == "op"]
    if not ops:
        reason = "doubled parentheses" if len(items) == 1 else "no operator between the operands"
        raise ParseError(open_pos, f"{reason}: each '(' must hold exactly one operation")
    if len(ops) > 1:
        raise ParseError(ops[1][1], f"second operator {ops[1][0]!r} in one pair of parentheses; add parentheses")
    op, op_pos = ops[0]
    operands = [v for kind, v, _ in items if kind == "expr"]
    arities = g.operators[op][0]
    if len(operands) not in arities:
        allowed = " or ".join(map(str, arities))
        raise ParseError(op_pos, f"wrong arity: {op!r} takes {allowed} operand{'s' if arities != (1,) else ''}, "
                                 f"got {len(operands)}")
    where = [i for i, (kind, _, _) in enumerate(items) if kind == "op"][0]
    expected = 0 if (g.notation == "prefix" or arities == (1,)) else 1
    if where != expected:
        form = "first (prefix form)" if expected == 0 else "between its two operands (infix form)"
        raise ParseError(op_pos, f"operator {op!r} must come {form}")
    return (op, tuple(operands))


def evaluate_tokens(g: Grammar, tokens: Sequence[int] | np.ndarray | str) -> int:
    """Parse and evaluate: the exact answer for a token sequence or text."""
    return evaluate(g, parse(g, tokens))


# ====================================================================== one reduction step
def nesting(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(depth after each token, depth before each token): the paper's A1 and A2 for G_PE = diag(1, -1, 0...)."""
    step = (tokens == OPEN).astype(np.int64) - (tokens == CLOSE).astype(np.int64)  # (T,)
    after = np.cumsum(step)  # (T,)
    return after, after - step


def reduce_once(g: Grammar, tokens: np.ndarray) -> np.ndarray:
    """One circuit step on token ids: every deepest parenthesised span becomes BLANKs with its
    value at the operator's position (the training target). A sequence without parentheses is
    returned unchanged. This is the plain reference the model's iteration must equal."""
    tokens = np.asarray(tokens, dtype=np.int64)
    after, before = nesting(tokens)
    level = np.maximum(after, before)  # (T,)
    top = int(level.max(initial=0))
    out = tokens.copy()
    if top == 0:
        return out
    masked = level == top
    edges = np.flatnonzero(np.diff(np.concatenate([[0], masked.astype(np.int8), [0]])))
    for start, stop in zip(edges[::2], edges[1::2]):
        span = tokens[start:stop]
        ops = [i for i, t in enumerate(span) if g.is_op_id(t)]
        values = [g.id_value(t) for t in span if g.is_literal_id(t)]
        out[start:stop] = g.blank
        if ops:
            op_pos = start + ops[0]
            out[op_pos] = g.literal_id(g.apply(g.symbols[span[ops[0]]], values))
    return out


def reduce_all(g: Grammar, tokens: np.ndarray) -> tuple[int, int]:
    """Reduce until no parentheses remain; returns (value, number of steps) (reference halting)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    steps = 0
    while np.any((tokens == OPEN) | (tokens == CLOSE)):
        tokens = reduce_once(g, tokens)
        steps += 1
    lit = [t for t in tokens if g.is_literal_id(t)]
    if len(lit) != 1:
        raise ValueError(f"reduction left {len(lit)} literals; the input was not one well-formed expression")
    return g.id_value(lit[0]), steps


# ====================================================================== enumeration and sampling
def _operand_tuples(pool: Sequence[Expr], arity: int, need: Callable[[tuple], bool]) -> list[tuple]:
    return [c for c in product(pool, repeat=arity) if need(c)]


def enumerate_depth(g: Grammar, d: int) -> list[Expr]:
    """Every expression of depth exactly ``d`` (d = 1 or 2; deeper sets are astronomically large).

    Order is deterministic: operator in vocabulary order, then operands lexicographically.
    """
    if d not in (1, 2):
        raise ValueError(f"enumerate_depth handles depth 1 or 2, got {d}; sample deeper ones")
    lits: list[Expr] = list(g.literals)
    if d == 1:
        pool, need = lits, (lambda c: True)
    else:
        pool = lits + enumerate_depth(g, 1)
        need = (lambda c: any(isinstance(x, tuple) for x in c))
    out = []
    for op, (arities, _) in g.operators.items():
        for k in arities:
            out.extend((op, c) for c in _operand_tuples(pool, k, need))
    return out


def count_depth(g: Grammar, d: int) -> int:
    """Number of expressions of depth exactly ``d`` (closed form, any d; Python ints)."""
    n_lit = len(g.literals)
    at_most = n_lit
    for _ in range(d):
        prev = at_most
        at_most = n_lit + sum(prev ** k for arities, _ in g.operators.values() for k in arities)
    below = n_lit
    for _ in range(d - 1):
        below = n_lit + sum(below ** k for arities, _ in g.operators.values() for k in arities)
    return at_most - (below if d >= 1 else 0)


def balance(values: np.ndarray, how: str = "upsample") -> np.ndarray:
    """Indices that balance a dataset over its classes ``values``.

    ``upsample``: every class repeated cyclically up to the largest class's count (no example is
    dropped); ``downsample``: each class cut to the smallest count (first ones kept); ``none``.
    """
    check_choice("task.balance", how, ("upsample", "downsample", "none"))
    values = np.asarray(values)
    if how == "none":
        return np.arange(len(values))
    groups = [np.flatnonzero(values == v) for v in np.unique(values)]
    size = max(map(len, groups)) if how == "upsample" else min(map(len, groups))
    return np.concatenate([np.resize(idx, size) for idx in groups])


def sample_expression(g: Grammar, rng: np.random.Generator, d: int, p_deep: float = 0.4) -> Expr:
    """A random expression of depth exactly ``d``.

    Operator uniform over the grammar's (operator, operand count) choices; each operand is an
    expression of depth ``d - 1`` with probability ``p_deep``, else a uniform literal, conditioned
    on at least one operand of depth ``d - 1`` (drawn by redrawing the deep/literal pattern).
    The paper says "uniformly sampled" without a generator; truly uniform trees of depth 30 would
    have ~2^30 leaves, so ``p_deep`` sets the size (see docs/circuit.md for the calibration).
    """
    choices = [(op, k) for op, (arities, _) in g.operators.items() for k in arities]
    n_lit = len(g.literals)

    def build(level: int) -> Expr:
        if level == 0:
            return g.literals[int(rng.integers(n_lit))]
        op, k = choices[int(rng.integers(len(choices)))]
        while True:
            deep = rng.random(k) < p_deep
            if deep.any():
                break
        return (op, tuple(build(level - 1) if dp else g.literals[int(rng.integers(n_lit))] for dp in deep))

    return build(int(d))


def sample_expressions(g: Grammar, rng: np.random.Generator, d: int, n: int, p_deep: float = 0.4) -> list[Expr]:
    return [sample_expression(g, rng, d, p_deep) for _ in range(n)]


def pad_batch(g: Grammar, seqs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(B, T) ids padded with BLANK, and the (B,) lengths."""
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    out = np.full((len(seqs), int(lengths.max(initial=1))), g.blank, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, lengths


# ====================================================================== the task: curriculum and evaluation sets
P_DEEP = {"boolean": 0.42, "arithmetic": 0.373, "listops": 0.28}  # calibrated to the paper's depth-30 token means


@dataclass
class LogicTaskConfig:
    """Data of the circuit experiments (Ito et al. Sec. "Data" and "Evaluation")."""

    grammar: str = "boolean"
    balance: str = "upsample"            # upsample | downsample | none (over result classes)
    depth2_samples: int = 0              # > 0: draw this many fresh depth-2 expressions per epoch instead
                                         # of enumerating (ListOps: 8,800; its depth-2 set has 3.4e11)
    depth2_p_deep: float = 0.5           # p_deep of the sampled depth-2 expressions
    p_deep: float | None = None          # evaluation generator; None = calibrated per grammar (P_DEEP)
    eval_depths: list[int] | None = None  # None = 3..30
    eval_per_depth: int = 100
    eval_max_tokens: int = 0             # > 0: redraw evaluation expressions longer than this
    data_seed: int = 0

    def __post_init__(self):
        from tinyscope.errors import check

        check_choice("task.grammar", self.grammar, tuple(GRAMMARS))
        check_choice("task.balance", self.balance, ("upsample", "downsample", "none"))
        check(self.depth2_samples >= 0, f"task.depth2_samples={self.depth2_samples} must be >= 0")
        check(0 < self.depth2_p_deep <= 1, f"task.depth2_p_deep={self.depth2_p_deep} must lie in (0, 1]")
        if self.p_deep is None:
            self.p_deep = P_DEEP[self.grammar]
        check(0 < self.p_deep <= 1, f"task.p_deep={self.p_deep} must lie in (0, 1]")
        if self.eval_depths is None:
            self.eval_depths = list(range(3, 31))
        check(len(self.eval_depths) > 0 and all(d >= 1 for d in self.eval_depths),
              f"task.eval_depths={self.eval_depths} must list depths >= 1")
        check(self.eval_per_depth >= 1, f"task.eval_per_depth={self.eval_per_depth} must be >= 1")
        check(self.eval_max_tokens >= 0, f"task.eval_max_tokens={self.eval_max_tokens} must be >= 0")


@dataclass
class ExpressionSet:
    """Padded token ids, one-step-reduced targets, answers and depths of a list of expressions."""

    tokens: np.ndarray    # (N, T) BLANK-padded
    targets: np.ndarray   # (N, T) reduce_once(tokens)
    lengths: np.ndarray   # (N,)
    values: np.ndarray    # (N,) exact answer
    depths: np.ndarray    # (N,)

    def __len__(self) -> int:
        return len(self.values)

    def batch(self, index: np.ndarray, blank: int) -> Batch:
        T = int(self.lengths[index].max(initial=1))
        tokens, targets = self.tokens[index, :T], self.targets[index, :T]
        mask = np.arange(T)[None, :] < self.lengths[index][:, None]  # (B, T)
        return Batch(tokens, targets, mask, {"value": self.values[index], "depth": self.depths[index]})


def expression_set(g: Grammar, exprs: Sequence[Expr]) -> ExpressionSet:
    """Encode, reduce and evaluate each distinct expression once (balanced sets repeat many)."""
    index: dict = {}
    inverse = np.array([index.setdefault(e, len(index)) for e in exprs], dtype=np.int64)
    unique = list(index)
    seqs = [encode(g, e) for e in unique]
    tokens, lengths = pad_batch(g, seqs)
    targets, _ = pad_batch(g, [reduce_once(g, s) for s in seqs])
    values = np.array([evaluate(g, e) for e in unique], dtype=np.int64)
    depths = np.array([depth(e) for e in unique], dtype=np.int64)
    return ExpressionSet(tokens[inverse], targets[inverse], lengths[inverse], values[inverse], depths[inverse])


def step_of(rng: np.random.Generator) -> tuple[int, int]:
    """(seed, step) of a generator made by ``tasks.base.step_rng(seed, step)``.

    The trainer hands samplers only the step's generator; an epoch curriculum needs the step
    itself, which ``step_rng`` stores as the generator's seed entropy ``[seed, step, stream]``.
    """
    entropy = rng.bit_generator.seed_seq.entropy
    if not isinstance(entropy, (list, tuple)) or len(entropy) != 3:
        raise ValueError("the curriculum sampler needs a generator from tasks.base.step_rng(seed, step)")
    return int(entropy[0]), int(entropy[1])


class LogicTask:
    """Depth-1 then depth-1+2 curriculum (per epoch) and fixed evaluation sets by depth.

    Each epoch is ``ceil(n1 / B)`` batches of the depth-1 set followed by ``ceil(n12 / B)``
    batches of the depth-1 and depth-2 sets mixed, each shuffled per epoch; ``sample`` turns the
    trainer's step into (epoch, phase, batch), so data are a pure function of (seed, step).
    """

    def __init__(self, cfg: LogicTaskConfig | None = None):
        self.cfg = cfg = cfg or LogicTaskConfig()
        self.grammar = g = grammar(cfg.grammar)
        self.vocab_size = g.D + 1
        exprs1 = enumerate_depth(g, 1)
        self.depth1 = self._balanced(exprs1)
        self.depth2_fixed = None if cfg.depth2_samples else self._balanced(enumerate_depth(g, 2))
        self._epoch_cache: tuple[tuple, ExpressionSet] | None = None
        self._eval: dict[int, ExpressionSet] = {}

    def _balanced(self, exprs: list[Expr]) -> list[Expr]:
        values = np.array([evaluate(self.grammar, e) for e in exprs])
        return [exprs[i] for i in balance(values, self.cfg.balance)]

    # ------------------------------------------------------------ curriculum
    def depth2(self, seed: int, epoch: int) -> list[Expr]:
        if self.depth2_fixed is not None:
            return self.depth2_fixed
        rng = np.random.default_rng([int(seed), int(epoch), 2, self.cfg.data_seed])
        return sample_expressions(self.grammar, rng, 2, self.cfg.depth2_samples, self.cfg.depth2_p_deep)

    def phase_sizes(self) -> tuple[int, int]:
        n2 = len(self.depth2_fixed) if self.depth2_fixed is not None else self.cfg.depth2_samples
        return len(self.depth1), len(self.depth1) + n2

    def steps_per_epoch(self, batch_size: int) -> int:
        n1, n12 = self.phase_sizes()
        return -(-n1 // batch_size) + -(-n12 // batch_size)

    def _epoch_sets(self, seed: int, epoch: int) -> tuple[ExpressionSet, ExpressionSet]:
        key = (seed, epoch if self.depth2_fixed is None else 0)
        if self._epoch_cache is None or self._epoch_cache[0] != key:
            g = self.grammar
            self._epoch_cache = (key, (expression_set(g, self.depth1), expression_set(g, self.depth1 + self.depth2(seed, epoch))))
        return self._epoch_cache[1]

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """The batch of the trainer's step (see class docstring)."""
        seed, step = step_of(rng)
        n1, n12 = self.phase_sizes()
        b1 = -(-n1 // batch_size)
        epoch, j = divmod(step, self.steps_per_epoch(batch_size))
        phase, j = (0, j) if j < b1 else (1, j - b1)
        data = self._epoch_sets(seed, epoch)[phase]
        order = np.random.default_rng([seed, epoch, phase]).permutation(len(data))
        return data.batch(order[j * batch_size:(j + 1) * batch_size], self.grammar.blank)

    # ------------------------------------------------------------ evaluation
    def eval_set(self, d: int) -> ExpressionSet:
        """``eval_per_depth`` expressions of depth ``d``, fixed by ``data_seed``."""
        if d not in self._eval:
            g, cfg = self.grammar, self.cfg
            rng = np.random.default_rng([cfg.data_seed, 1000 + int(d)])
            exprs = []
            while len(exprs) < cfg.eval_per_depth:
                e = sample_expression(g, rng, d, cfg.p_deep)
                if cfg.eval_max_tokens and len(to_symbols(g, e)) > cfg.eval_max_tokens:
                    continue
                exprs.append(e)
            seqs = [encode(g, e) for e in exprs]
            tokens, lengths = pad_batch(g, seqs)
            self._eval[d] = ExpressionSet(tokens, tokens, lengths,
                                          np.array([evaluate(g, e) for e in exprs], dtype=np.int64),
                                          np.full(len(exprs), d, dtype=np.int64))
        return self._eval[d]

    def eval_fingerprint(self) -> str:
        from tinyscope.tasks.base import fingerprint

        return fingerprint(*[self.eval_set(d).tokens for d in self.cfg.eval_depths])
