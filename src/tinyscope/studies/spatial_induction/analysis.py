"""The full mechanistic analysis of a cellular-automaton run (spatial-induction paper, Sec. 5.2,
App. I.5-I.8): attention alignment, attention ablation with random controls, layerwise linear
probes and t-SNE, on fresh coverage-filtered test trajectories; and two diagnostics beyond the
paper, the alignment detail (:class:`AlignmentDetail`) and the KL by context count
(:mod:`~tinyscope.studies.spatial_induction.count_profile`).

Everything reads the model through hook names only (``blocks.{l}.attn.hook_pattern``,
``blocks.{l}.hook_resid_pre|mid|post``), so it applies to trained and compiled models alike.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from tinyscope.errors import ConfigError, TinyscopeError
from tinyscope.interp.ablation import clean_keys_values, drop_keys, isolated_rows_logits
from tinyscope.interp.alignment import attention_mass, summarize
from tinyscope.interp.probes import balanced_indices, config_probe, group_folds, soft_probe
from tinyscope.studies.spatial_induction.bayes import stream_predictive
from tinyscope.studies.spatial_induction.construction_sets import QuerySets, query_sets, random_subsets
from tinyscope.studies.spatial_induction.count_profile import CountProfile, count_profile_figure

log = logging.getLogger(__name__)

ANALYSES = ("attention", "alignment", "ablation", "probes", "tsne", "counts")
CAPTIONS = {  # by the figure name's first word
    "attention": "attention over the grid of one query (Fig. 2)",
    "alignment": "attention mass on the positions the construction predicts (App. I.5)",
    "ablation": "TF cell accuracy with routing cells / matched precedents removed vs random controls (App. I.6)",
    "probes": "linear probes per stage: configuration and k-gram posterior (App. I.7)",
    "tsne": "t-SNE per stage, coloured by configuration and output (App. I.8)",
    "counts": "KL to the k-gram predictor and entropies by context count n_c (a diagnostic beyond the paper)",
}
STAGES = {  # name -> hook of the post-residual stream after that sub-layer
    "embedding": "blocks.0.hook_resid_pre",
    "L1 attention": "blocks.0.hook_resid_mid",
    "L1 MLP": "blocks.0.hook_resid_post",
    "L2 attention": "blocks.1.hook_resid_mid",
    "L2 MLP": "blocks.1.hook_resid_post",
}
CONDITIONS = ("none", "L1 routing", "L1 random", "L2 matched", "L2 random")


# The paper's set sizes where it states them (App. I.5-I.8); the defaults below are the CPU ones.
PAPER_SIZES = {"n_traj": 20_000,        # I.5/I.6: alignment and ablation on 20,000 test trajectories
               "tsne_per_pair": 400,    # I.8: 400 points per (configuration, target), 800 per configuration
               "tsne_max_iter": 1000,   # I.8
               "control_seeds": 3}      # I.6
SIZE_FIELDS = ("chunk", "control_seeds", "points_per_traj", "probe_per_config", "tsne_per_pair", "tsne_max_iter")


@dataclass
class AnalysisConfig:
    """Set sizes of one analysis; ``n_traj`` and ``seed`` come from `tinyscope analyze --n / --seed`,
    the :data:`SIZE_FIELDS` from ``--set KEY=VALUE`` (paper values: :data:`PAPER_SIZES`)."""

    n_traj: int = 2000              # fresh coverage-filtered test trajectories (paper: 20,000)
    seed: int = 42
    chunk: int = 64                 # trajectories per forward pass
    control_seeds: int = 3          # random-control repetitions (App. I.6)
    points_per_traj: int = 16       # query positions kept per trajectory for probes and t-SNE
    probe_per_config: int = 300     # balanced points per configuration in each probe fold part
    tsne_per_pair: int = 60         # points per (configuration, target) pair in the t-SNE (paper: 400)
    tsne_max_iter: int = 1000
    only: list[str] = field(default_factory=lambda: list(ANALYSES))

    def __post_init__(self):
        for name in ("n_traj",) + SIZE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"analysis {name}={value!r} must be an integer >= 1")
        if self.tsne_max_iter < 250:  # scikit-learn's TSNE refuses fewer iterations
            raise ConfigError(f"analysis tsne_max_iter={self.tsne_max_iter} must be >= 250")

    def sizes(self) -> dict:
        """The set sizes this analysis ran with (saved in analysis.json)."""
        return {name: getattr(self, name) for name in ("n_traj",) + SIZE_FIELDS}


def _rule_ids(tables: np.ndarray) -> np.ndarray:
    return np.array([int(hashlib.sha1(np.ascontiguousarray(t).tobytes()).hexdigest()[:12], 16) for t in tables])


def _state_accuracy(logits: torch.Tensor, sets: QuerySets, V: int) -> np.ndarray:
    pred = logits[torch.as_tensor(sets.batch), torch.as_tensor(sets.pos), :V].argmax(-1).numpy()  # (Q,)
    return pred == sets.target


def analyze(model: torch.nn.Module, task, cfg: AnalysisConfig, progress: bool = True) -> tuple[dict, dict]:
    """Run the analyses of ``cfg.only`` on ``model`` for a CellularTask; returns (numbers, figures)."""
    from tinyscope.studies.spatial_induction.task import CellularTask

    if not isinstance(task, CellularTask):
        raise TinyscopeError("alignment, ablation, probes and t-SNE are defined for cellular-automaton runs (sih-*)")
    unknown = [a for a in cfg.only if a not in ANALYSES]
    if unknown:
        raise TinyscopeError(f"unknown analysis {unknown[0]!r}; choose from {', '.join(ANALYSES)}")
    if getattr(model, "prepends_star", False):
        raise TinyscopeError("this compiled circuit prepends the auxiliary star token (stochastic rules); "
                             "analyze a deterministic circuit or a trained run")
    if len(getattr(model, "blocks", [])) != 2:
        raise TinyscopeError("the gather-and-match analysis expects a 2-layer model")
    layout, V, T0 = task.layout, task.lattice.V, task.cfg.T0
    rng = np.random.default_rng(cfg.seed)
    tables, traj = task.trajectories(rng, cfg.n_traj, "test", covered=True)
    batch = task.batch(tables, traj, scored_only=True)
    rule_ids = _rule_ids(tables)
    model.eval()
    want = set(cfg.only)
    need_acts = bool(want & {"probes", "tsne"})

    masses = {"L1": [], "L2": []}
    detail = AlignmentDetail(task.lattice.k, layout.input_length, model.blocks[0].attn.n_heads)
    profile = CountProfile(layout)
    correct = {c: [] for c in CONDITIONS}
    unchanged = {"L1 random": 0, "L2 random": 0}
    acts = {s: [] for s in STAGES}
    labels: dict[str, list] = {"config": [], "target": [], "rule": [], "q": [], "pred1": []}
    example = None
    chunks = range(0, cfg.n_traj, cfg.chunk)
    for start in tqdm(chunks, desc="analyze", disable=not progress, leave=False):
        sl = slice(start, min(start + cfg.chunk, cfg.n_traj))
        tokens = torch.from_numpy(batch.tokens[sl])  # (b, N)
        sets = query_sets(layout, traj[sl], T0)
        names = ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"] + (list(STAGES.values()) if need_acts else [])
        with torch.no_grad():
            logits, cache = model.run_with_cache(tokens, names_filter=names)
        if example is None:
            example = (batch.tokens[0], cache["pattern", 0][0].numpy(), cache["pattern", 1][0].numpy(), int(sets.pos[0]))
        if "alignment" in want:
            masses["L1"].append(attention_mass(cache["pattern", 0], sets.batch, sets.pos, sets.routing))
            masses["L2"].append(attention_mass(cache["pattern", 1], sets.batch, sets.pos, sets.matching))
            detail.add(cache["pattern", 0], cache["pattern", 1], sets)
        if "counts" in want:
            profile.add(logits, traj[sl], sets)
        if "ablation" in want:
            with torch.no_grad():
                _ablation_chunk(model, tokens, sets, V, cfg, rng, logits, correct, unchanged)
        if need_acts:
            keep = _keep_points(sets, cfg.points_per_traj, rng)
            b, p = sets.batch[keep], sets.pos[keep]
            for stage, hook in STAGES.items():
                acts[stage].append(cache[hook][torch.as_tensor(b), torch.as_tensor(p)].float().numpy())
            q_kgram, _ = stream_predictive(layout, traj[sl])  # (b, N, V)
            labels["config"].append(sets.config[keep])
            labels["target"].append(sets.target[keep])
            labels["rule"].append(rule_ids[sl][b])
            labels["q"].append(q_kgram[b, p])
            probs = torch.softmax(logits[torch.as_tensor(b), torch.as_tensor(p), :V].float(), -1)
            labels["pred1"].append(probs[:, 1].numpy())

    results: dict = {"n_traj": cfg.n_traj, "seed": cfg.seed, "sizes": cfg.sizes(), "setting": {
        "grid": list(task.lattice.shape), "V": V, "k": task.lattice.k, "T": task.cfg.T, "T0": T0,
        "rules": task.cfg.rules, "heads": [b.attn.n_heads for b in model.blocks]}}
    figures: dict = {}
    if "alignment" in want:
        results["alignment"] = {layer: summarize(np.concatenate(m)) for layer, m in masses.items()}
        results["alignment_detail"] = detail.result()
        figures["alignment"] = alignment_figure(results["alignment"])
    if "counts" in want:
        results["counts"] = profile.result()
        figures["counts"] = count_profile_figure(results["counts"])
    if "ablation" in want:
        acc = {c: float(np.mean(np.concatenate(v))) for c, v in correct.items()}
        n_q = int(sum(len(v) for v in correct["none"]))
        results["ablation"] = {"tf_cell_acc": acc, "n_queries": n_q,
                               "unchanged_controls": {k: v // cfg.control_seeds for k, v in unchanged.items()}}
        figures["ablation"] = ablation_figure(acc)
    if need_acts:
        X = {s: np.concatenate(a) for s, a in acts.items()}
        lab = {k: np.concatenate(v) for k, v in labels.items()}
        if "probes" in want:
            results["probes"] = run_probes(X, lab, task, cfg, rng)
            figures["probes"] = probes_figure(results["probes"])
        if "tsne" in want:
            figures["tsne"] = tsne_stages(X, lab, task, cfg, rng)
    if "attention" in want and example is not None:
        from tinyscope.interp.attention_maps import grid_attention_figure

        tokens0, pat0, pat1, q = example
        for h in range(pat0.shape[0]):
            figures[f"attention_L1_head{h}"] = grid_attention_figure(pat0[h, q], layout, q, f"L1 head {h}, query {q}")
        figures["attention_L2"] = grid_attention_figure(pat1[0, q], layout, q, f"L2, query {q}")
    return results, figures


class AlignmentDetail:
    """Where the attention goes besides the construction's positions (a diagnostic beyond App. I.5).

    * ``L1_offsets``: for each layer-1 head, the key offsets (query position − key position) that
      carry the most mass, averaged over scored queries;
    * ``L2_agreement``: layer 2's mass on the completed cells whose parent configuration agrees
      with the target's in a = 0..k of its k cells (a = k: the matching precedents), beside the
      share of such cells among the completed ones (the mass uniform attention would give).
      A matching head puts its mass at a = k; a head that pools the whole context follows the
      uniform shares.
    """

    def __init__(self, k: int, n_positions: int, l1_heads: int):
        self.k = k
        self.offsets = np.zeros((l1_heads, n_positions))  # summed mass by offset
        self.agreement = np.zeros(k + 1)  # summed L2 mass by agreement level
        self.uniform = np.zeros(k + 1)  # summed share of completed cells by level
        self.n = 0

    def add(self, pattern1: torch.Tensor, pattern2: torch.Tensor, sets: QuerySets) -> None:
        b, pos = torch.as_tensor(sets.batch), torch.as_tensor(sets.pos)
        rows1 = pattern1[b, :, pos].double()  # (Q, H, N)
        back = pos[:, None] - torch.arange(rows1.shape[-1])  # (Q, N): key index at each offset
        by_offset = rows1.gather(-1, back.clamp_min(0)[:, None, :].expand_as(rows1)) * (back >= 0)[:, None, :]
        self.offsets += by_offset.sum(0).numpy()  # (H, N)
        rows2 = pattern2[b, :, pos].double().mean(1).numpy()  # (Q, N), heads averaged
        completed = np.maximum((sets.agreement >= 0).sum(1), 1)  # (Q,)
        for a in range(self.k + 1):
            at = sets.agreement == a  # (Q, N)
            self.agreement[a] += float((rows2 * at).sum())
            self.uniform[a] += float((at.sum(1) / completed).sum())
        self.n += len(sets)

    def result(self, top: int = 4) -> dict:
        n = max(self.n, 1)
        heads = []
        for mass in self.offsets / n:
            best = np.argsort(-mass)[:top]
            heads.append([[int(o), float(mass[o])] for o in best])
        return {"L1_offsets": heads, "L2_agreement": {"mass": [float(m) for m in self.agreement / n],
                                                      "uniform": [float(u) for u in self.uniform / n]}}


def _keep_points(sets: QuerySets, per_traj: int, rng: np.random.Generator) -> np.ndarray:
    keep = []
    for b in np.unique(sets.batch):
        idx = np.flatnonzero(sets.batch == b)
        keep.append(rng.choice(idx, size=min(per_traj, len(idx)), replace=False))
    return np.sort(np.concatenate(keep))


def _ablation_chunk(model, tokens, sets: QuerySets, V: int, cfg: AnalysisConfig, rng, logits, correct, unchanged):
    """TF cell accuracy of one chunk under each condition of App. I.6."""
    l1, l2 = "blocks.0.attn.hook_attn_scores", "blocks.1.attn.hook_attn_scores"
    correct["none"].append(_state_accuracy(logits, sets, V))
    kv = clean_keys_values(model, tokens, last_layer=1)
    hook = drop_keys(sets.batch, sets.pos, sets.routing)
    correct["L1 routing"].append(_state_accuracy(isolated_rows_logits(model, tokens, [(l1, hook)], 1, kv), sets, V))
    correct["L2 matched"].append(_state_accuracy(
        model.run_with_hooks(tokens, fwd_hooks=[(l2, drop_keys(sets.batch, sets.pos, sets.matching))]), sets, V))
    l1_runs, l2_runs = [], []
    for _ in range(cfg.control_seeds):
        mask, ok = random_subsets(sets.routing_pool, sets.routing.sum(1), rng)
        unchanged["L1 random"] += int((~ok).sum())
        hook = drop_keys(sets.batch, sets.pos, mask)
        l1_runs.append(_state_accuracy(isolated_rows_logits(model, tokens, [(l1, hook)], 1, kv), sets, V))
        mask, ok = random_subsets(sets.matching_pool, sets.matching.sum(1), rng)
        unchanged["L2 random"] += int((~ok).sum())
        l2_runs.append(_state_accuracy(
            model.run_with_hooks(tokens, fwd_hooks=[(l2, drop_keys(sets.batch, sets.pos, mask))]), sets, V))
    correct["L1 random"].append(np.mean(l1_runs, axis=0))
    correct["L2 random"].append(np.mean(l2_runs, axis=0))


def run_probes(X: dict, lab: dict, task, cfg: AnalysisConfig, rng: np.random.Generator) -> dict:
    """Configuration and k-gram probes per stage, averaged over rule-disjoint folds (App. I.7)."""
    groups = lab["rule"]
    n_rules = len(np.unique(groups))
    eca_det = task.lattice.V == 2 and task.lattice.k == 3 and task.lattice.dim == 1 and not task.stochastic
    folds = group_folds(groups, 5 if eca_det and n_rules >= 5 else None, rng)
    out: dict = {"n_rules": int(n_rules), "n_folds": len(folds), "stages": list(STAGES), "config": {}, "kgram": {}}
    for stage in STAGES:
        cfg_scores, kg_scores = [], []
        for fold in folds:
            bal = [fold.train, fold.val, fold.test]
            bal = [part[balanced_indices(lab["config"][part], cfg.probe_per_config, rng)] for part in bal]
            f = type(fold)(*bal)
            cfg_scores.append(config_probe(X[stage], lab["config"], f)["balanced_accuracy"])
            kg_scores.append(soft_probe(X[stage], lab["q"], f)["score"])
        out["config"][stage] = float(np.mean(cfg_scores))
        out["kgram"][stage] = float(np.mean(kg_scores))
    return out


def tsne_stages(X: dict, lab: dict, task, cfg: AnalysisConfig, rng: np.random.Generator):
    from tinyscope.interp.tsne import embed_2d, tsne_figure

    pair = lab["config"] * task.lattice.V + lab["target"]
    idx = balanced_indices(pair, cfg.tsne_per_pair, rng)
    points = {s: embed_2d(X[s][idx], seed=cfg.seed, max_iter=cfg.tsne_max_iter) for s in STAGES}
    if task.stochastic:
        return tsne_figure(points, lab["config"][idx], lab["pred1"][idx], task.lattice.n_configs, "model P(y=1)")
    return tsne_figure(points, lab["config"][idx], lab["target"][idx], task.lattice.n_configs, "output value")


def alignment_figure(al: dict):
    from tinyscope.interp.mpl import plt

    fig, ax = plt.subplots(figsize=(5, 3))
    names, vals = [], []
    for layer, s in al.items():
        for h, v in enumerate(s["per_head"]):
            names.append(f"{layer} h{h}")
            vals.append(v)
    ax.bar(names, vals, color=["tab:blue" if n.startswith("L1") else "tab:orange" for n in names])
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention mass on predicted positions")
    ax.set_title(f"alignment: L1 {al['L1']['layer']:.3f}, L2 {al['L2']['layer']:.3f}", fontsize=10)
    ax.tick_params(axis="x", labelsize=7, rotation=45)
    fig.tight_layout()
    return fig


def ablation_figure(acc: dict):
    from tinyscope.interp.mpl import plt

    fig, ax = plt.subplots(figsize=(5.5, 3))
    colors = ["gray", "tab:red", "tab:pink", "tab:red", "tab:pink"]
    ax.bar(list(acc), list(acc.values()), color=colors)
    for i, v in enumerate(acc.values()):
        ax.text(i, v + 0.01, f"{v:.3f}", ha="center", fontsize=8)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("TF cell accuracy")
    ax.set_title("attention ablation (App. I.6)", fontsize=10)
    fig.tight_layout()
    return fig


def probes_figure(pr: dict):
    from tinyscope.interp.mpl import plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    stages = pr["stages"]
    ax.plot(stages, [pr["config"][s] for s in stages], "o-", label="configuration (balanced acc.)")
    ax.plot(stages, [pr["kgram"][s] for s in stages], "s-", label="k-gram (1 - KL/KL_unif)")
    ax.set_ylim(min(0, *[pr["kgram"][s] for s in stages]) - 0.02, 1.02)
    ax.legend(fontsize=8)
    ax.set_title(f"linear probes, {pr['n_folds']} rule-disjoint fold(s)", fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig
