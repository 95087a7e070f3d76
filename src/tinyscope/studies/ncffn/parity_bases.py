"""The NC-FFN parity probe: the fewest parameters at which a pure feed-forward stack of each
basis classifies every N-bit input's parity correctly, for N in {4, 6, 8} and depth 1-2, over seeds.

Each (basis, N, depth, width, seed) trains a :class:`FeedForwardStack` full-batch on all 2^N
inputs (Adam, BCE, cosine) until it classifies all of them at a check or reaches ``max_steps``;
all stacks of one (N, depth) and shape family train together as one batched model
(:class:`BatchedStacks`). A basis *solves at* a width when at least ``solve_share`` of its seeds
reach 100% there; its parameter cost is the fewest parameters it solves at
(:mod:`~tinyscope.studies.ncffn.parity_stats` gives the intervals over seeds).

The paper gives neither its widths, seeds, optimiser nor how efficiency is read; every such
choice is a field of :class:`ParitySweepConfig` (docs/ncffn.md, *Parity probe*).
``benchmarks/ncffn/parity_bases.py`` runs the sweep and prints the table; :func:`plot_parity` draws
the solve rate against parameters per basis.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from tinyscope.errors import ConfigError, check
from tinyscope.models.utils import count_parameters
from tinyscope.studies.ncffn.bit_parity import all_bits, parity, signed
from tinyscope.studies.ncffn.ffn_stack import PARITY_BASES, FeedForwardStack

# the shapes that batch together: two matrices (GELU and the NC-FFN layers) or gate and value (gated)
FAMILIES = {"gelu": "two_matrix", "nc": "two_matrix", "nc_bool": "two_matrix", "swiglu": "gated", "bilinear": "gated"}


def basis_widths(basis: str, widths: list[int]) -> list[int]:
    """The widths of ``widths`` a basis is trained at: ``nc_bool`` only at even widths (an odd
    NC-FFN width keeps one GELU channel, so it would not be fully Boolean); the rest at all."""
    return [w for w in widths if w % 2 == 0] if basis == "nc_bool" else list(widths)


def dense_widths(n_bits: int) -> list[int]:
    """The default ladder at N bits: every width 1 .. 2N (a GELU layer needs about N - 1 ramps for
    N-bit parity, a fuzzy pair two steps; 2N leaves each basis room above that)."""
    return list(range(1, 2 * n_bits + 1))


@dataclass
class ParitySweepConfig:
    """The probe's protocol; every field is a choice the paper leaves open.

    widths: the ladder at every N (None: :func:`dense_widths`, every width 1 .. 2N); seeds: one
    independent initialisation each; max_steps, lr, check_every: full-batch Adam with cosine
    decay to 5% of ``lr``, accuracy on all 2^N inputs every ``check_every`` steps (a stack is
    solved at the first check at 100%); solve_share: the share of seeds that must reach 100% at a
    width for the basis to solve there (0.5: the median seed; 1 / len(seeds): any seed, the
    probe's earlier rule)."""

    bases: list[str] = field(default_factory=lambda: list(PARITY_BASES))
    n_bits: list[int] = field(default_factory=lambda: [4, 6, 8])
    depths: list[int] = field(default_factory=lambda: [1, 2])
    widths: list[int] | None = None
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    max_steps: int = 2000
    lr: float = 3e-2
    check_every: int = 25
    solve_share: float = 0.5

    def __post_init__(self):
        bad = [b for b in self.bases if b not in PARITY_BASES]
        if bad:
            raise ConfigError(f"bases={self.bases}: {bad} not among {PARITY_BASES}")
        check(all(2 <= n <= 16 for n in self.n_bits), f"n_bits={self.n_bits} must lie in [2, 16]")
        check(all(d >= 1 for d in self.depths), f"depths={self.depths} must be >= 1")
        check(self.widths is None or (self.widths and all(w >= 1 for w in self.widths)),
              f"widths={self.widths} must be None (dense 1..2N) or widths >= 1")
        check(len(self.seeds) >= 1 and len(set(self.seeds)) == len(self.seeds), f"seeds={self.seeds} must be distinct")
        check(self.max_steps >= 1 and self.check_every >= 1 and self.lr > 0,
              f"max_steps={self.max_steps}, check_every={self.check_every} and lr={self.lr} must be positive")
        check(0 < self.solve_share <= 1, f"solve_share={self.solve_share} must lie in (0, 1]")

    def ladder(self, n_bits: int) -> list[int]:
        return list(self.widths) if self.widths is not None else dense_widths(n_bits)


class BatchedStacks(torch.nn.Module):
    """E feed-forward stacks of one depth and one shape family (:data:`FAMILIES`) but different
    bases, widths and seeds, trained as one batched model (the fast path of the sweep;
    :class:`FeedForwardStack` is the reference).

    Each layer's hidden channels are padded to the widest model and masked: a masked channel
    contributes nothing, gets zero gradient and so never moves under Adam. The weights are
    copied from real modules, so initialisation and parameter counts are exactly theirs.
    """

    def __init__(self, stacks: list[FeedForwardStack]):
        super().__init__()
        first = stacks[0]
        families = {FAMILIES[s.basis] for s in stacks}
        check(len(families) == 1 and all(s.depth == first.depth for s in stacks),
              f"one batch holds one depth and one family of {FAMILIES}; got {sorted(families)}")
        self.bases = [s.basis for s in stacks]
        self.depth = first.depth
        self.gated = families == {"gated"}
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
        self.register_buffer("silu", torch.tensor([b == "swiglu" for b in self.bases]).float().view(E, 1, 1))
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
                g = torch.lerp(g, F.silu(g), self.silu)  # swiglu: silu(g); bilinear: g
                post = g * v  # (E, B, hs)
            else:
                a = torch.sigmoid(h[..., self.hs:self.hs + self.hp])  # (E, B, hp)
                b = torch.sigmoid(h[..., self.hs + self.hp:])  # (E, B, hp)
                ab = a * b
                post = torch.cat([F.gelu(h[..., :self.hs]), ab, a - ab], dim=-1)  # (E, B, h_out)
            x = x + torch.baddbmm(self.b_out[l], post * self.mask[l], self.W_out[l])  # (E, B, N)
        return torch.baddbmm(self.b_read, x, self.w_read).squeeze(-1)  # (E, B)


def train_parity_stacks(specs: list[tuple[str, int, int]], n_bits: int, depth: int, max_steps: int = 2000,
                        lr: float = 3e-2, check_every: int = 25) -> list[dict]:
    """Fit one stack per (basis, width, seed) of one family on all 2^N inputs at once; one row each.

    Adam + cosine to 5% of ``lr``, BCE summed over stacks (so each stack's gradient is its own);
    a stack counts as solved at the first check with 100% accuracy (its row keeps that step and
    ``accuracy`` its best checked accuracy); training stops when every stack is solved.
    """
    bits = all_bits(n_bits)
    x = torch.from_numpy(signed(bits))  # (2^N, N)
    y = torch.from_numpy(parity(bits)).float()  # (2^N,)
    stacks = []
    for basis, w, s in specs:
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
    return [{"basis": b, "n_bits": n_bits, "depth": depth, "width": w, "seed": s,
             "params": count_parameters(st), "accuracy": float(best[e]),
             "solved_at": int(solved_at[e])} for e, ((b, w, s), st) in enumerate(zip(specs, stacks))]


def train_parity_batch(basis: str, n_bits: int, depth: int, widths: list[int], seeds: list[int],
                       max_steps: int = 2000, lr: float = 3e-2, check_every: int = 25) -> list[dict]:
    """:func:`train_parity_stacks` for one basis at every (width, seed)."""
    return train_parity_stacks([(basis, w, s) for w in widths for s in seeds], n_bits, depth, max_steps, lr,
                               check_every)


def cell_specs(cfg: ParitySweepConfig, n_bits: int) -> dict[str, list[tuple[str, int, int]]]:
    """The (basis, width, seed) stacks of one (N, depth) cell, grouped by family."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for basis in cfg.bases:
        for w in basis_widths(basis, cfg.ladder(n_bits)):
            out.setdefault(FAMILIES[basis], []).extend((basis, w, s) for s in cfg.seeds)
    return out


def train_parity_cell(cfg: ParitySweepConfig, n_bits: int, depth: int) -> list[dict]:
    """Every basis, width and seed of one (N, depth) cell; one batched model per family."""
    rows: list[dict] = []
    for specs in cell_specs(cfg, n_bits).values():
        rows += train_parity_stacks(specs, n_bits, depth, cfg.max_steps, cfg.lr, cfg.check_every)
    return rows


def parity_sweep(cfg: ParitySweepConfig, progress: bool = True) -> list[dict]:
    """Every (N, depth) cell of the config."""
    rows: list[dict] = []
    cells = [(n, d) for n in cfg.n_bits for d in cfg.depths]
    for n, depth in tqdm(cells, desc="parity", disable=not progress, leave=False):
        rows += train_parity_cell(cfg, n, depth)
    return rows


def min_params_table(rows: list[dict], solve_share: float = 0.5, n_boot: int = 2000) -> list[dict]:
    """Per (N, depth, basis): ``P(solve_share)`` with its width and bootstrap interval
    (:func:`~tinyscope.studies.ncffn.parity_stats.threshold_params`), and the any-seed minimum."""
    from tinyscope.studies.ncffn.parity_stats import cell_rows, cells, threshold_params

    out = []
    for n, depth in cells(rows):
        sel = cell_rows(rows, n, depth)
        for basis in [b for b in PARITY_BASES if any(r["basis"] == b for r in sel)]:
            t = threshold_params(sel, basis, solve_share, n_boot)
            any_seed = [r["params"] for r in sel if r["basis"] == basis and r["accuracy"] == 1.0]
            out.append({"n_bits": n, "depth": depth, **t, "any_seed": min(any_seed) if any_seed else None})
    return out


def _p(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{int(v)}"


def format_table(table: list[dict], ratios: dict | None = None) -> str:
    """Threshold-parameter table, one row per (N, depth), one column per basis:
    ``P [lo, hi] (width)``, '*' on the smallest; ``ratios``: (N, depth) -> efficiency ratio dict."""
    bases = [b for b in PARITY_BASES if any(t["basis"] == b for t in table)]
    n_seeds = max(t["n_seeds"] for t in table)
    lines = [f"fewest parameters solved by >= the solve share of {n_seeds} seeds, [95% bootstrap interval] "
             f"(width); - = not in the ladder",
             f"{'N':>3} {'depth':>5} " + " ".join(f"{b:>20}" for b in bases) + ("  nc_bool / best other" if ratios else "")]
    for n, depth in sorted({(t["n_bits"], t["depth"]) for t in table}):
        cells = {t["basis"]: t for t in table if (t["n_bits"], t["depth"]) == (n, depth)}
        best = min(t["params"] for t in cells.values())
        row = []
        for b in bases:
            t = cells.get(b)
            if t is None or not math.isfinite(t["params"]):
                row.append(f"{'-':>20}")
                continue
            mark = "*" if t["params"] == best else " "
            row.append(f"{_p(t['params'])}{mark}[{_p(t['lo'])},{_p(t['hi'])}]({t['width']})".rjust(20))
        line = f"{n:>3} {depth:>5} " + " ".join(row)
        if ratios and (n, depth) in ratios:
            r = ratios[(n, depth)]
            line += f"  {r['ratio']:.3g} [{r['lo']:.3g}, {r['hi']:.3g}]"
        lines.append(line)
    return "\n".join(lines)


def plot_parity(rows: list[dict]):
    """Share of seeds reaching 100% against parameters (log scale), one panel per (N, depth), one
    line per basis, with the exact 95% interval of each share as a band."""
    import matplotlib.ticker

    from tinyscope.interp.mpl import plt
    from tinyscope.studies.ncffn.parity_stats import cell_rows, solve_rates

    ns, depths = sorted({r["n_bits"] for r in rows}), sorted({r["depth"] for r in rows})
    fig, axes = plt.subplots(len(depths), len(ns), figsize=(3.2 * len(ns), 2.6 * len(depths)),
                             squeeze=False, sharey=True)
    colors = dict(zip(PARITY_BASES, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    for i, depth in enumerate(depths):
        for j, n in enumerate(ns):
            ax = axes[i][j]
            sel = cell_rows(rows, n, depth)
            for basis in PARITY_BASES:
                if not any(r["basis"] == basis for r in sel):
                    continue
                rates = solve_rates(sel, basis)
                params = [r["params"] for r in rates]
                ax.plot(params, [r["rate"] for r in rates], marker="o", ms=3, label=basis, color=colors[basis],
                        ls="--" if basis == "nc" else "-")  # nc equals gelu at widths without fuzzy pairs
                ax.fill_between(params, [r["lo"] for r in rates], [r["hi"] for r in rates], color=colors[basis],
                                alpha=0.1, lw=0)
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.axhline(0.5, color="grey", lw=0.5, ls=":")
            ax.set_title(f"N={n}, depth {depth}", fontsize=9)
            if i == len(depths) - 1:
                ax.set_xlabel("parameters")
            if j == 0:
                ax.set_ylabel("seeds reaching 100%")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig
