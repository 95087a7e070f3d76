"""THEIA diagnostics (seed003-details Sec. 1.2, 1.6, 1.7): per-rule accuracy tables, probes at the
four engine boundaries beside their exact Bayes ceilings, activation patching on matched OR /
AND pairs, and chain accuracy by length.

Models are read through hook names only: ``arith.hook_out`` (c_vec), ``order.hook_out``
(ord_vec), ``set.hook_out`` (set_vec) and ``logic.hook_out`` (logic_vec).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from tinyscope.errors import CheckpointError
from tinyscope.studies.theia.model import predict
from tinyscope.studies.theia.task import (
    CHAIN,
    FOUR_DOMAIN,
    T_,
    U_,
    RecordSpec,
    Rule,
    evaluate_records,
    has_unknown_ceiling,
    rule_suite,
    sample_chains,
    sample_records,
)

BOUNDARIES = {"arith": "arith.hook_out", "order": "order.hook_out", "set": "set.hook_out", "logic": "logic.hook_out"}


# ------------------------------------------------------------------ per-rule tables
def rule_accuracies(model: torch.nn.Module, rules: tuple[Rule, ...], n_per_rule: int, seed: int = 0,
                    spec: RecordSpec = FOUR_DOMAIN, false_via: Literal["LT", "GT"] = "LT",
                    harness: str = "tinyscope") -> dict[str, float]:
    """Accuracy of ``model`` on each rule's forced records, keyed by the rule's name (e.g. "F∧U");
    ``harness``: see :func:`~tinyscope.studies.theia.task.force_rule`."""
    suite = rule_suite(rules, n_per_rule, seed, spec, false_via, harness)
    x = torch.from_numpy(np.concatenate([xs for _, xs in suite]))  # (R*n, 31)
    pred = predict(model, x).numpy().reshape(len(rules), n_per_rule)  # (R, n)
    return {rule.name: float(np.mean(pred[i] == rule.expected(spec.logic))) for i, (rule, _) in enumerate(suite)}


def rules_passed(acc: dict[str, float], threshold: float = 0.99) -> int:
    return sum(v > threshold for v in acc.values())


def rule_table(per_seed: dict[int, dict[str, float]], threshold: float = 0.99) -> str:
    """Markdown table: one row per rule, one column per seed, accuracies in %, a mark where a
    rule fails ``threshold``; last row counts the passing rules."""
    seeds = sorted(per_seed)
    rules = list(per_seed[seeds[0]])
    lines = ["| rule | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---|" + "---|" * len(seeds)]
    for r in rules:
        cells = [f"{100 * per_seed[s][r]:.2f}" + ("" if per_seed[s][r] > threshold else " ✗") for s in seeds]
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    lines.append("| passed | " + " | ".join(f"{rules_passed(per_seed[s], threshold)}/{len(rules)}" for s in seeds) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------ probes
def boundary_states(model: torch.nn.Module, x: np.ndarray, batch: int = 8192) -> dict[str, np.ndarray]:
    """Hidden states (N, D) at the four boundaries for records ``x``."""
    was = model.training
    model.eval()
    out: dict[str, list[np.ndarray]] = {b: [] for b in BOUNDARIES}
    with torch.no_grad():
        for i in range(0, len(x), batch):
            _, cache = model.run_with_cache(torch.from_numpy(x[i:i + batch]), names_filter=list(BOUNDARIES.values()))
            for b, hook in BOUNDARIES.items():
                out[b].append(cache[hook].float().numpy())
    model.train(was)
    return {b: np.concatenate(v) for b, v in out.items()}


def _split(n: int, split: tuple[float, float]) -> tuple[int, int]:
    """Ends of the train and validation parts of ``n`` records in order (the rest is test)."""
    return int(split[0] * n), int((split[0] + split[1]) * n)


def linear_probe(h: np.ndarray, y: np.ndarray, split: tuple[float, float] = (0.6, 0.2),
                 Cs: tuple[float, ...] = (0.1, 1.0, 10.0), seed: int = 0) -> float:
    """StandardScaler + LinearSVC, C chosen on the validation part; test accuracy."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    a, b = _split(len(y), split)
    best, best_val = None, -1.0
    for C in Cs:
        clf = make_pipeline(StandardScaler(), LinearSVC(C=C, max_iter=2000, random_state=seed))
        clf.fit(h[:a], y[:a])
        val = clf.score(h[a:b], y[a:b])
        if val > best_val:
            best, best_val = clf, val
    return float(best.score(h[b:], y[b:]))


def mlp_probe(h: np.ndarray, y: np.ndarray, split: tuple[float, float] = (0.6, 0.2), epochs: int = 40,
              batch: int = 2048, seed: int = 0, hidden: int = 256) -> float:
    """The code's MLP probe: Linear(D, 256) -> GELU -> Dropout(0.1) -> Linear(256, 256) -> GELU ->
    Dropout(0.1) -> Linear(256, n_classes) on standardised features; AdamW 1e-3, weight decay
    0.01, ``epochs`` epochs of batch ``batch`` with a cosine schedule; the test accuracy of the
    epoch with the best validation accuracy."""
    from torch import nn

    a, b = _split(len(y), split)
    mu, sd = h[:a].mean(0), h[:a].std(0) + 1e-6
    x = torch.from_numpy(((h - mu) / sd).astype(np.float32))  # (N, D)
    t = torch.from_numpy(y.astype(np.int64))  # (N,)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.GELU(), nn.Dropout(0.1), nn.Linear(hidden, hidden),
                            nn.GELU(), nn.Dropout(0.1), nn.Linear(hidden, int(t.max()) + 1))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    best_val, best_test = -1.0, 0.0
    for _ in range(epochs):
        net.train()
        for idx in torch.randperm(a, generator=gen).split(batch):
            loss = torch.nn.functional.cross_entropy(net(x[idx]), t[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        net.eval()
        with torch.no_grad():
            pred = net(x[a:]).argmax(-1)  # (N - a,)
        val, test = (pred[:b - a] == t[a:b]).float().mean().item(), (pred[b - a:] == t[b:]).float().mean().item()
        if val > best_val:
            best_val, best_test = val, test
    return float(best_test)


def has_unknown_sample_ceiling(x: np.ndarray, boundary: str, split: tuple[float, float] = (0.6, 0.2)) -> float:
    """The Bayes rule's Has-Unknown accuracy on the test part of the probe's own records ``x``:
    predict "Unknown" exactly when a flag the boundary sees is set. The exact ceiling
    (:func:`~tinyscope.studies.theia.task.has_unknown_ceiling`) is its expectation; on a finite
    test part it scatters around it with SD sqrt(p (1 - p) / n_test)."""
    from tinyscope.studies.theia.task import BOUNDARY_VISIBLE, COL_FLAGS

    flags = x[:, COL_FLAGS].astype(bool)  # (N, 4)
    seen = np.any(np.stack(BOUNDARY_VISIBLE[boundary](tuple(flags.T)), -1), -1)  # (N,)
    b = _split(len(x), split)[1]
    return float(np.mean(seen[b:] == flags[b:].any(1)))


@dataclass
class ProbeRow:
    boundary: str
    has_unknown: float          # linear probe (LinearSVC), test accuracy
    has_unknown_ceiling: float  # exact Bayes ceiling (population)
    verdict: float              # linear probe of the 3-way label
    has_unknown_mlp: float = float("nan")
    verdict_mlp: float = float("nan")
    sample_ceiling: float = float("nan")   # the Bayes rule on this test part

    def line(self) -> str:
        return (f"| {self.boundary} | {100 * self.has_unknown:.1f} | {100 * self.has_unknown_mlp:.1f} | "
                f"{100 * self.has_unknown_ceiling:.2f} | {100 * self.sample_ceiling:.2f} | {100 * self.verdict:.1f} | "
                f"{100 * self.verdict_mlp:.1f} |")


def probe_records(n: int = 50_000, seed: int = 999, p_unk: float = 0.15) -> np.ndarray:
    """The probes' ``n`` fresh 4-domain records from data seed ``seed`` (Sec. 1.7)."""
    spec = RecordSpec(**{**FOUR_DOMAIN.__dict__, "p_unk": p_unk})
    return sample_records(np.random.default_rng(seed), n, spec)


def probe_boundaries(model: torch.nn.Module, n: int = 50_000, seed: int = 999, p_unk: float = 0.15,
                     mlp: bool = True, verdict: bool = True) -> list[ProbeRow]:
    """Has-Unknown (OR of the four flags) and, with ``verdict``, verdict (the 3-way label) probes
    at each boundary on ``n`` fresh records split 60/20/20 (Sec. 1.7): the linear SVM and, with
    ``mlp``, the MLP probe; beside the exact Has-Unknown Bayes ceiling and the Bayes rule on the
    test part. A probe not fitted reads nan."""
    spec = RecordSpec(**{**FOUR_DOMAIN.__dict__, "p_unk": p_unk})
    x = probe_records(n, seed, p_unk)
    hu = x[:, 27:31].any(1).astype(np.int64)
    label = evaluate_records(x, spec)["label"]
    states = boundary_states(model, x)
    nan = float("nan")
    rows = []
    for b in BOUNDARIES:
        h = states[b]
        rows.append(ProbeRow(b, linear_probe(h, hu), has_unknown_ceiling(b, p_unk),
                             linear_probe(h, label) if verdict else nan,
                             has_unknown_mlp=mlp_probe(h, hu) if mlp else nan,
                             verdict_mlp=mlp_probe(h, label) if mlp and verdict else nan,
                             sample_ceiling=has_unknown_sample_ceiling(x, b)))
    return rows


def probe_metrics(rows: list[ProbeRow]) -> dict[str, float]:
    """The probe rows as flat metrics: ``probe_hu/<b>``, ``probe_hu_mlp/<b>``, ``probe_hu_ceiling/<b>``,
    ``probe_hu_sample_ceiling/<b>``, ``probe_verdict/<b>``, ``probe_verdict_mlp/<b>``."""
    out: dict[str, float] = {}
    for r in rows:
        out |= {f"probe_hu/{r.boundary}": r.has_unknown, f"probe_hu_mlp/{r.boundary}": r.has_unknown_mlp,
                f"probe_hu_ceiling/{r.boundary}": r.has_unknown_ceiling,
                f"probe_hu_sample_ceiling/{r.boundary}": r.sample_ceiling,
                f"probe_verdict/{r.boundary}": r.verdict, f"probe_verdict_mlp/{r.boundary}": r.verdict_mlp}
    return out


def probe_table(rows: list[ProbeRow]) -> str:
    head = ("| boundary | Has-Unknown SVM % | Has-Unknown MLP % | Bayes ceiling % | Bayes rule on the test part % | "
            "verdict SVM % | verdict MLP % |\n|---|---|---|---|---|---|---|")
    return "\n".join([head] + [r.line() for r in rows])


# ------------------------------------------------------------------ activation patching
def matched_pairs(rng: np.random.Generator, n: int, op: Literal["OR", "AND"] = "OR",
                  spec: RecordSpec = FOUR_DOMAIN) -> tuple[np.ndarray, np.ndarray]:
    """Matched (T-side, U-side) record pairs that differ only in d_unk (Sec. 1.7).

    ADD with a in [1, 18], b with c = a + b <= 19; rel = GTE; T side d = max(0, c - 1) so
    val_ord = T; U side d_unk = 1 so val_ord = U. OR: S has 1-5 bits, never bit c (val_set = F),
    outputs T∨F = T vs U∨F = U. AND: bit c is set as well (val_set = T), outputs T∧T = T vs U∧T = U.
    """
    a = rng.integers(1, 19, n)
    b = rng.integers(1, 20 - a)                     # a + b <= 19
    c = a + b
    x = np.zeros((n, 31), dtype=np.int64)
    x[:, 0], x[:, 1], x[:, 2] = a, b, 0
    x[:, 3], x[:, 4] = np.maximum(0, c - 1), spec.relations.index("GTE")
    for i in range(n):
        choices = np.delete(np.arange(21), c[i])
        x[i, 5 + rng.choice(choices, rng.integers(1, 6), replace=False)] = 1
    if op == "AND":
        x[np.arange(n), 5 + c] = 1
    x[:, 26] = spec.ops.index(op)
    u = x.copy()
    u[:, 29] = 1
    return x, u


@dataclass
class PatchResult:
    n_pairs: int        # pairs drawn
    n_kept: int         # both sides predicted correctly without patching
    n_flipped: int      # patched T side predicted U

    @property
    def flip_rate(self) -> float:
        return self.n_flipped / self.n_kept if self.n_kept else float("nan")


def patch_order_verdict(model: torch.nn.Module, n_pairs: int = 1000, seed: int = 12345,
                        op: Literal["OR", "AND"] = "OR") -> PatchResult:
    """Feed the U side's ord_vec (``order.hook_out``), with the T side's own set_vec, into the
    logic engine and head of the T side; count patched outputs predicted U."""
    t_side, u_side = matched_pairs(np.random.default_rng(seed), n_pairs, op)
    t_x, u_x = torch.from_numpy(t_side), torch.from_numpy(u_side)
    keep = ((predict(model, t_x) == T_) & (predict(model, u_x) == U_)).numpy()
    t_x, u_x = t_x[keep], u_x[keep]
    was = model.training
    model.eval()
    with torch.no_grad():
        _, cache = model.run_with_cache(u_x, names_filter="order.hook_out")
        u_ord = cache["order.hook_out"]
        with model.hooks([("order.hook_out", lambda h, hook: u_ord)]):
            patched = model.predict(t_x) if len(t_x) else torch.zeros(0, dtype=torch.long)
    model.train(was)
    return PatchResult(n_pairs, int(keep.sum()), int((patched == U_).sum()))


# ------------------------------------------------------------------ chain accuracy by length
CHAIN_LENGTHS = (5, 10, 50, 100, 500)


def chain_accuracy(chain_model: torch.nn.Module, lengths: tuple[int, ...] = CHAIN_LENGTHS, n: int = 10_000,
                   seed: int = 5000, spec: RecordSpec | None = None, independent: bool = False,
                   batch: int = 1024) -> dict[int, float]:
    """Final-step accuracy of a :class:`~tinyscope.studies.theia.model.ChainModel` on chains of each
    length (hard argmax one-hots between steps). ``independent=False`` reads every length off
    prefixes of one set of ``max(lengths)``-step chains (a prefix of a chain is itself a chain);
    ``True`` draws a fresh set per length, as the public script does."""
    spec = spec or CHAIN
    draws = [(L, (L,)) for L in lengths] if independent else [(max(lengths), tuple(lengths))]
    acc: dict[int, float] = {}
    was = chain_model.training
    chain_model.eval()
    with torch.no_grad():
        for L, read in draws:
            data = sample_chains(np.random.default_rng([seed, L if independent else 0]), n, L, spec)
            x, y = torch.from_numpy(data["records"]), torch.from_numpy(data["labels"])
            correct = torch.zeros(L)
            for i in range(0, n, batch):
                correct += (chain_model(x[i:i + batch]).argmax(-1) == y[i:i + batch]).sum(0).float()  # (L,)
            acc |= {length: float(correct[length - 1] / n) for length in read}
    chain_model.train(was)
    return acc


def chain_accuracy_from_step(step_acc: float, length: int) -> float:
    """Final-step accuracy of a chain of ``length`` steps with an exact transition and a step model
    that errs independently with probability e = 1 - step_acc, each error a uniformly random
    nonzero offset mod 3. The accumulated offset is a random walk on Z/3 whose nonzero Fourier
    modes shrink by 1 - e + e (w + w^2) / 2 = 1 - 3e/2 per step, so
    P(offset = 0) = 1/3 + (2/3) (1 - 3e/2)^length."""
    e = 1.0 - step_acc
    return 1 / 3 + (2 / 3) * (1 - 1.5 * e) ** length


def chain_figure(curves: dict[str, dict[int, float]]):
    """Accuracy against chain length (log x) for each model; chance (1/3) dashed."""
    from tinyscope.interp.mpl import plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6 + 0.22 * len(curves)))
    for name, acc in curves.items():
        L = sorted(acc)
        ax.plot(L, [100 * acc[k] for k in L], marker="o", label=name)
    ax.axhline(100 / 3, ls="--", c="gray", lw=1, label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("chain length (steps)")
    ax.set_ylabel("final-step accuracy (%)")
    ax.set_ylim(0, 102)
    ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
    ax.set_title("mod-3 chain: length generalisation")
    fig.tight_layout()
    return fig


def chain_table(curves: dict[str, dict[int, float]]) -> str:
    lengths = sorted({L for acc in curves.values() for L in acc})
    lines = ["| model | " + " | ".join(f"{L} steps" for L in lengths) + " |", "|---|" + "---|" * len(lengths)]
    for name, acc in curves.items():
        lines.append(f"| {name} | " + " | ".join(f"{100 * acc[L]:.2f}" if L in acc else "–" for L in lengths) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------ training time
def elapsed_across_resumes(metrics: list[dict]) -> list[tuple[dict, float]]:
    """Each evaluation record of a run's metrics.jsonl with its training time so far, the checks
    included: the trainer's clock (``time``: training time since step 0, carried across resumes)
    where the record has it. Older records have only ``elapsed_s``, which counts from the first
    check of its process and so restarts after a resume; there the training time the trainer
    restored (its ``time`` on the train record of the same step, logged just before the check) is
    added to the rest of that process's records."""
    out, offset, last, train_time = [], 0.0, -math.inf, {}
    for rec in metrics:
        if rec.get("split") == "train" and "time" in rec:
            train_time[rec.get("step")] = rec["time"]
        elif rec.get("split") == "eval" and rec.get("time") is not None:
            out.append((rec, float(rec["time"])))
        elif rec.get("split") == "eval" and rec.get("elapsed_s") is not None:
            if rec["elapsed_s"] < last:  # a new process: its clock started at this check
                if rec.get("step") not in train_time:
                    raise CheckpointError(f"metrics.jsonl: elapsed_s restarts at step {rec.get('step')} (a resume) "
                                          "and no train record of that step gives the time trained before it")
                offset = train_time[rec["step"]]
            last = rec["elapsed_s"]
            out.append((rec, offset + rec["elapsed_s"]))
    return out


def time_to_first_pass(metrics: list[dict], key: str = "rules12_passed", target: float = 12) -> float | None:
    """Seconds from the start of training to the first evaluation with ``key >= target`` (the
    paper's "time to the first 12/12"), read from a run's metrics.jsonl records, resumes
    included (:func:`elapsed_across_resumes`)."""
    for rec, elapsed in elapsed_across_resumes(metrics):
        if rec.get(key, -1) >= target:
            return elapsed
    return None


__all__ = ["rule_accuracies", "rules_passed", "rule_table", "probe_boundaries", "probe_metrics", "probe_table",
           "linear_probe", "mlp_probe", "has_unknown_sample_ceiling", "patch_order_verdict",
           "matched_pairs", "chain_accuracy", "chain_accuracy_from_step", "chain_figure", "chain_table",
           "time_to_first_pass", "elapsed_across_resumes"]
