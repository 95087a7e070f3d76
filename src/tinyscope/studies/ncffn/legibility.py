"""Legibility of trained sequence quantifiers (NC-FFN paper, half-life and licensing analyses).

* :func:`half_lives` / :func:`half_life_summary`: each unit's half-life ``ln 0.5 / ln(decay)``
  (tokens for its memory to halve), the median, and the count of *latch* units, whose half-life
  reaches ``latch_half_life`` tokens (the paper finds a median ~1.5 tokens and no latches).
* :func:`licensor_detectors`: for the licensing language, which quantifier units *fire* on a
  licensor and *carry* it to the licensed word. For a unit u and licensor class c:

      fire_u(c)  = mean M_u at tokens of class c  -  mean M_u at all other tokens
      carry_u(c) = mean state_u where the next word is c's licensed word (than / by / nor)
                   - mean state_u where the next word is the unlicensed twin's ``and``

  with M the membership and state = E (existential units) or P (proportion units). A unit is a
  detector of c when both exceed ``threshold``; units are ranked by ``min(fire, carry)``.
* :func:`unit_trace`: a unit's membership and state over the words of one example sentence.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from tinyscope.studies.ncffn.licensing import COMPARATIVES, ID, PARTICIPLES

LICENSOR_CLASSES = {
    "comparative": {"words": COMPARATIVES, "slot_kind": 1, "licensed": "than"},
    "passive participle": {"words": PARTICIPLES, "slot_kind": 2, "licensed": "by"},
    "negative polarity (neither)": {"words": ["neither"], "slot_kind": 3, "licensed": "nor"},
}
UNLICENSED_KIND = 5


def half_lives(model: torch.nn.Module) -> list[dict]:
    """One row per quantifier unit: layer, kind (exist | prop), unit index, decay, half-life."""
    rows = []
    for layer, block in model.quantifier_blocks().items():
        decays = {"exist": block.gamma.detach(), "prop": block.lam.detach()}
        for kind, hl in block.half_lives().items():
            for u, (d, h) in enumerate(zip(decays[kind].tolist(), hl.tolist())):
                rows.append({"layer": layer, "kind": kind, "unit": u, "decay": d, "half_life": h})
    return rows


def half_life_summary(model: torch.nn.Module, latch_half_life: float = 64.0) -> dict:
    rows = half_lives(model)
    hl = np.array([r["half_life"] for r in rows])
    out = {"half_life_median": float(np.median(hl)), "n_latch": float((hl >= latch_half_life).sum()),
           "n_quantifier_units": float(len(hl))}
    for kind in ("exist", "prop"):
        sel = np.array([r["half_life"] for r in rows if r["kind"] == kind])
        if len(sel):
            out[f"half_life_median_{kind}"] = float(np.median(sel))
    return out


@torch.no_grad()
def quantifier_activations(model: torch.nn.Module, tokens: torch.Tensor) -> dict[int, dict[str, torch.Tensor]]:
    """Per quantified layer: ``membership`` (B, T, U) and ``state`` (B, T, U) = [E | P]."""
    names = []
    for layer in model.quantifier_blocks():
        names += [f"blocks.{layer}.quant.hook_{h}" for h in ("membership", "exist", "prop")]
    _, cache = model.run_with_cache(tokens, names_filter=names)
    out = {}
    for layer in model.quantifier_blocks():
        q = f"blocks.{layer}.quant"
        out[layer] = {"membership": cache[f"{q}.hook_membership"],
                      "state": torch.cat([cache[f"{q}.hook_exist"], cache[f"{q}.hook_prop"]], dim=-1)}
    return out


def licensor_detectors(model: torch.nn.Module, batch, top: int = 3, threshold: float = 0.1) -> dict:
    """Rank quantifier units as detectors of each licensor class on a licensing-language batch.

    ``batch``: a :class:`Batch` of the licensing task with ``meta["slot"]``. Returns
    ``{class: [{"layer", "unit", "kind", "fire", "carry", "score", "detector"}, ...]}``
    (top ``top`` units per class, best first).
    """
    tokens = torch.from_numpy(batch.tokens)
    slot = batch.meta["slot"]  # (B, T)
    acts = quantifier_activations(model, tokens.to(next(model.parameters()).device))
    table = {}
    for name, spec in LICENSOR_CLASSES.items():
        is_class = np.isin(batch.tokens, [ID[w] for w in spec["words"]])  # (B, T)
        lic_pos, twin_pos = slot == spec["slot_kind"], slot == UNLICENSED_KIND
        ranked = []
        if not (is_class.any() and lic_pos.any() and twin_pos.any()):
            table[name] = ranked
            continue
        for layer, a in acts.items():
            m, s = a["membership"].cpu().numpy(), a["state"].cpu().numpy()  # (B, T, U)
            fire = m[is_class].mean(0) - m[~is_class].mean(0)  # (U,)
            carry = s[lic_pos].mean(0) - s[twin_pos].mean(0)  # (U,)
            n_exist = model.blocks[layer].quant.n_exist
            for u in range(m.shape[-1]):
                score = min(fire[u], carry[u])
                ranked.append({"layer": layer, "unit": u, "kind": "exist" if u < n_exist else "prop",
                               "fire": float(fire[u]), "carry": float(carry[u]), "score": float(score),
                               "detector": bool(fire[u] > threshold and carry[u] > threshold)})
        table[name] = sorted(ranked, key=lambda r: -r["score"])[:top]
    return table


def unit_trace(model: torch.nn.Module, tokens: np.ndarray, layer: int, unit: int, vocab: list[str]) -> list[tuple]:
    """(word, membership, state) of one unit over the tokens of one sequence (T,)."""
    a = quantifier_activations(model, torch.from_numpy(tokens[None]).to(next(model.parameters()).device))[layer]
    m, s = a["membership"][0, :, unit].tolist(), a["state"][0, :, unit].tolist()
    return [(vocab[int(t)], mi, si) for t, mi, si in zip(tokens, m, s)]


def format_detectors(table: dict, decimals: int = 2) -> str:
    """The legibility table: top units per licensor, their fire / carry scores, and a verdict."""
    lines = [f"{'licensor':<30} {'layer':>5} {'unit':>5} {'kind':>6} {'fire':>7} {'carry':>7}  detector"]
    for name, rows in table.items():
        if not rows:
            lines.append(f"{name:<30} (no examples)")
        for r in rows:
            lines.append(f"{name:<30} {r['layer']:>5} {r['unit']:>5} {r['kind']:>6} {r['fire']:>7.{decimals}f} "
                         f"{r['carry']:>7.{decimals}f}  {'yes' if r['detector'] else 'no'}")
        if rows and not any(r["detector"] for r in rows):
            lines.append(f"{'':<30} -> no detector unit emerged for this licensor")
    return "\n".join(lines)


def plot_half_lives(model: torch.nn.Module):
    """Histogram of unit half-lives (log scale), one colour per quantifier kind; returns a Figure."""
    from tinyscope.interp.mpl import plt

    rows = half_lives(model)
    fig, ax = plt.subplots(figsize=(5, 3))
    hl = [r["half_life"] for r in rows]
    bins = np.logspace(math.log10(max(min(hl), 1e-2)), math.log10(max(max(hl), 1.0)) + 0.1, 25)
    for kind, color in (("exist", "tab:blue"), ("prop", "tab:orange")):
        ax.hist([r["half_life"] for r in rows if r["kind"] == kind], bins=bins, alpha=0.6, label=kind, color=color)
    ax.set_xscale("log")
    ax.set_xlabel("half-life (tokens)")
    ax.set_ylabel("units")
    ax.axvline(float(np.median(hl)), color="k", ls="--", lw=1, label=f"median {np.median(hl):.2f}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
