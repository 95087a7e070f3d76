"""The spatial-induction paper's cross-setting mechanistic figures (Sec. 5.2), drawn by
`tinyscope report DIR` from the ``RUN/analysis/analysis.json`` that `tinyscope analyze RUN` wrote
in each trained run under DIR.

A group is one setting (1D V=2 k=3, 1D V=3 k=3, 2D VN V=2 k=5) x rules (deterministic,
stochastic) x architecture (Shared-head, Dedicated-heads); its value is the mean ± sample SD over
the group's analysed runs (seeds) of one preset.

* ``sih-fig3`` (Figure 3): left, the alignment scores of App. I.5 (L1: mass on the routing cells,
  heads averaged per query; L2: mass on the matching precedents; micro-averaged over queries);
  right, TF cell accuracy under the ablations of App. I.6 and their random controls. One row per
  rule regime.
* ``sih-fig4`` (Figure 4): the layerwise probe scores of App. I.7 (configuration: balanced
  accuracy; k-gram predictive: 1 - KL/KL_uniform) by stage, solid deterministic, dashed
  stochastic, with a vertical line at the stage where the construction makes each target
  readable (configuration: after L1 MLP for Shared-head, after L1 attention for
  Dedicated-heads; k-gram predictive: after L2 attention).

A group without runs, or whose runs were not analysed, keeps its place in both figures and is
labelled so. ``tinyscope report DIR --table sih-fig3`` (``sih-fig4``) gives the numbers with the
run and analysis counts and the analyses' trajectory counts.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from tinyscope.errors import TinyscopeError
from tinyscope.report.folder_figures import FolderFigure, register_figure
from tinyscope.report.records import RunReadError, RunRecord, read_json
from tinyscope.report.stats import Stat, mean_sd
from tinyscope.report.tables import FunctionTable, Table, register_table
from tinyscope.studies.spatial_induction.analysis import CONDITIONS, STAGES

log = logging.getLogger(__name__)

SETTINGS = {"eca": "1D V=2 k=3", "v3": "1D V=3 k=3", "vn2d": "2D VN V=2 k=5"}
REGIMES = {"det": "deterministic", "stoch": "stochastic"}
ARCHS = {"shared": "Shared-head", "dedicated": "Dedicated-heads"}
TRAINED = tuple(f"sih-{s}-*" for s in SETTINGS)  # the trained experiments, not sih-compiled-*
PROBES = {"config": "configuration (balanced acc.)", "kgram": "k-gram predictive (1 - KL/KL_unif)"}
CONSTRUCTION_STAGE = {("config", "shared"): "L1 MLP", ("config", "dedicated"): "L1 attention",
                      ("kgram", "shared"): "L2 attention", ("kgram", "dedicated"): "L2 attention"}
STAGE_TICKS = {"embedding": "emb.", "L1 attention": "L1 attn", "L1 MLP": "L1 MLP",
               "L2 attention": "L2 attn", "L2 MLP": "L2 MLP"}
ARCH_COLORS = {"shared": "tab:blue", "dedicated": "tab:orange"}
CONDITION_COLORS = {"none": "0.45", "L1 routing": "tab:red", "L1 random": "lightsalmon",
                    "L2 matched": "tab:purple", "L2 random": "plum"}


@dataclass(frozen=True)
class Group:
    setting: str
    regime: str
    arch: str


GROUPS = tuple(Group(s, r, a) for r in REGIMES for s in SETTINGS for a in ARCHS)


def group_of(experiment: str) -> Group | None:
    """``sih-eca-shared-det`` -> Group("eca", "det", "shared"); None for other experiments."""
    parts = experiment.split("-")
    if len(parts) != 4 or parts[0] != "sih" or parts[1] not in SETTINGS or parts[2] not in ARCHS \
            or parts[3] not in REGIMES:
        return None
    return Group(parts[1], parts[3], parts[2])


def read_analysis(run: RunRecord) -> dict | None:
    """The run's analysis.json, or None when the run was not analysed; a damaged file, or an
    analysis of another checkpoint than the one the run's results measured (``--checkpoint last``,
    or a run trained further since; a run with restart stages measures its last phase's model), is
    logged and counts as not analysed."""
    path = run.path / "analysis" / "analysis.json"
    if not path.exists():
        return None
    try:
        analysis = read_json(path)
    except RunReadError as exc:
        log.warning("run %s: analysis not read: %s", run.path, exc)
        return None
    step = analysis.get("checkpoint_step")
    if step is not None and run.measured_step is not None and step != run.measured_step:
        log.warning("run %s: analysis of step %s, not of the measured step %s: left out (rerun tinyscope analyze)",
                    run.path, step, run.measured_step)
        return None
    return analysis


@dataclass
class GroupRuns:
    """The finished runs of one group and the analyses among them."""

    runs: list[RunRecord] = field(default_factory=list)
    analyses: list[dict] = field(default_factory=list)

    def stat(self, *path: str) -> Stat:
        """Mean ± sample SD over the analyses that hold ``analysis[path[0]][path[1]]...``."""
        values = []
        for a in self.analyses:
            v = a
            for key in path:
                v = v.get(key) if isinstance(v, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                values.append(float(v))
        return mean_sd(values)

    def missing(self, part: str) -> str:
        """Why the group has no ``part`` numbers: 'no run' or 'not analysed'."""
        return "no run" if not self.runs else f"{part} not analysed"

    def trajectories(self) -> str:
        """The analyses' trajectory counts (``2000``, ``2000/20000`` when they differ)."""
        counts = {a.get("n_traj") for a in self.analyses}
        return "/".join(str(n) for n in sorted(n for n in counts if isinstance(n, int))) or "–"


def collect(runs: Sequence[RunRecord], preset: str | None = None) -> dict[Group, GroupRuns]:
    """Every group (in :data:`GROUPS` order, empty ones included) with its finished runs of
    ``preset`` (None: the folder must hold runs of one preset only)."""
    runs = [r for r in runs if group_of(r.experiment) is not None]
    presets = sorted({r.preset for r in runs})
    if preset is None:
        if len(presets) > 1:
            raise TinyscopeError(f"the folder holds trained sih runs of presets {', '.join(presets)}; the figures "
                                 f"pool the seeds of one preset: report a folder of one preset")
    else:
        runs = [r for r in runs if r.preset == preset]
    out = {g: GroupRuns() for g in GROUPS}
    for r in sorted(runs, key=lambda r: (r.experiment, r.seed, str(r.path))):
        g = out[group_of(r.experiment)]
        g.runs.append(r)
        analysis = read_analysis(r)
        if analysis is not None:
            g.analyses.append(analysis)
    return out


def _analysed(runs: Sequence[RunRecord]) -> tuple[dict[Group, GroupRuns], str]:
    """The groups of a figure and its preset; an error (a note in the report) when no run is analysed."""
    data = collect(runs)
    if not any(gr.analyses for gr in data.values()):
        raise TinyscopeError("no trained sih run under the folder has been analysed; run `tinyscope analyze RUN` first")
    return data, next(gr.runs[0].preset for gr in data.values() if gr.runs)


def _sd(s: Stat) -> float:
    return 0.0 if np.isnan(s.sd) else s.sd


def _mark_missing(ax, x: float, text: str) -> None:
    """Keep an empty group's slot visible: a grey band with the reason written in it."""
    ax.axvspan(x - 0.45, x + 0.45, color="0.92", zorder=0)
    ax.text(x, 0.5, text, rotation=90, ha="center", va="center", fontsize=7, color="0.35")


def _group_axis(ax, data: dict[Group, GroupRuns], regime: str) -> list[Group]:
    """x = one slot per (setting, architecture) of ``regime``: ticks name the architecture and
    the analysed runs, a second line under each pair names the setting."""
    from matplotlib.transforms import blended_transform_factory

    groups = [g for g in GROUPS if g.regime == regime]
    ax.set_xticks(range(len(groups)), [f"{ARCHS[g.arch][:3]}.\nn={len(data[g].analyses)}" for g in groups], fontsize=7)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    below = blended_transform_factory(ax.transData, ax.transAxes)
    for i, setting in enumerate(SETTINGS):
        ax.text(2 * i + 0.5, -0.2, SETTINGS[setting].rsplit(" k=", 1)[0], transform=below, ha="center", va="top",
                fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.tick_params(axis="y", labelsize=7)
    return groups


def figure3(runs: list[RunRecord]):
    """Figure 3: alignment (left) and ablation (right) bars over settings x architectures, one row
    per rule regime; whiskers: sample SD over seeds; n: analysed runs."""
    from tinyscope.interp.mpl import plt

    data, preset = _analysed(runs)
    fig, axes = plt.subplots(2, 2, figsize=(7.0, 6.4), gridspec_kw={"width_ratios": [1, 1.6]}, squeeze=False,
                             layout="constrained")
    layers = (("L1", "L1: routing cells", "tab:blue"), ("L2", "L2: matching precedents", "tab:orange"))
    w = 0.82 / len(CONDITIONS)
    for row, regime in enumerate(REGIMES):
        ax_al, ax_ab = axes[row]
        groups = _group_axis(ax_al, data, regime)
        _group_axis(ax_ab, data, regime)
        for x, g in enumerate(groups):
            gr = data[g]
            al = [gr.stat("alignment", layer, "layer") for layer, _, _ in layers]
            if all(s.n == 0 for s in al):
                _mark_missing(ax_al, x, gr.missing("alignment").replace("alignment ", ""))
            for i, ((_, label, color), s) in enumerate(zip(layers, al)):
                ax_al.bar(x + (i - 0.5) * 0.38, 0 if s.n == 0 else s.mean, 0.38, yerr=_sd(s), color=color,
                          capsize=2, error_kw={"lw": 0.8}, label=label if x == 0 and row == 0 else None)
            ab = [gr.stat("ablation", "tf_cell_acc", c) for c in CONDITIONS]
            if all(s.n == 0 for s in ab):
                _mark_missing(ax_ab, x, gr.missing("ablation").replace("ablation ", ""))
            for i, (cond, s) in enumerate(zip(CONDITIONS, ab)):
                ax_ab.bar(x + (i - (len(CONDITIONS) - 1) / 2) * w, 0 if s.n == 0 else s.mean, w, yerr=_sd(s),
                          color=CONDITION_COLORS[cond], capsize=1.5, error_kw={"lw": 0.7},
                          label=("no ablation" if cond == "none" else cond) if x == 0 and row == 0 else None)
        ax_al.set_ylabel("attention mass on predicted positions", fontsize=7)
        ax_ab.set_ylabel("TF cell accuracy", fontsize=7)
        ax_al.set_title(f"{REGIMES[regime]} rules: alignment (I.5)", fontsize=8)
        ax_ab.set_title(f"{REGIMES[regime]} rules: ablation (I.6)", fontsize=8)
        for ax in (ax_al, ax_ab):
            ax.set_xlabel("architecture, setting", fontsize=7, labelpad=14)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower left", fontsize=7, ncol=1)
    fig.legend(*axes[0][1].get_legend_handles_labels(), loc="outside lower right", fontsize=7, ncol=3)
    fig.suptitle(f"Figure 3 (preset {preset}): bars mean, whiskers sample SD over seeds; n = analysed runs",
                 fontsize=8)
    return fig


def _counts(data: dict[Group, GroupRuns], setting: str) -> str:
    """``n det/stoch: Sha. 3/3, Ded. 3/0`` for one setting's panel title (0: a missing line)."""
    parts = [f"{ARCHS[a][:3]}. " + "/".join(str(len(data[Group(setting, r, a)].analyses)) for r in REGIMES)
             for a in ARCHS]
    return "n det/stoch: " + ", ".join(parts)


def figure4(runs: list[RunRecord]):
    """Figure 4: probe scores by stage, one column per setting, one row per probe target; colour:
    architecture, solid: deterministic, dashed: stochastic; dotted verticals: the construction's
    stage for each target (coloured by architecture; grey when both share it)."""
    from tinyscope.interp.mpl import plt

    data, preset = _analysed(runs)
    stages = list(STAGES)
    xs = np.arange(len(stages))
    fig, axes = plt.subplots(2, len(SETTINGS), figsize=(7.0, 5.8), sharex=True, squeeze=False, layout="constrained")
    for row, (target, target_label) in enumerate(PROBES.items()):
        for col, setting in enumerate(SETTINGS):
            ax = axes[row][col]
            low, drawn = 0.0, 0
            for arch in ARCHS:
                for regime, ls in (("det", "-"), ("stoch", "--")):
                    st = [data[Group(setting, regime, arch)].stat("probes", target, s) for s in stages]
                    label = f"{ARCHS[arch]}, {REGIMES[regime]}" if row == col == 0 else None
                    if min(s.n for s in st) == 0:
                        ax.plot([], [], ls, color=ARCH_COLORS[arch], label=label)  # keeps the legend whole
                        continue
                    means = np.array([s.mean for s in st])
                    ax.errorbar(xs, means, yerr=[_sd(s) for s in st], fmt="o" + ls, ms=3, lw=1.2, capsize=2,
                                color=ARCH_COLORS[arch], label=label)
                    low, drawn = min(low, float(np.nanmin(means))), drawn + 1
            at = {arch: stages.index(CONSTRUCTION_STAGE[(target, arch)]) for arch in ARCHS}
            for arch in ARCHS:
                ax.axvline(at[arch], ls=":", lw=1.2, color="0.4" if len(set(at.values())) == 1 else ARCH_COLORS[arch])
            if not drawn:
                ax.text(0.5, 0.5, "no analysed run", transform=ax.transAxes, ha="center", va="center",
                        fontsize=8, color="0.35")
            ax.set_ylim(low - 0.05, 1.05)
            ax.set_xticks(xs, [STAGE_TICKS[s] for s in stages], rotation=45, fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
            if row == 1:
                ax.set_xlabel("stage (post-residual)", fontsize=7)
            ax.set_ylabel(target_label if col == 0 else "score", fontsize=7)
            ax.set_title(f"{SETTINGS[setting]}\n{_counts(data, setting)}", fontsize=7)
    fig.legend(loc="outside lower center", fontsize=7, ncol=2)
    fig.suptitle(f"Figure 4 (preset {preset}): linear probes (I.7), mean ± sample SD over seeds;\n"
                 f"dotted: the stage where the construction makes the target readable", fontsize=8)
    return fig


# ------------------------------------------------------------------ the numbers behind the figures
def _row_head(preset: str, g: Group, gr: GroupRuns) -> list:
    return [SETTINGS[g.setting], REGIMES[g.regime], ARCHS[g.arch], preset, len(gr.runs), len(gr.analyses),
            gr.trajectories()]


_HEAD = ["Task", "Rules", "Arch.", "Preset", "runs", "analysed", "trajectories"]


def _presets(runs: Sequence[RunRecord]) -> list[str]:
    return sorted({r.preset for r in runs if group_of(r.experiment) is not None})


def figure3_table(runs: list[RunRecord]) -> Table:
    """One row per group and preset: alignment L1 / L2 and TF cell accuracy per ablation condition."""
    rows = []
    for preset in _presets(runs):
        for g, gr in collect(runs, preset).items():
            rows.append(_row_head(preset, g, gr) + [gr.stat("alignment", layer, "layer") for layer in ("L1", "L2")]
                        + [gr.stat("ablation", "tf_cell_acc", c) for c in CONDITIONS])
    headers = _HEAD + ["align L1", "align L2"] + [f"acc: {c}" for c in CONDITIONS]
    return Table(headers, rows, digits=[None] * len(_HEAD) + [3] * (2 + len(CONDITIONS)))


def figure4_table(runs: list[RunRecord]) -> Table:
    """One row per group, preset and probe target: the score after each stage."""
    rows = []
    for preset in _presets(runs):
        for g, gr in collect(runs, preset).items():
            for target in PROBES:
                rows.append(_row_head(preset, g, gr) + [target] + [gr.stat("probes", target, s) for s in STAGES])
    return Table(_HEAD + ["probe"] + list(STAGES), rows, digits=[None] * (len(_HEAD) + 1) + [3] * len(STAGES))


FIG3_CAPTION = ("Figure 3: attention alignment (App. I.5) and TF cell accuracy under attention ablation with random "
                "controls (App. I.6) over settings x architectures, deterministic and stochastic rules; mean ± "
                "sample SD over analysed seeds (tinyscope analyze); grey: a group with no run or no analysis")
FIG4_CAPTION = ("Figure 4: linear probes by stage (App. I.7), configuration balanced accuracy and k-gram score "
                "1 - KL/KL_uniform; solid deterministic, dashed stochastic, mean ± sample SD over analysed seeds; "
                "dotted: the stage where the construction makes each target readable")

FIG3 = register_figure(FolderFigure("sih-fig3", FIG3_CAPTION, TRAINED, figure3))
FIG4 = register_figure(FolderFigure("sih-fig4", FIG4_CAPTION, TRAINED, figure4))
FIG3_TABLE = register_table(FunctionTable("sih-fig3", FIG3_CAPTION, TRAINED, figure3_table,
                                          description="spatial induction heads, the numbers of Figure 3"))
FIG4_TABLE = register_table(FunctionTable("sih-fig4", FIG4_CAPTION, TRAINED, figure4_table,
                                          description="spatial induction heads, the numbers of Figure 4"))
