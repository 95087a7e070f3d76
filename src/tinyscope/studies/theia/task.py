"""Kleene three-valued logic (strong K3) over four domains, and the mod-3 chain (THEIA, Li 2026).

Truth values are coded ``F = 0, T = 1, U = 2`` everywhere in tinyscope (the 4-domain labels of
the paper's code). Strong Kleene logic reads them as truth degrees ``F = 0 < U = 1/2 < T = 1``::

    NOT x = 1 - x      x AND y = min(x, y)      x OR y = max(x, y)
    x -> y = max(1 - x, y)      x <-> y = min(x -> y, y -> x)      x XOR y = NOT (x <-> y)

One record (seed003-details Sec. 1.1) is a fixed set of fields, flattened into 31 integers::

    [a, b, arith, d, rel, S_0 .. S_20, logic, a_unk, b_unk, d_unk, s_unk]

(the column constants ``COL_*`` and :func:`split_record` define this layout once; the models
import them), and its label is the chain  c = arith(a, b);  val_ord = rel(c, d);  val_set = [c in S];
label = logic(val_ord, val_set), where Unknown propagates as a Boolean OR of the flags
(c is U if a or b is; val_ord is U if c or d is; val_set is U if c or S is).

Two record variants exist (:class:`RecordSpec`): the 4-domain data (``FOUR_DOMAIN``: a, b in
1..20, clamped arithmetic with SUB = |a - b|) and the chain data of Sec. 4.4 (``CHAIN``: a, b in
0..19, signed unclamped arithmetic, another relation order, set index ``c mod 21``). The public
chain code departs from strong Kleene logic in two places (U -> T evaluates to U; XOR replaces
NOT); tinyscope follows the logic by default and offers the code's behaviour as
``logic="public_code"``.

The mod-3 chain: y_0 = local_0, y_t = (y_{t-1} + local_t) mod 3, with local_t the K3 label of
step t's fresh record. The chain code codes ``F = 0, U = 1, T = 2``; relabelling T <-> U is
negation mod 3, an automorphism of Z/3, so the chain labels in either code are the same
sequence up to that relabelling.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.tasks.base import Batch, fingerprint

F_, T_, U_ = 0, 1, 2
VALUE_NAMES = ("F", "T", "U")
DEGREE = np.array([0.0, 1.0, 0.5])          # truth degree of each code
N_FIELDS = 31                              # flat record width
SET_SIZE = 21
COL_A, COL_B, COL_ARITH, COL_D, COL_REL = 0, 1, 2, 3, 4
COL_SET_START = 5                          # S_i sits at column COL_SET_START + i
COL_SET = slice(COL_SET_START, COL_SET_START + SET_SIZE)
COL_LOGIC = 26
COL_A_UNK, COL_B_UNK, COL_D_UNK, COL_S_UNK = 27, 28, 29, 30
COL_FLAGS = slice(COL_A_UNK, COL_S_UNK + 1)  # a_unk, b_unk, d_unk, s_unk
FLAG_NAMES = ("a_unk", "b_unk", "d_unk", "s_unk")

ARITH_OPS = ("ADD", "SUB", "MUL", "MOD")   # chain data: ADD, SUB (signed), MUL, DIV (floor)
KLEENE_OPS = ("AND", "OR", "NOT", "IMPLIES", "IFF")
PUBLIC_CHAIN_OPS = ("AND", "OR", "IMPLIES", "IFF", "XOR")
SYMBOL = {"AND": "∧", "OR": "∨", "IMPLIES": "→", "IFF": "↔", "XOR": "⊕", "NOT": "¬"}


# ------------------------------------------------------------------ K3 truth tables
def _from_degree(x: np.ndarray) -> np.ndarray:
    """Code of a truth degree in {0, 1/2, 1}."""
    return np.where(x == 1.0, T_, np.where(x == 0.0, F_, U_))


def kleene_direct(op: str, x: int, y: int = F_) -> int:
    """Strong Kleene value of ``op(x, y)`` from its definition on degrees (min / max / 1 - x)."""
    p, q = float(DEGREE[x]), float(DEGREE[y])
    value = {"AND": min(p, q), "OR": max(p, q), "NOT": 1.0 - p, "IMPLIES": max(1.0 - p, q),
             "IFF": min(max(1.0 - p, q), max(1.0 - q, p)),
             "XOR": 1.0 - min(max(1.0 - p, q), max(1.0 - q, p))}[op]
    return int(_from_degree(np.array(value)))


def _table(op: str) -> np.ndarray:
    """(3, 3) table ``[x, y] -> op(x, y)`` built from the degree arithmetic, vectorised."""
    p, q = np.meshgrid(DEGREE, DEGREE, indexing="ij")  # (3, 3)
    value = {"AND": np.minimum(p, q), "OR": np.maximum(p, q), "NOT": 1.0 - p,
             "IMPLIES": np.maximum(1.0 - p, q),
             "IFF": np.minimum(np.maximum(1.0 - p, q), np.maximum(1.0 - q, p))}
    value["XOR"] = 1.0 - value["IFF"]
    return _from_degree(value[op]).astype(np.int64)


TABLES: dict[str, np.ndarray] = {op: _table(op) for op in KLEENE_OPS + ("XOR",)}
# The public chain generator's IMPLIES: U -> T gives U (strong Kleene gives T).
PUBLIC_IMPLIES = TABLES["IMPLIES"].copy()
PUBLIC_IMPLIES[U_, T_] = U_


def logic_tables(logic: str) -> tuple[tuple[str, ...], np.ndarray]:
    """Operator names and the stacked (n_ops, 3, 3) tables of a logic ("kleene" | "public_code")."""
    check_choice("logic", logic, ("kleene", "public_code"))
    if logic == "kleene":
        return KLEENE_OPS, np.stack([TABLES[o] for o in KLEENE_OPS])
    tables = [PUBLIC_IMPLIES if o == "IMPLIES" else TABLES[o] for o in PUBLIC_CHAIN_OPS]
    return PUBLIC_CHAIN_OPS, np.stack(tables)


# ------------------------------------------------------------------ records
@dataclass(frozen=True)
class RecordSpec:
    """Which record distribution: number ranges, arithmetic, relation order, set index, logic.

    arith:      "clamped" (ADD min(a+b,20), SUB |a-b|, MUL min(ab,20), MOD a mod b, c in [0,20])
                or "raw" (a+b, a-b, a*b, a//b with b=0 read as 1; the chain data).
    relations:  relation names by index; the 4-domain order is GT LT EQ GTE LTE NEQ, the chain's
                GT LT GTE LTE EQ NEQ.
    set_index:  "clamped" (S[c], c already in [0,20]) or "mod21" (S[c mod 21]).
    logic:      "kleene" (AND OR NOT IMPLIES IFF, strong K3) or "public_code" (AND OR IMPLIES IFF
                XOR with U -> T = U, as the public chain generator).
    """

    a_range: tuple[int, int] = (1, 20)
    d_range: tuple[int, int] = (0, 20)
    arith: Literal["clamped", "raw"] = "clamped"
    relations: tuple[str, ...] = ("GT", "LT", "EQ", "GTE", "LTE", "NEQ")
    set_index: Literal["clamped", "mod21"] = "clamped"
    logic: Literal["kleene", "public_code"] = "kleene"
    p_unk: float = 0.15

    def __post_init__(self):
        check_choice("arith", self.arith, ("clamped", "raw"))
        check_choice("set_index", self.set_index, ("clamped", "mod21"))
        check_choice("logic", self.logic, ("kleene", "public_code"))
        check(0.0 <= self.p_unk <= 1.0, f"p_unk={self.p_unk} must lie in [0, 1]")
        check(sorted(self.relations) == sorted(RELATIONS), f"relations={self.relations} must order {RELATIONS}")

    @property
    def ops(self) -> tuple[str, ...]:
        return logic_tables(self.logic)[0]


RELATIONS = ("GT", "LT", "EQ", "GTE", "LTE", "NEQ")
_COMPARE = {"GT": np.greater, "LT": np.less, "EQ": np.equal, "GTE": np.greater_equal,
            "LTE": np.less_equal, "NEQ": np.not_equal}

FOUR_DOMAIN = RecordSpec()
CHAIN = RecordSpec(a_range=(0, 19), arith="raw", relations=("GT", "LT", "GTE", "LTE", "EQ", "NEQ"),
                   set_index="mod21")


def arithmetic(a: np.ndarray, b: np.ndarray, arith: np.ndarray, kind: str) -> np.ndarray:
    """c = arith(a, b) per record (see :class:`RecordSpec`)."""
    if kind == "clamped":
        c = np.select([arith == 0, arith == 1, arith == 2],
                      [np.minimum(a + b, 20), np.abs(a - b), np.minimum(a * b, 20)],
                      a % np.maximum(b, 1))
        return np.clip(c, 0, 20)
    return np.select([arith == 0, arith == 1, arith == 2], [a + b, a - b, a * b], a // np.where(b == 0, 1, b))


def split_record(x, number_scale: float = 1.0) -> dict:
    """The fields of flat records ``x`` (N, 31), a numpy array or a torch tensor (the same kind
    comes back; this module imports no torch): the numbers ``a``, ``b``, ``d`` (N,) as float32
    times ``number_scale``; ``arith``, ``rel`` and the logic operator ``op`` (N,) as int64; the
    set ``S`` (N, 21) as float32 bits; the flags ``a_unk``, ``b_unk``, ``d_unk``, ``s_unk`` (N,)
    as bool. The one reader of the record layout that the models share."""
    if isinstance(x, np.ndarray):
        x = x.astype(np.int64)
        as_float, as_bool = (lambda v: v.astype(np.float32)), (lambda v: v.astype(bool))
    else:  # a torch tensor
        x = x.long()
        as_float, as_bool = (lambda v: v.float()), (lambda v: v.bool())
    return {"a": as_float(x[:, COL_A]) * number_scale, "b": as_float(x[:, COL_B]) * number_scale,
            "arith": x[:, COL_ARITH], "d": as_float(x[:, COL_D]) * number_scale, "rel": x[:, COL_REL],
            "S": as_float(x[:, COL_SET]), "op": x[:, COL_LOGIC],
            "a_unk": as_bool(x[:, COL_A_UNK]), "b_unk": as_bool(x[:, COL_B_UNK]),
            "d_unk": as_bool(x[:, COL_D_UNK]), "s_unk": as_bool(x[:, COL_S_UNK])}


def evaluate_records(x: np.ndarray, spec: RecordSpec = FOUR_DOMAIN) -> dict[str, np.ndarray]:
    """The domain values of flat records ``x`` (N, 31): c, the three verdicts and the label."""
    a, b, arith, d, rel = (x[:, k] for k in (COL_A, COL_B, COL_ARITH, COL_D, COL_REL))
    S, op = x[:, COL_SET], x[:, COL_LOGIC]
    a_unk, b_unk, d_unk, s_unk = (x[:, col].astype(bool) for col in (COL_A_UNK, COL_B_UNK, COL_D_UNK, COL_S_UNK))
    c = arithmetic(a, b, arith, spec.arith)
    c_unk = a_unk | b_unk
    holds = np.zeros(len(x), dtype=bool)
    for r, name in enumerate(spec.relations):
        holds = np.where(rel == r, _COMPARE[name](c, d), holds)
    val_ord = np.where(c_unk | d_unk, U_, np.where(holds, T_, F_))
    idx = np.mod(c, SET_SIZE) if spec.set_index == "mod21" else np.clip(c, 0, SET_SIZE - 1)
    member = S[np.arange(len(x)), idx].astype(bool)
    val_set = np.where(c_unk | s_unk, U_, np.where(member, T_, F_))
    tables = logic_tables(spec.logic)[1]
    label = tables[op, val_ord, val_set]
    return {"c": c, "c_unk": c_unk, "val_ord": val_ord, "val_set": val_set, "label": label}


def sample_records(rng: np.random.Generator, n: int, spec: RecordSpec = FOUR_DOMAIN) -> np.ndarray:
    """``n`` flat records (N, 31) int64 drawn i.i.d. (Sec. 1.1)."""
    lo, hi = spec.a_range
    x = np.empty((n, N_FIELDS), dtype=np.int64)
    x[:, COL_A] = rng.integers(lo, hi + 1, n)
    x[:, COL_B] = rng.integers(lo, hi + 1, n)
    x[:, COL_ARITH] = rng.integers(0, len(ARITH_OPS), n)
    x[:, COL_D] = rng.integers(spec.d_range[0], spec.d_range[1] + 1, n)
    x[:, COL_REL] = rng.integers(0, len(RELATIONS), n)
    x[:, COL_SET] = rng.integers(0, 2, (n, SET_SIZE))
    x[:, COL_LOGIC] = rng.integers(0, len(spec.ops), n)
    x[:, COL_FLAGS] = rng.random((n, 4)) < spec.p_unk
    return x


def records_batch(x: np.ndarray, spec: RecordSpec = FOUR_DOMAIN) -> Batch:
    """A Batch whose tokens are the flat records; the label sits in ``meta["label"]`` and at
    ``targets[:, -1]`` (the only position ``loss_mask`` marks)."""
    values = evaluate_records(x, spec)
    targets = np.zeros_like(x)
    targets[:, -1] = values["label"]
    mask = np.zeros(x.shape, dtype=bool)
    mask[:, -1] = True
    return Batch(x, targets, mask, meta={"label": values["label"]})


# ------------------------------------------------------------------ diagnostic harnesses
@dataclass(frozen=True)
class Rule:
    op: str
    va: int
    vb: int          # ignored by NOT

    @property
    def name(self) -> str:
        if self.op == "NOT":
            return f"¬{VALUE_NAMES[self.va]}"
        return f"{VALUE_NAMES[self.va]}{SYMBOL[self.op]}{VALUE_NAMES[self.vb]}"

    def expected(self, logic: str = "kleene") -> int:
        ops, tables = logic_tables(logic)
        return int(tables[ops.index(self.op), self.va, self.vb])


RULES_12 = tuple(Rule(op, va, vb) for op, va, vb in [
    ("AND", F_, U_), ("AND", T_, U_), ("AND", U_, F_), ("AND", U_, T_),
    ("OR", T_, U_), ("OR", F_, U_), ("OR", U_, T_), ("OR", U_, F_),
    ("IMPLIES", F_, U_), ("IMPLIES", T_, U_),
    ("IFF", T_, U_), ("IFF", F_, U_)])
RULES_39 = tuple([Rule(op, va, vb) for op in ("AND", "OR", "IMPLIES", "IFF") for va in (F_, T_, U_)
                  for vb in (F_, T_, U_)] + [Rule("NOT", va, F_) for va in (F_, T_, U_)])


HARNESSES = ("tinyscope", "authors")


def force_rule(rng: np.random.Generator, n: int, rule: Rule, spec: RecordSpec = FOUR_DOMAIN,
               false_via: Literal["LT", "GT"] = "LT", harness: str = "tinyscope") -> np.ndarray:
    """``n`` records whose operands are forced to ``rule``'s values (the doubly fixed harness).

    a and b are never Unknown, so c is known. val_ord = T by GTE with d = max(0, c-1); F by LT
    with d = c (``false_via="GT"``: GT with d = min(c+1, 20), the 12-rule script's choice); U by
    d_unk. val_set = T / F by setting S[c] to 1 / 0, U by s_unk.

    ``harness="tinyscope"``: a U order operand keeps the drawn d and relation; NOT draws the set
    operand freely (s_unk too). ``harness="authors"`` (the code's ``kleene_full_diagnostic``):
    a U order operand has rel = GTE and d = max(0, c-1) besides d_unk; NOT fixes val_set = T
    (S[c] = 1, s_unk = 0); every flag not forced is 0.
    """
    check(spec.arith == "clamped", "the harness forces operands on the 4-domain records (arith='clamped')")
    check_choice("harness", harness, HARNESSES)
    x = sample_records(rng, n, spec)
    x[:, COL_LOGIC] = spec.ops.index(rule.op)
    x[:, COL_A_UNK] = x[:, COL_B_UNK] = 0
    c = arithmetic(x[:, COL_A], x[:, COL_B], x[:, COL_ARITH], spec.arith)
    rel_of = {name: i for i, name in enumerate(spec.relations)}
    x[:, COL_D_UNK] = rule.va == U_
    if rule.va == T_ or (rule.va == U_ and harness == "authors"):
        x[:, COL_REL], x[:, COL_D] = rel_of["GTE"], np.maximum(0, c - 1)
    elif rule.va == F_ and false_via == "LT":
        x[:, COL_REL], x[:, COL_D] = rel_of["LT"], c
    elif rule.va == F_:
        x[:, COL_REL], x[:, COL_D] = rel_of["GT"], np.minimum(c + 1, 20)
    vb = T_ if rule.op == "NOT" and harness == "authors" else rule.vb
    if rule.op != "NOT" or harness == "authors":
        x[:, COL_S_UNK] = vb == U_
        if vb != U_:
            x[np.arange(n), COL_SET_START + c] = int(vb == T_)
    return x


def rule_seed(rule: Rule, seed: int, index: int, harness: str) -> list[int]:
    """The generator seed of a rule's records: ``(seed, index)`` in tinyscope's harness; in the
    authors', ``(seed, op*9 + va*3 + vb)`` for a binary rule and ``(seed, 100 + va)`` for NOT, with
    the code's operator index (AND 0, OR 1, NOT 2, IMPLIES 3, IFF 4). The code seeds a torch
    generator with the bare number; its draws cannot be replayed in numpy, so the records are
    the same distribution, not the same bytes."""
    if harness == "tinyscope":
        return [seed, index]
    if rule.op == "NOT":
        return [seed, 100 + rule.va]
    return [seed, KLEENE_OPS.index(rule.op) * 9 + rule.va * 3 + rule.vb]


def rule_suite(rules: tuple[Rule, ...], n_per_rule: int, seed: int, spec: RecordSpec = FOUR_DOMAIN,
               false_via: Literal["LT", "GT"] = "LT", harness: str = "tinyscope") -> list[tuple[Rule, np.ndarray]]:
    """Forced records for each rule, rule ``i``'s generator seeded by :func:`rule_seed`."""
    return [(rule, force_rule(np.random.default_rng(rule_seed(rule, seed, i, harness)), n_per_rule, rule, spec,
                              false_via, harness))
            for i, rule in enumerate(rules)]


# ------------------------------------------------------------------ Bayes ceilings of the probes
BOUNDARY_VISIBLE = {  # what each boundary can know about the flags: the Unknown-ness it carries
    "arith": lambda f: (f[0] | f[1],),
    "order": lambda f: (f[0] | f[1], f[2]),
    "set": lambda f: (f[0] | f[1], f[3]),
    "logic": lambda f: tuple(f),
}


def has_unknown_ceiling(boundary: str, p_unk: float = 0.15) -> float:
    """Exact Bayes accuracy of predicting Has-Unknown (OR of the four flags) from what a boundary
    sees of the flags, by enumerating the 16 flag patterns: sum over observations of the larger
    of P(obs, HU) and P(obs, not HU). 0.7995 / 0.9079 / 0.9079 / 1.0 at P_unk = 0.15."""
    check_choice("boundary", boundary, tuple(BOUNDARY_VISIBLE))
    joint: dict[tuple, list[float]] = {}
    for pattern in range(16):
        f = tuple(bool(pattern >> k & 1) for k in range(4))
        p = float(np.prod([p_unk if v else 1 - p_unk for v in f]))
        obs = BOUNDARY_VISIBLE[boundary](f)
        joint.setdefault(obs, [0.0, 0.0])[int(any(f))] += p
    return sum(max(v) for v in joint.values())


# ------------------------------------------------------------------ the mod-3 chain
def chain_labels(local: np.ndarray) -> np.ndarray:
    """y_0 = local_0, y_t = (y_{t-1} + local_t) mod 3 over the last axis (codes F=0, T=1, U=2)."""
    return np.cumsum(local, axis=-1) % 3


def sample_chains(rng: np.random.Generator, n: int, steps: int, spec: RecordSpec = CHAIN) -> dict[str, np.ndarray]:
    """``n`` chains of ``steps`` fresh records: records (N, steps, 31), local (N, steps) K3 values,
    labels (N, steps) running sums mod 3."""
    x = sample_records(rng, n * steps, spec)
    local = evaluate_records(x, spec)["label"].reshape(n, steps)
    return {"records": x.reshape(n, steps, N_FIELDS), "local": local, "labels": chain_labels(local)}


# ------------------------------------------------------------------ the task object
@dataclass
class KleeneConfig:
    """The 4-domain task: records drawn fresh per step from the seed (``n_train=0``) or from a
    fixed pool of ``n_train`` records; a fixed test set of ``n_test`` records, drawn from
    ``data_seed`` or, when ``eval_seed`` is set, afresh from it (`tinyscope eval RUN --seed S`)."""

    variant: Literal["four_domain", "chain"] = "four_domain"
    p_unk: float = 0.15
    logic: Literal["kleene", "public_code"] = "kleene"
    n_train: int = 0                 # 0 = a fresh batch each step; the paper: 1.6M fixed records
    n_test: int = 20_000             # the paper: 400k (20% of 2M)
    data_seed: int = 1234
    eval_seed: int | None = None     # None: the test records of data_seed; S: a fresh test set drawn from S

    def __post_init__(self):
        check_choice("task.variant", self.variant, ("four_domain", "chain"))
        check_choice("task.logic", self.logic, ("kleene", "public_code"))
        check(0.0 <= self.p_unk <= 1.0, f"task.p_unk={self.p_unk} must lie in [0, 1]")
        check(self.n_train >= 0, f"task.n_train={self.n_train} must be >= 0 (0 = fresh data each step)")
        check(self.n_test >= 1, f"task.n_test={self.n_test} must be >= 1")
        check(self.eval_seed is None or self.eval_seed >= 0, f"task.eval_seed={self.eval_seed} must be None or >= 0")

    @property
    def spec(self) -> RecordSpec:
        base = FOUR_DOMAIN if self.variant == "four_domain" else CHAIN
        return RecordSpec(**{**base.__dict__, "p_unk": self.p_unk, "logic": self.logic})


@dataclass
class KleeneTask:
    cfg: KleeneConfig = field(default_factory=KleeneConfig)
    vocab_size: int = 3

    def __post_init__(self):
        self.spec = self.cfg.spec
        self._pool = (sample_records(np.random.default_rng([self.cfg.data_seed, 0]), self.cfg.n_train, self.spec)
                      if self.cfg.n_train else None)
        test_seed = [self.cfg.data_seed, 1] if self.cfg.eval_seed is None else [self.cfg.eval_seed, 1, 1]
        self._test = records_batch(sample_records(np.random.default_rng(test_seed), self.cfg.n_test, self.spec),
                                   self.spec)

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        if self._pool is None:
            return records_batch(sample_records(rng, batch_size, self.spec), self.spec)
        return records_batch(self._pool[rng.integers(0, len(self._pool), batch_size)], self.spec)

    def test_set(self) -> Batch:
        return self._test

    def eval_fingerprint(self) -> str:
        return fingerprint(self._test.tokens, self._test.meta["label"])
