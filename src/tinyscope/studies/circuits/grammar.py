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
``listops-lra`` the same                                       16    prefix  2 to 10
=============== ============================================== ===== ======= =================

Id ``D`` is BLANK, the zero vector: in ListOps one BLANK follows every ``)`` (adjacent prefix
subexpressions would otherwise touch and merge into one reduction span), and BLANK pads batches.
MED of an even number of operands takes the lower one (index ``(n-1)//2`` of the sorted list);
SM is the sum mod 10. ``listops-lra`` follows the Long Range Arena generator instead: 2 to 10
operands and MED the integer part of the median (an even count averages the two middle values,
rounded down); everything else as ``listops``.

An expression is a literal value (``int``) or a node ``(op, (child, ...))``. Its depth is 0 for a
literal and 1 + the deepest child for a node. Everything here is numpy / pure Python; one
reduction step is in :mod:`.reduction`, enumeration and sampling in :mod:`.enumeration`, the
training task in :mod:`.task`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence, Union

import numpy as np

from tinyscope.errors import TinyscopeError, check_choice

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


def _median_int(xs: Sequence[int]) -> int:
    """The integer part of the median (the Long Range Arena ListOps generator's ``int(np.median)``):
    the middle value, or for an even count the mean of the two middle ones rounded down."""
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) // 2


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

LRA_MAX_ARGS = 10  # the LRA ListOps generator's default fan-in bound (operand counts 2..10)
LISTOPS_LRA = Grammar(
    "listops-lra", LISTOPS.symbols, LISTOPS.literals,
    {op: (tuple(range(2, LRA_MAX_ARGS + 1)), fn) for op, fn in
     (("MAX", max), ("MIN", min), ("SM", lambda v: sum(v) % 10), ("MED", _median_int))},
    "prefix", blank_after_close=True)

GRAMMARS: dict[str, Grammar] = {g.name: g for g in (BOOLEAN, ARITHMETIC, LISTOPS, LISTOPS_LRA)}
PAPER_GRAMMARS = ("boolean", "arithmetic", "listops")  # the paper's three tasks


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
    """The exact value of expression ``e`` (the oracle): a literal is its value, a node
    ``(op, children)`` is ``op`` applied to its children's values in order.

    Iterative (an explicit stack, post-order), so any depth the parser accepts evaluates; it
    equals the recursive definition :func:`evaluate_reference` (tests compare them)."""
    if not isinstance(e, tuple):
        return int(e)
    values: list[int] = []                    # values of finished subtrees, left to right
    stack: list[tuple[Expr, bool]] = [(e, False)]  # (node, its children are already on values)
    while stack:
        node, ready = stack.pop()
        if not isinstance(node, tuple):
            values.append(int(node))
            continue
        op, children = node
        if ready:
            cut = len(values) - len(children)
            args = values[cut:]
            del values[cut:]
            values.append(g.apply(op, args))
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(children))
    return values[0]


def evaluate_reference(g: Grammar, e: Expr) -> int:
    """The recursive definition of :func:`evaluate` (plain reference; deep trees exceed Python's
    recursion limit)."""
    if not isinstance(e, tuple):
        return int(e)
    op, children = e
    return g.apply(op, [evaluate_reference(g, c) for c in children])


def _literal_symbol(g: Grammar, value) -> str:
    return str(value) if g.name != "boolean" else ("1" if value else "0")


def to_symbols(g: Grammar, e: Expr) -> list[str]:
    """Fully parenthesised token symbols; ListOps gets a BLANK after every ``)``.

    A node is ``( op child`` (prefix, and unary infix) or ``( left op right`` (binary infix),
    then ``)``. Iterative (an explicit stack of pending symbols and subtrees), so deep trees
    need no recursion."""
    out: list[str] = []
    close = [")"] + ([BLANK_SYMBOL] if g.blank_after_close else [])
    stack: list = [e]  # pending items, last = next; a str is a symbol, anything else a subtree
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif not isinstance(item, tuple):
            out.append(_literal_symbol(g, item))
        else:
            op, children = item
            if g.notation == "prefix" or len(children) == 1:
                body = [op, *children]
            else:
                body = [children[0], op, children[1]]
            stack.extend(reversed(["(", *body, *close]))
    return out


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
