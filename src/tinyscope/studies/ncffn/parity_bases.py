"""The NC-FFN parity probe: the smallest pure feed-forward stack of each basis that classifies
every N-bit input's parity correctly, for N in {4, 6, 8, 10} and depth 1-3, over seeds.

Each (basis, N, depth, width, seed) trains a :class:`FeedForwardStack` full-batch on all 2^N
inputs (Adam, BCE) until 100% accuracy or ``max_steps``; all widths and seeds of one (basis, N,
depth) train together as one batched model (:class:`BatchedStacks`). The minimum
parameter count of a basis is that of the smallest width solved by at least ``min_solved`` seeds
(default 1: the probe asks what a basis can represent and reach, so one success counts; the
table also gives the all-seeds minimum).

``benchmarks/ncffn/parity_bases.py`` runs the sweep and prints the table; :func:`plot_parity` draws
accuracy against parameters per basis.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from tinyscope.errors import check
from tinyscope.models.utils import count_parameters
from tinyscope.studies.ncffn.bit_parity import all_bits, parity, signed
from tinyscope.studies.ncffn.ffn_stack import PARITY_BASES, FeedForwardStack


@dataclass
class ParitySweepConfig:
    bases: list[str] = field(default_factory=lambda: list(PARITY_BASES))
    n_bits: list[int] = field(default_factory=lambda: [4, 6, 8, 10])
    depths: list[int] = field(default_factory=lambda: [1, 2, 3])
    widths: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 6, 8, 11, 16, 23, 32])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    max_steps: int = 2000
    lr: float = 3e-2
    check_every: int = 25
    min_solved: int = 1     # seeds that must reach 100% for a width to count as solved

    def __post_init__(self):
        check(all(b in PARITY_BASES for b in self.bases), f"bases={self.bases}: choose from {PARITY_BASES}")
        check(all(2 <= n <= 16 for n in self.n_bits), f"n_bits={self.n_bits} must lie in [2, 16]")
        check(all(d >= 1 for d in self.depths) and all(w >= 1 for w in self.widths), "depths and widths must be >= 1")
        check(1 <= self.min_solved <= len(self.seeds), f"min_solved={self.min_solved} must lie in [1, {len(self.seeds)}]")


class BatchedStacks(torch.nn.Module):
    """E feed-forward stacks of one basis and depth but different widths and seeds, trained as
    one batched model (the fast path of the sweep; :class:`FeedForwardStack` is the reference).

    Each layer's hidden channels are padded to the widest model and masked: a masked channel
    contributes nothing, gets zero gradient and so never moves under Adam. The weights are
    copied from real modules, so initialisation and parameter counts are exactly theirs.
    """

    def __init__(self, stacks: list[FeedForwardStack]):
        super().__init__()
        first = stacks[0]
        self.basis, self.depth = first.basis, first.depth
        self.gated = self.basis in ("swiglu", "bilinear")
        E, N = len(stacks), first.readout.in_features
        layers0 = [s.layers[0] for s in stacks]
        if self.gated:
            self.hs, self.hp = max(m.d_hidden for m in layers0), 0
        else:
            self.hs = max(getattr(m, "n_smooth", m.W_in.out_features) for m in layers0)
            self.hp = max(getattr(m, "n_pairs", 0) for m in layers0)
        h_in = 2 * self.hs if self.gated else self.hs + 2 * self.hp
        h_out = self.hs + 2 * self.hp
        self.W_in = torch.nn.Parameter(torch.zeros(self.depth, E, N, h_in))
        self.b_in = torch.nn.Parameter(torch.zeros(self.depth, E, 1, h_in))
        self.W_out = torch.nn.Parameter(torch.zeros(self.depth, E, h_out, N))
        self.b_out = torch.nn.Parameter(torch.zeros(self.depth, E, 1, N))
        self.register_buffer("mask", torch.zeros(self.depth, E, 1, h_out))
        self.w_read = torch.nn.Parameter(torch.stack([s.readout.weight.detach()[0] for s in stacks]).unsqueeze(-1))
        self.b_read = torch.nn.Parameter(torch.stack([s.readout.bias.detach() for s in stacks]).unsqueeze(-1))
        with torch.no_grad():
            for e, stack in enumerate(stacks):
                for l, m in enumerate(stack.layers):
                    rows_in, cols_out = self._channels(m)
                    self.W_in[l, e][:, rows_in] = m.W_in.weight.detach().T
                    self.b_in[l, e, 0, rows_in] = m.W_in.bias.detach()
                    self.W_out[l, e][cols_out] = m.W_out.weight.detach().T
                    self.b_out[l, e, 0] = m.W_out.bias.detach()
                    self.mask[l, e, 0, cols_out] = 1.0

    def _channels(self, m) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded positions of module m's input rows and output columns, in its own order."""
        if self.gated:
            w = torch.arange(m.d_hidden)
            return torch.cat([w, self.hs + w]), w
        s = getattr(m, "n_smooth", m.W_in.out_features)
        p = torch.arange(getattr(m, "n_pairs", 0))
        smooth = torch.arange(s)
        return (torch.cat([smooth, self.hs + p, self.hs + self.hp + p]),
                torch.cat([smooth, self.hs + p, self.hs + self.hp + p]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, N) shared by all models -> logits (E, B)."""
        x = x.unsqueeze(0).expand(self.W_in.shape[1], -1, -1)  # (E, B, N)
        for l in range(self.depth):
            h = torch.baddbmm(self.b_in[l], x, self.W_in[l])  # (E, B, h_in)
            if self.gated:
                g, v = h.split(self.hs, dim=-1)  # (E, B, hs) each
                post = (F.silu(g) if self.basis == "swiglu" else g) * v  # (E, B, hs)
            else:
                a = torch.sigmoid(h[..., self.hs:self.hs + self.hp])  # (E, B, hp)
                b = torch.sigmoid(h[..., self.hs + self.hp:])  # (E, B, hp)
                ab = a * b
                post = torch.cat([F.gelu(h[..., :self.hs]), ab, a - ab], dim=-1)  # (E, B, h_out)
            x = x + torch.baddbmm(self.b_out[l], post * self.mask[l], self.W_out[l])  # (E, B, N)
        return torch.baddbmm(self.b_read, x, self.w_read).squeeze(-1)  # (E, B)


def train_parity_batch(basis: str, n_bits: int, depth: int, widths: list[int], seeds: list[int],
                       max_steps: int = 2000, lr: float = 3e-2, check_every: int = 25) -> list[dict]:
    """Fit one stack per (width, seed) on all 2^N inputs at once; one result row per stack.

    Adam + cosine to 5% of ``lr``, BCE; a stack counts as solved at the first check with 100%
    accuracy (its row keeps that step; training of the others continues).
    """
    bits = all_bits(n_bits)
    x = torch.from_numpy(signed(bits))  # (2^N, N)
    y = torch.from_numpy(parity(bits)).float()  # (2^N,)
    specs = [(w, s) for w in widths for s in seeds]
    stacks = []
    for w, s in specs:
        torch.manual_seed(s)
        stacks.append(FeedForwardStack(n_bits, basis, w, depth))
    model = BatchedStacks(stacks)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max_steps, eta_min=lr * 0.05)
    E = len(specs)
    best = torch.zeros(E)
    solved_at = torch.full((E,), -1)
    for step in range(1, max_steps + 1):
        loss = F.binary_cross_entropy_with_logits(model(x), y.expand(E, -1), reduction="none").mean(1).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % check_every == 0 or step == max_steps:
            with torch.no_grad():
                acc = ((model(x) > 0).float() == y).float().mean(1)  # (E,)
            best = torch.maximum(best, torch.nan_to_num(acc))
            solved_at = torch.where((acc == 1.0) & (solved_at < 0), torch.tensor(step), solved_at)
            if bool((solved_at > 0).all()):
                break
    return [{"basis": basis, "n_bits": n_bits, "depth": depth, "width": w, "seed": s,
             "params": count_parameters(st), "accuracy": float(best[e]),
             "solved_at": int(solved_at[e])} for e, ((w, s), st) in enumerate(zip(specs, stacks))]


def parity_sweep(cfg: ParitySweepConfig, progress: bool = True) -> list[dict]:
    """Every (basis, N, depth) width ladder, all widths and seeds of a ladder trained together."""
    rows: list[dict] = []
    ladders = [(b, n, d) for n in cfg.n_bits for d in cfg.depths for b in cfg.bases]
    for basis, n, depth in tqdm(ladders, desc="parity", disable=not progress, leave=False):
        rows += train_parity_batch(basis, n, depth, cfg.widths, cfg.seeds, cfg.max_steps, cfg.lr, cfg.check_every)
    return rows


def min_params_table(rows: list[dict], min_solved: int = 1) -> list[dict]:
    """Per (N, depth, basis): the fewest parameters solved by >= ``min_solved`` seeds and by all."""
    out = []
    keys = sorted({(r["n_bits"], r["depth"], r["basis"]) for r in rows},
                  key=lambda k: (k[0], k[1], PARITY_BASES.index(k[2])))
    for n, depth, basis in keys:
        by_width: dict[int, list[dict]] = {}
        for r in rows:
            if (r["n_bits"], r["depth"], r["basis"]) == (n, depth, basis):
                by_width.setdefault(r["width"], []).append(r)
        solved = [(runs[0]["params"], w) for w, runs in by_width.items()
                  if sum(r["accuracy"] == 1.0 for r in runs) >= min_solved]
        solved_all = [(runs[0]["params"], w) for w, runs in by_width.items() if all(r["accuracy"] == 1.0 for r in runs)]
        best = min(solved) if solved else (None, None)
        best_all = min(solved_all) if solved_all else (None, None)
        out.append({"n_bits": n, "depth": depth, "basis": basis, "min_params": best[0], "width": best[1],
                    "min_params_all_seeds": best_all[0]})
    return out


def format_table(table: list[dict]) -> str:
    """Min-parameter table, one row per (N, depth), one column per basis; '*' marks the smallest."""
    bases = [b for b in PARITY_BASES if any(t["basis"] == b for t in table)]
    lines = ["min parameters reaching 100% on N-bit parity (width in parentheses; - = not reached)",
             f"{'N':>3} {'depth':>5} " + " ".join(f"{b:>14}" for b in bases)]
    for n, depth in sorted({(t["n_bits"], t["depth"]) for t in table}):
        cells = {t["basis"]: t for t in table if (t["n_bits"], t["depth"]) == (n, depth)}
        vals = [cells[b]["min_params"] for b in bases if b in cells and cells[b]["min_params"] is not None]
        best = min(vals) if vals else None
        row = []
        for b in bases:
            t = cells.get(b)
            if t is None or t["min_params"] is None:
                row.append(f"{'-':>14}")
            else:
                mark = "*" if t["min_params"] == best else " "
                row.append(f"{t['min_params']:>8}{mark}({t['width']:>2})".rjust(14))
        lines.append(f"{n:>3} {depth:>5} " + " ".join(row))
    return "\n".join(lines)


def plot_parity(rows: list[dict]):
    """Best-seed accuracy against parameters (log scale), one panel per (N, depth), one line per basis."""
    import matplotlib.ticker

    from tinyscope.interp.mpl import plt

    ns, depths = sorted({r["n_bits"] for r in rows}), sorted({r["depth"] for r in rows})
    fig, axes = plt.subplots(len(depths), len(ns), figsize=(3.2 * len(ns), 2.6 * len(depths)),
                             squeeze=False, sharey=True)
    colors = dict(zip(PARITY_BASES, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    for i, depth in enumerate(depths):
        for j, n in enumerate(ns):
            ax = axes[i][j]
            for basis in PARITY_BASES:
                sel = [r for r in rows if (r["n_bits"], r["depth"], r["basis"]) == (n, depth, basis)]
                if not sel:
                    continue
                widths = sorted({r["width"] for r in sel})
                params = [next(r["params"] for r in sel if r["width"] == w) for w in widths]
                best = [max(r["accuracy"] for r in sel if r["width"] == w) for w in widths]
                ax.plot(params, best, marker="o", ms=3, label=basis, color=colors[basis],
                        ls="--" if basis == "nc" else "-")  # nc equals gelu at widths without fuzzy pairs
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.axhline(1.0, color="grey", lw=0.5, ls=":")
            ax.set_title(f"N={n}, depth {depth}", fontsize=9)
            if i == len(depths) - 1:
                ax.set_xlabel("parameters")
            if j == 0:
                ax.set_ylabel("accuracy (best seed)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig
