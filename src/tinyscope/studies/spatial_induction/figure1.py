"""The visualization checkpoints of Figure 1 (App. I.9, Table 15) and the figure over them.

Two experiments on 1D V=2 k=3 rules at Table 15's configuration (64-cell ring, T = 64, T0 = 12):

* ``sih-figure1-det``: Dedicated-heads (heads [4, 1], MLP only in layer 2), deterministic rules
  from the ECA training pool with Rule 110's class in test (never in training); selected by
  val-out TF sequence accuracy; its panel decodes greedily.
* ``sih-figure1-stoch``: Shared-head (heads [1, 1], MLPs in both layers), fresh Dirichlet(1)
  rules, a training rule within ``task.holdout_radius`` of Stavskaya p = 0.29 or one of its
  symmetry images redrawn; selected by KL(q_true || q_model); its panel samples at temperature 1
  and shows the per-cell P(state 1).

Presets: ``paper`` = Table 15 (d_model 512, batch 1024, epochs of the paper's 50M trajectories);
``cpu`` = the nearest configuration that fits 2 CPU cores (see :func:`cpu_preset`); ``smoke`` =
seconds, for tests. The figure itself: ``tinyscope report DIR`` (one det and one stoch run under
DIR, rows Rule 110 then Stavskaya, columns ground truth, teacher-forced, autoregressive) and
``tinyscope view RUN`` (the full figure when a run of the other experiment sits in the same
folder, else the run's own row).
"""
from __future__ import annotations

from pathlib import Path

from tinyscope.report.folder_figures import FolderFigure, register_figure
from tinyscope.runs.registry import register
from tinyscope.studies.spatial_induction.experiment import (
    PAPER_BATCH,
    PAPER_TRAJECTORIES,
    SihEvalConfig,
    SihExperiment,
    SihRunConfig,
    _select,
    model_config,
    task_config,
)
from tinyscope.train.trainer import TrainConfig

#: Table 15: training and plotted grid, horizon and context length of both checkpoints
TABLE15_TASK = dict(grid=[64], T=64, T0=12)
#: Table 15: (architecture, d_model, d_ffn, lr, weight decay, epochs of PAPER_TRAJECTORIES)
TABLE15 = {"det": ("dedicated", 512, 2048, 5e-4, 0.2, 10), "stoch": ("shared", 512, 2048, 1e-3, 0.2, 8)}
EXPERIMENTS = {"det": "sih-figure1-det", "stoch": "sih-figure1-stoch"}
ROUTING_HEADS = 4


def _task(regime: str, **kw):
    """1D V=2 k=3 task of ``regime`` with Table 15's held-out rule out of training."""
    held = dict(holdout=[110]) if regime == "det" else dict(holdout=[], holdout_stochastic=["stavskaya"])
    return task_config("eca", regime, **{**TABLE15_TASK, **held, **kw})


def paper_preset(regime: str):
    arch, d, d_ffn, lr, wd, epochs = TABLE15[regime]
    steps = PAPER_TRAJECTORIES * epochs // PAPER_BATCH
    task = _task(regime, n_val=4096, n_test=4096)
    return lambda: SihRunConfig(
        task=task, model=model_config(task, arch, d, d_ffn, ROUTING_HEADS),
        train=TrainConfig(steps=steps, batch_size=PAPER_BATCH, lr=lr, betas=[0.9, 0.999], weight_decay=wd,
                          schedule="cosine", warmup_steps=max(1, int(0.004 * steps)), grad_clip=1.0,
                          eval_every=2000, checkpoint_every=10000, log_every=200, patience=999, min_delta=0.0005,
                          **_select(regime)),
        eval=SihEvalConfig(n_ar=1024))


#: the cpu preset's ring, horizon and context: Table 15's T0, a 32-cell ring and T = 32 (a
#: quarter of the stream's 4,160 positions, a sixteenth of its attention cost)
CPU_TASK = dict(grid=[32], T=32, T0=12)


def cpu_preset(regime: str):
    """Nearest to Table 15 that fits 2 CPU cores: the same rules, architectures, held-out rules,
    T0 = 12 and selection, on a 32-cell ring for T = 32 steps (stream 1,056 positions against
    4,160), d_model 64, batch 16, AdamW 1e-2 with a warmup-stable-decay schedule
    and a horizon curriculum T = 13, then 20, then 32 (positions stay absolute). The measured
    step cost and the estimated total are in docs/results/spatial_induction.md."""
    arch = TABLE15[regime][0]
    d, steps = 64, 6000
    curriculum = dict(curriculum_T=[13, 20], curriculum_steps=[1500, 1500])
    if regime == "stoch":
        curriculum["curriculum_alpha"] = [0.02, 0.02]  # near-deterministic rules first, as sih-eca-*-stoch cpu
    task = _task(regime, n_val=256, n_test=1024, **CPU_TASK, **curriculum)
    return lambda: SihRunConfig(
        task=task, model=model_config(task, arch, d, 4 * d, ROUTING_HEADS, init="gpt2"),
        train=TrainConfig(steps=steps, batch_size=16, lr=1e-2, betas=[0.9, 0.99], weight_decay=0.1, schedule="wsd",
                          warmup_steps=200, decay_fraction=0.25, min_lr_ratio=0.05, grad_clip=1.0, eval_every=500,
                          checkpoint_every=500, log_every=100, threads="auto", **_select(regime)),
        eval=SihEvalConfig(eval_batch=64, n_ar=256))


def smoke_preset(regime: str):
    arch = TABLE15[regime][0]
    task = _task(regime, grid=[8], T=7, T0=4, n_val=16, n_test=16)
    return lambda: SihRunConfig(
        task=task, model=model_config(task, arch, 16, 32, ROUTING_HEADS),
        train=TrainConfig(steps=20, batch_size=8, lr=3e-3, eval_every=10, checkpoint_every=10, log_every=5,
                          threads="auto", **_select(regime)),
        eval=SihEvalConfig(eval_batch=16, n_ar=8))


class Figure1Experiment(SihExperiment):
    """A Table 15 visualization checkpoint: trained and evaluated as the sih-eca experiments, but
    not a row of Tables 13-14 and without claims (Figure 1 states no number)."""

    def __init__(self, regime: str):
        super().__init__("eca", TABLE15[regime][0], regime)
        self.name = EXPERIMENTS[regime]
        rule = "Rule 110" if regime == "det" else "Stavskaya p=0.29"
        self.description = (f"spatial induction heads, Figure 1 checkpoint (Table 15): 1D V=2 k=3, "
                            f"{'deterministic' if regime == 'det' else 'stochastic'} rules, {rule} held out")
        self.presets = {"smoke": smoke_preset(regime), "cpu": cpu_preset(regime), "paper": paper_preset(regime)}

    def claims(self) -> list:
        return []

    def tables(self) -> list:
        return []

    def views(self, run, options=None) -> list:
        from tinyscope.runs.experiment import View

        partner = partner_run(run.path, "stoch" if self.regime == "det" else "det")
        what = "both rules" if partner is not None else "this run's rule only (no run of the other experiment beside it)"
        return [View("figure1", "Figure 1", f"Ground truth, teacher-forced and autoregressive predictions on the "
                     f"held-out rules: {what}.", lambda: figure1_for_paths(run.path, partner))]


FIGURE1_EXPERIMENTS = {regime: register(Figure1Experiment(regime)) for regime in ("det", "stoch")}


# ------------------------------------------------------------------ the figure
def partner_run(path: str | Path, regime: str) -> Path | None:
    """A finished run of ``EXPERIMENTS[regime]`` beside ``path`` in its folder (lowest seed, then name)."""
    from tinyscope.report.records import RunReadError, read_run

    found = []
    for sibling in sorted(Path(path).resolve().parent.iterdir()):
        if (sibling / "config.json").exists():
            try:
                rec = read_run(sibling)
            except (RunReadError, OSError):
                continue
            if rec.experiment == EXPERIMENTS[regime] and rec.status == "done":
                found.append(rec)
    found.sort(key=lambda r: (r.seed, str(r.path)))
    return found[0].path if found else None


def figure1_for_paths(*paths: str | Path | None, seed: int = 42):
    """Figure 1 from trained runs (None entries skipped): the deterministic row (Rule 110) above
    the stochastic one (Stavskaya p = 0.29), each at its run's grid, T and T0."""
    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.spatial_induction.rollout import rollout_figure, rollout_panel_for_run

    runs = [load_run(p) for p in paths if p is not None]
    runs.sort(key=lambda r: r.task.stochastic)
    return rollout_figure([rollout_panel_for_run(r, seed) for r in runs])


def figure1(records: list) -> object:
    """``tinyscope report DIR``: Figure 1 from the folder's first finished det and stoch runs
    (lowest seed; a missing one leaves its row out)."""
    picked = []
    for regime in ("det", "stoch"):
        done = sorted((r for r in records if r.experiment == EXPERIMENTS[regime] and r.status == "done"),
                      key=lambda r: (r.seed, str(r.path)))
        picked.append(done[0].path if done else None)
    return figure1_for_paths(*picked)


FIG1_CAPTION = ("Figure 1: predictions on held-out rules (App. I.9, Table 15). Top: Rule 110 (greedy decoding); "
                "bottom: Stavskaya p = 0.29 (temperature-1 sampling, per-cell P(state 1)). Columns: ground truth, "
                "teacher-forced P(state 1), autoregressive rollout from the first T0 steps (red line)")
FIG1 = register_figure(FolderFigure("sih-fig1", FIG1_CAPTION, tuple(EXPERIMENTS.values()), figure1))
