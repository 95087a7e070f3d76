"""Spatial induction heads: in-context learning of cellular-automaton rules (paper 000).

Twelve experiments ``sih-{eca,v3,vn2d}-{shared,dedicated}-{det,stoch}``:

* eca  = 1D V=2 k=3 (elementary), v3 = 1D V=3 k=3, vn2d = 2D von Neumann V=2 k=5 (Table 10);
* shared = heads [1,1], MLPs in both layers; dedicated = heads [|U|,1], MLP only in layer 2;
* det = rules from disjoint train / val-out / test pools; stoch = fresh Dirichlet(1) rules.

Presets: ``paper`` = Tables 10-12 (batch 1024, 50M trajectories x epochs); ``cpu`` = sized for
two CPU cores (see docs/results/spatial_induction.md for what was tried); ``smoke`` = seconds, for tests.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from tinyscope.errors import check
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.report.tables import Key, Metric, TableLayout, register_table
from tinyscope.runs.experiment import AnalysisOptions, AnalysisResult, Citation, Experiment, View, ViewOptions
from tinyscope.runs.registry import register
from tinyscope.studies.spatial_induction.cross_setting import FIG3_TABLE, FIG4_TABLE  # also registers Figs. 3-4
from tinyscope.studies.spatial_induction.task import DATA_VERSION, CellularConfig, CellularTask, fresh_eval_task
from tinyscope.train.trainer import TrainConfig

CITATION = Citation("", "Spatial Induction Heads: In-Context Learning of Multidimensional Cellular Automata", 2026)


def soft_target_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """Mean cross-entropy H(q, p_model) against soft targets q = ``batch["soft_targets"]``
    (B, L, vocab) over ``loss_mask``: with q = q_true(. | parents) it is the conditional
    expectation of the sampled-label loss (``task.train_targets=expected``)."""
    logits = model(batch["tokens"])  # (B, L, vocab)
    mask = batch["loss_mask"]  # (B, L)
    logp = torch.log_softmax(logits[mask].float(), -1)  # (M, vocab)
    return -(batch["soft_targets"][mask] * logp).sum(-1).mean()


# ------------------------------------------------------------------ settings (Table 10)
SETTINGS = {
    "eca": dict(neighbourhood="elementary", V=2, det=dict(grid=[16], T=10, T0=4), stoch=dict(grid=[16], T=20, T0=10),
                symmetry=("reflection", "complement"), holdout=[110], routing=4),
    "v3": dict(neighbourhood="elementary", V=3, det=dict(grid=[32], T=12, T0=8), stoch=dict(grid=[16], T=20, T0=10),
               symmetry=("none", "all"), holdout=[], routing=4),
    "vn2d": dict(neighbourhood="von_neumann", V=2, det=dict(grid=[6, 6], T=12, T0=8),
                 stoch=dict(grid=[6, 6], T=20, T0=10), symmetry=("none", "complement"), holdout=[], routing=8),
}

# (d_model, d_ffn, lr, beta2, epochs) from Tables 11 (det) and 12 (stoch)
PAPER_HPARAMS = {
    ("eca", "shared", "det"): (128, 512, 1e-3, 0.999, 3), ("eca", "dedicated", "det"): (128, 512, 1e-3, 0.999, 3),
    ("v3", "shared", "det"): (256, 1024, 5e-4, 0.95, 8), ("v3", "dedicated", "det"): (256, 1024, 5e-4, 0.95, 8),
    ("vn2d", "shared", "det"): (1024, 4096, 1e-3, 0.95, 5), ("vn2d", "dedicated", "det"): (1024, 4096, 1e-3, 0.95, 5),
    ("eca", "shared", "stoch"): (256, 1024, 1e-3, 0.999, 15), ("eca", "dedicated", "stoch"): (128, 512, 1e-3, 0.999, 8),
    ("v3", "shared", "stoch"): (256, 1024, 5e-4, 0.95, 8), ("v3", "dedicated", "stoch"): (256, 1024, 5e-4, 0.95, 8),
    ("vn2d", "shared", "stoch"): (1024, 4096, 5e-4, 0.95, 10), ("vn2d", "dedicated", "stoch"): (512, 2048, 1e-3, 0.95, 5),
}
PAPER_TRAJECTORIES = 50_000_000
PAPER_BATCH = 1024
RESTART_SALT = (23,)  # this study's restart stream (runs/restarts.py)


@dataclass
class SihEvalConfig:
    eval_batch: int = 256          # trajectories per forward pass in evaluation
    n_ar: int = 256                # test trajectories used for the autoregressive metrics
    ar_seed: int = 42              # App. I.3: all evaluations use seed 42
    # val trajectories whose layer-1 attention gives, at every evaluation, val_l1_routing_peaks (the
    # distinct routing cells the heads point at) and val_l1_routing_coverage (the most attention one
    # head puts on them) (routing_heads.py; mechanism gates); 0: off
    head_peaks_n: int = 0

    def __post_init__(self):
        check(isinstance(self.head_peaks_n, int) and self.head_peaks_n >= 0,
              f"eval.head_peaks_n={self.head_peaks_n} must be an integer >= 0")


@dataclass
class SihRunConfig:
    seed: int = 0
    task: CellularConfig = field(default_factory=CellularConfig)
    model: TransformerConfig = field(default_factory=TransformerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: SihEvalConfig = field(default_factory=SihEvalConfig)
    # fresh starts for a main phase that misses its gate (train.gate_step): restart k trains a new
    # draw with the same recipe, the last one to the end whatever it reaches (runs/restarts.py)
    restarts: int = 0

    def __post_init__(self):
        check(isinstance(self.restarts, int) and 0 <= self.restarts <= 10,
              f"restarts={self.restarts} must be an integer in [0, 10]")
        check(not self.restarts or self.train.gate_step > 0,
              f"restarts={self.restarts} needs a gate to abandon a start: set train.gate_step, train.gate_metric "
              "and train.gate_threshold")
        routing_metrics = [m for m in (self.train.gate_metric, self.train.select_metric, self.train.stop_metric)
                           if m is not None and m.startswith("val_l1_routing_")]
        check(not routing_metrics or self.eval.head_peaks_n > 0,
              f"{routing_metrics[0] if routing_metrics else ''} is measured only with eval.head_peaks_n > 0 "
              f"(the val trajectories whose layer-1 attention it reads; the presets use {HEAD_PEAKS_N})")
        n_ctx = CellularTask(self.task).n_ctx
        check(self.model.n_ctx >= n_ctx, f"model.n_ctx={self.model.n_ctx} must be >= the stream's {n_ctx} input positions")
        vocab = CellularTask(self.task).vocab_size
        check(self.model.vocab_size == vocab,
              f"model.vocab_size={self.model.vocab_size} must be the stream's vocabulary {vocab} "
              f"(task.V={self.task.V}, task.token_ids={self.task.token_ids})")


def task_config(setting: str, regime: str, **kw) -> CellularConfig:
    s = SETTINGS[setting]
    base = dict(neighbourhood=s["neighbourhood"], V=s["V"], rules="deterministic" if regime == "det" else "stochastic",
                symmetry_spatial=s["symmetry"][0], symmetry_states=s["symmetry"][1], holdout=list(s["holdout"]),
                data_version=DATA_VERSION, **s[regime])
    base.update(kw)
    return CellularConfig(**base)


def model_config(task: CellularConfig, arch: str, d_model: int, d_ffn: int, n_routing: int, **kw) -> TransformerConfig:
    """Pre-LN 2-layer transformer, learned absolute positions, no final LayerNorm, bias-free
    output head, biases in attention and MLPs, each layer's head width d_model / heads (the
    public code's nn.MultiheadAttention; REFERENCE.md)."""
    heads = [1, 1] if arch == "shared" else [n_routing, 1]
    mlp = [d_ffn, d_ffn] if arch == "shared" else [0, d_ffn]
    layout = CellularTask(task).layout
    base = dict(vocab_size=layout.vocab_size, n_ctx=layout.input_length, d_model=d_model, d_head=None, n_heads=heads,
                d_mlp=mlp, act="relu", norm="pre", final_norm=False, attn_out_proj=True, qkv_bias=True,
                attn_out_bias=True, mlp_bias=True, unembed_bias=False, positions="learned", init="torch")
    base.update(kw)
    return TransformerConfig(**base)


def _select(regime: str) -> dict:
    if regime == "det":
        return dict(select_metric="val_tf_seq_acc", select_mode="max", tie_break_metric="val_loss")
    return dict(select_metric="val_tf_kl_true", select_mode="min")


def paper_preset(setting: str, arch: str, regime: str):
    d, d_ffn, lr, beta2, epochs = PAPER_HPARAMS[(setting, arch, regime)]
    steps = PAPER_TRAJECTORIES * epochs // PAPER_BATCH
    task = task_config(setting, regime, n_val=4096, n_test=16384)
    return lambda: SihRunConfig(
        task=task, model=model_config(task, arch, d, d_ffn, SETTINGS[setting]["routing"]),
        train=TrainConfig(steps=steps, batch_size=PAPER_BATCH, lr=lr, betas=[0.9, beta2], weight_decay=0.2,
                          schedule="cosine", warmup_steps=max(1, int(0.004 * steps)), grad_clip=1.0,
                          eval_every=2000, checkpoint_every=10000, log_every=200, patience=999, min_delta=0.0005,
                          **_select(regime)),
        eval=SihEvalConfig(n_ar=4096))


# (setting, arch, regime) -> (gate step, gate metric, threshold, restarts) of the cpu preset: a
# start whose circuit has not formed by the gate step is replaced (docs/results/spatial_induction.md,
# "Fresh starts"). ECA: the match head, read off val TF cell accuracy. V = 3: the layer-1 heads must
# point at 3 distinct routing cells; starts that copy one weighted gather into three heads sit at
# 0.95-0.97 accuracy like the good ones at step 3,000 and end near 0.99 ("Why seed 2 stops at 0.989").
# V = 3 stochastic (from the ECA model): a start that takes the transfer reads val TF cell 0.51-0.56
# by step 1,000; one that does not stays at the marginal predictor's 0.35-0.37 to the end
# ("The V = 3 Dedicated-heads stochastic row with the transfer preset"). Shared-head ECA (from the
# Dedicated-heads model): the one head's routing coverage, 0.88-0.93 for a head that gathers and
# 0.03-0.15 for one that reads older rows ("Shared-head ECA with a routing-coverage gate")
CPU_GATES = {("eca", "dedicated", "det"): (3000, "val_tf_cell_acc", 0.99, 3),
             ("v3", "dedicated", "det"): (3000, "val_l1_routing_peaks", 3.0, 4),
             ("v3", "dedicated", "stoch"): (2000, "val_tf_cell_acc", 0.5, 2),
             ("eca", "shared", "det"): (1000, "val_l1_routing_coverage", 0.7, 2),
             ("v3", "shared", "det"): (1000, "val_l1_routing_coverage", 0.7, 2)}
HEAD_PEAKS_N = 16  # val trajectories read for val_l1_routing_peaks where a gate uses it
# The horizon of the near-deterministic phase of a stochastic cpu preset where it is not T = 10:
# V = 3 at T = 10 never leaves the marginal predictor (test TF KL 0.174), at the full T = 20 it
# ends at 0.018 (docs/results/spatial_induction.md, "V = 3 Dedicated-heads stochastic").
STOCH_PHASE1_T = {"v3": 20}

@dataclass(frozen=True)
class Transfer:
    """A cpu preset that starts from a converged zoo model of the same geometry (``train.init_from``)
    instead of a fresh draw, with the tensors ``exclude`` names drawn afresh."""
    source: str                 # zoo:NAME of the converged model
    exclude: tuple[str, ...]    # train.init_exclude: tensors the source lacks or that change shape
    steps: int
    near_det_steps: int = 0     # stochastic rules: steps on Dirichlet(0.02) rules at the full T first


# V = 3 stochastic from the ECA stochastic model (16-cell ring, T = 20), whose layer-1 heads already
# gather the parent cells; the token embedding and unembedding (4 -> 5 tokens) are drawn afresh.
# From scratch no V = 3 start formed the match in 18,000 steps (test TF KL 0.018); from the ECA
# model layer 2 puts 0.81 of its mass on exact matches by step 5,500 and the run ends at 0.0043
# (docs/results/spatial_induction.md, "V = 3 stochastic from the ECA model").
# Shared-head from the Dedicated-heads model of the same setting: its Q, K, V and O matrices have
# the same shapes (one head of width 64 in place of four of 16), so the one head starts on the routing
# cells (coverage 0.91 at the end against 0.04-0.15 for most fresh starts) and only learns to weigh
# them apart; the layer-1 MLP the Shared-head code decodes with is drawn afresh. No horizon
# curriculum: on its T = 3 and 5 streams seed 1 lost the transferred gather (val TF cell 0.69 at
# step 2,500, where seed 0 read 0.96), and without it the gather is there from step 500
# (docs/results/spatial_induction.md, "Shared-head from the Dedicated-heads model"). V = 3 the same
# way: seed 0 ends at test TF cell 0.981 against 0.675 (worst of three) from scratch ("V = 3 Shared-head from
# the Dedicated-heads model").
SHARED_FROM_DEDICATED = ("blocks.0.ln2.*", "blocks.0.mlp.*")
CPU_TRANSFERS = {
    ("v3", "dedicated", "stoch"): Transfer("zoo:sih-eca-dedicated-stoch-cpu", ("W_E.weight", "W_U.weight"), 10000,
                                           near_det_steps=4000),
    ("eca", "shared", "det"): Transfer("zoo:sih-eca-dedicated-det-cpu", SHARED_FROM_DEDICATED, 8000),
    ("v3", "shared", "det"): Transfer("zoo:sih-v3-dedicated-det-cpu", SHARED_FROM_DEDICATED, 8000),
}


def cpu_preset(setting: str, arch: str, regime: str):
    """Sized for 2 CPU cores: d_model 64, batch 32, GPT-2 initialization (std 0.02), Muon (0.02)
    on the block matrices with AdamW 1e-2 on the rest, and a warmup-stable-decay schedule (200
    warmup steps, the full rate until the last quarter, then a cosine to 5%); 4,096 test
    trajectories (the k-gram columns stable to ~0.003), every one rolled out for deterministic
    rules and 1,024 for stochastic ones (the KV-cached rollout of a 2-D stochastic stream costs
    minutes per thousand trajectories here). Deterministic rules: 8,000 steps in 1-D and 16,000
    in 2-D (at 8,000 a 2-D model still gains in the decay: val TF sequence accuracy 0.47 at
    6,500, 0.945 at 8,000), starting with a short horizon curriculum (T = 3, then 5, for 1000
    batches each); in ``CPU_GATES`` a start below its gate metric's threshold at the gate step is
    replaced by a fresh one (``restarts``). Stochastic rules: 18,000 steps; the first 12,000 draw near-deterministic
    Dirichlet(0.02) rules at T = 3, 5, then 10 (``STOCH_PHASE1_T``: V = 3 at its full T = 20; the
    gather-and-match circuit forms there, on cheap short streams), the rest Dirichlet(1) rules at the full T. With AdamW alone the stochastic circuit formed on one ECA seed of three;
    what was tried and measured is in docs/results/spatial_induction.md. The rows of
    ``CPU_TRANSFERS`` start from a converged zoo model of the same geometry instead."""
    d, init = 64, {}
    transfer = CPU_TRANSFERS.get((setting, arch, regime))
    if regime == "det" and transfer is not None:  # the source already reads full streams
        steps, lr, curriculum = transfer.steps, 1e-2, {}
    elif regime == "det":
        steps = 16000 if setting == "vn2d" else 8000
        lr, curriculum = 1e-2, dict(curriculum_T=[3, 5], curriculum_steps=[1000, 1000])
    elif transfer is not None:
        steps, lr = transfer.steps, 1e-2
        curriculum = dict(curriculum_T=[SETTINGS[setting]["stoch"]["T"]], curriculum_steps=[transfer.near_det_steps],
                          curriculum_alpha=[0.02])
    else:
        steps, lr = 18000, 1e-2
        curriculum = dict(curriculum_T=[3, 5, STOCH_PHASE1_T.get(setting, 10)], curriculum_steps=[1000, 1000, 10000],
                          curriculum_alpha=[0.02, 0.02, 0.02])
    if transfer is not None:
        init = dict(init_from=transfer.source, init_exclude=list(transfer.exclude))
    optimizer = dict(optimizer="muon", muon_lr=0.02)
    gate, restarts, head_peaks_n = {}, 0, 0
    if (setting, arch, regime) in CPU_GATES:
        step, metric, threshold, restarts = CPU_GATES[(setting, arch, regime)]
        gate = dict(gate_metric=metric, gate_step=step, gate_threshold=threshold)
        head_peaks_n = HEAD_PEAKS_N if metric.startswith("val_l1_routing_") else 0
    task = task_config(setting, regime, n_val=256, n_test=4096, **curriculum)
    return lambda: SihRunConfig(
        task=task, model=model_config(task, arch, d, 4 * d, SETTINGS[setting]["routing"], init="gpt2"),
        train=TrainConfig(steps=steps, batch_size=32, lr=lr, betas=[0.9, 0.99], weight_decay=0.1, schedule="wsd",
                          warmup_steps=200, decay_fraction=0.25, min_lr_ratio=0.05, grad_clip=1.0, eval_every=500,
                          checkpoint_every=1000, log_every=100, threads="auto", **optimizer, **_select(regime), **gate,
                          **init),
        eval=SihEvalConfig(n_ar=4096 if regime == "det" else 1024, head_peaks_n=head_peaks_n), restarts=restarts)


def smoke_preset(setting: str, arch: str, regime: str):
    s = SETTINGS[setting]
    small = dict(grid=[8], T=5, T0=3, n_val=16, n_test=16)
    if regime == "stoch":
        small.update(T=6, T0=4)
    if setting == "v3":
        small.update(grid=[16], T=10, T0=9)
    if setting == "vn2d":
        small.update(grid=[6, 6], T=7, T0=6)
    if setting != "eca" and regime == "det":  # pools of App. I.1's shape, small enough to build in a second
        small.update(pool_sizes=[3000, 300, 300] if setting == "v3" else [2000, 200, 200])
    task = task_config(setting, regime, **small)
    return lambda: SihRunConfig(
        task=task, model=model_config(task, arch, 16, 32, s["routing"]),
        train=TrainConfig(steps=20, batch_size=8, lr=3e-3, eval_every=10, checkpoint_every=10, log_every=5, threads="auto",
                          **_select(regime)),
        eval=SihEvalConfig(eval_batch=16, n_ar=8))


class SihExperiment(Experiment):
    citation = CITATION
    study = "spatial_induction"

    def __init__(self, setting: str, arch: str, regime: str):
        self.setting, self.arch, self.regime = setting, arch, regime
        self.name = f"sih-{setting}-{arch}-{regime}"
        kind = {"eca": "1D V=2 k=3", "v3": "1D V=3 k=3", "vn2d": "2D von Neumann V=2 k=5"}[setting]
        self.description = f"spatial induction heads: {kind}, {arch} L1, {'deterministic' if regime == 'det' else 'stochastic'} rules"
        self.config_cls = SihRunConfig
        self.presets = {"smoke": smoke_preset(setting, arch, regime), "cpu": cpu_preset(setting, arch, regime),
                        "paper": paper_preset(setting, arch, regime)}

    @property
    def stochastic(self) -> bool:
        return self.regime == "stoch"

    def build_task(self, cfg: SihRunConfig) -> CellularTask:
        return CellularTask(cfg.task)

    def build_model(self, cfg: SihRunConfig, task: CellularTask) -> Transformer:
        return Transformer(cfg.model)

    def objective(self, cfg: SihRunConfig, task: CellularTask):
        return soft_target_loss if cfg.task.train_targets == "expected" else None

    def stages(self, cfg: SihRunConfig, task: CellularTask) -> list:
        """Fresh starts (``cfg.restarts``) after a main phase its gate stopped; each restart
        replays the horizon curriculum on a task of its own."""
        if not cfg.restarts:
            return []
        from tinyscope.runs.restarts import gated_restart_stages
        from tinyscope.runs.rundir import start_model

        return gated_restart_stages(cfg.seed, cfg.restarts, cfg.train, self.evaluator(cfg, task),
                                    lambda: start_model(self, cfg, task), fresh_task=lambda: CellularTask(cfg.task),
                                    salt=RESTART_SALT)

    def evaluator(self, cfg: SihRunConfig, task: CellularTask):
        from tinyscope.studies.spatial_induction.metrics import model_logits, teacher_forced_metrics
        from tinyscope.studies.spatial_induction.routing_heads import (
            distinct_routing_peaks,
            routing_coverage,
            routing_mass,
        )

        val = task.eval_set("val")

        def evaluate(model: torch.nn.Module) -> dict:
            logits = model_logits(model, val.tokens, cfg.eval.eval_batch)
            m = teacher_forced_metrics(logits, task.layout, val.meta["traj"], val.targets, val.loss_mask,
                                       val.meta["tables"], self.stochastic)
            out = {f"val_{k}": v for k, v in m.items()}
            if cfg.eval.head_peaks_n:
                mass = routing_mass(model, val.tokens[:cfg.eval.head_peaks_n], task.layout, cfg.task.T0)
                out["val_l1_routing_peaks"] = float(distinct_routing_peaks(mass))
                out["val_l1_routing_coverage"] = routing_coverage(mass)
            return out

        return evaluate

    def final_evaluation(self, cfg: SihRunConfig, task: CellularTask, model: torch.nn.Module) -> dict:
        from tinyscope.studies.spatial_induction.metrics import model_logits, teacher_forced_metrics
        from tinyscope.studies.spatial_induction.rollout import autoregressive_metrics

        model.eval()
        out = self.evaluator(cfg, task)(model)
        test = task.eval_set("test")
        logits = model_logits(model, test.tokens, cfg.eval.eval_batch)
        tf = teacher_forced_metrics(logits, task.layout, test.meta["traj"], test.targets, test.loss_mask,
                                    test.meta["tables"], self.stochastic)
        out.update({f"test_{k}": v for k, v in tf.items()})
        if not self.stochastic:  # diagnostic val-in splits (training rules, new initial states)
            for split in ("val_in", "val_in_nofilter"):
                ev = task.eval_set(split)
                m = teacher_forced_metrics(model_logits(model, ev.tokens, cfg.eval.eval_batch), task.layout,
                                           ev.meta["traj"], ev.targets, ev.loss_mask)
                out[f"{split}_tf_cell_acc"] = m["tf_cell_acc"]
        n = min(cfg.eval.n_ar, len(test))
        ar = autoregressive_metrics(model, task.layout, test.meta["traj"][:n], cfg.task.T0, stochastic=self.stochastic,
                                    seed=cfg.eval.ar_seed, batch_size=cfg.eval.eval_batch)
        out.update({f"test_{k}": v for k, v in ar.items()})
        return {k: float(v) for k, v in out.items()}

    def fresh_eval_config(self, cfg: SihRunConfig, seed: int, n: int | None = None) -> SihRunConfig:
        """Val-out, test and val-in sets drawn afresh from ``seed`` (``n`` trajectories each; the
        run's counts when None): held-out rules of the same pools (deterministic) or fresh
        Dirichlet rules (stochastic), coverage-filtered as the run's own; model unchanged."""
        return dataclasses.replace(cfg, task=fresh_eval_task(cfg.task, seed, n))

    def claims(self) -> list:
        """The cells of Tables 1, 13 and 14 this experiment's runs measure (claims.py)."""
        from tinyscope.studies.spatial_induction.claims import claims_of

        return claims_of(self.name)

    def views(self, run, options: ViewOptions = ViewOptions()) -> list[View]:
        """The rollout figure (Fig. 1 / App. I.9) for 1D binary runs."""
        from tinyscope.studies.spatial_induction.rollout import rollout_figure_for_run

        if self.setting != "eca":
            return []
        return [View("rollout", "Figure 1", "Teacher-forced and autoregressive predictions on held-out rules "
                     "against the true trajectory.", lambda: rollout_figure_for_run(run))]

    def tables(self) -> list:
        """Table 13 (deterministic rules) or Table 14 (stochastic rules), and the numbers behind
        Figures 3 and 4 (cross_setting.py) from the runs' analyses."""
        return [TABLE13 if self.regime == "det" else TABLE14, FIG3_TABLE, FIG4_TABLE]

    def analyses(self) -> tuple[str, ...]:
        from tinyscope.studies.spatial_induction.analysis import ANALYSES

        return tuple(ANALYSES)

    def analysis_settings(self) -> dict[str, object]:
        """The analysis set sizes besides ``--n`` (``analysis.SIZE_FIELDS``; paper values in ``PAPER_SIZES``)."""
        from tinyscope.studies.spatial_induction.analysis import SIZE_FIELDS, AnalysisConfig

        return {name: getattr(AnalysisConfig(), name) for name in SIZE_FIELDS}

    def analyze(self, run, options: AnalysisOptions) -> AnalysisResult:
        """Attention maps, alignment (App. I.5), ablation with random controls (I.6), rule-disjoint
        linear probes (I.7) and t-SNE (I.8) on ``options.n`` fresh test trajectories, with the set
        sizes of ``options.settings``."""
        from tinyscope.config import apply_overrides
        from tinyscope.studies.spatial_induction.analysis import ANALYSES, CAPTIONS, AnalysisConfig, analyze

        cfg = apply_overrides(AnalysisConfig(n_traj=options.n, seed=options.seed, only=list(options.only or ANALYSES)),
                              list(options.settings))
        numbers, figures = analyze(run.model, run.task, cfg, progress=options.progress)
        captions = {name.replace(" ", "_"): CAPTIONS.get(name.split("_")[0], "") for name in figures}
        return AnalysisResult(numbers, figures, captions)


for _setting in SETTINGS:
    for _arch in ("shared", "dedicated"):
        for _regime in ("det", "stoch"):
            register(SihExperiment(_setting, _arch, _regime))


# ------------------------------------------------------------------ Tables 13 and 14
TASK_LABELS = {"eca": "1D V=2, k=3", "v3": "1D V=3, k=3", "vn2d": "2D VN V=2, k=5"}
ARCH_LABELS = {"shared": "Shared-head", "dedicated": "Dedicated-heads"}


def _task_label(run) -> str:
    return TASK_LABELS[run.experiment.split("-")[1]]


def _arch_label(run) -> str:
    return ARCH_LABELS[run.experiment.split("-")[2]]


_ROWS = (Key("Task", _task_label, order=tuple(TASK_LABELS.values())),
         Key("Arch.", _arch_label, order=tuple(ARCH_LABELS.values())),
         Key("Preset", "preset"))

TABLE13 = register_table(TableLayout(
    name="sih-table13", caption="Table 13: deterministic evaluation on held-out test rules",
    experiments=tuple(f"sih-{setting}-*-det" for setting in SETTINGS), rows=_ROWS,  # trained runs, not compiled
    metrics=(Metric("TF seq acc", "test_tf_seq_acc", digits=4), Metric("TF cell acc", "test_tf_cell_acc", digits=4),
             Metric("AR cell acc", "test_ar_cell_acc", digits=4)),
    description="spatial induction heads, App. I.4 Table 13 (mean ± sample SD over seeds)"))

TABLE14 = register_table(TableLayout(
    name="sih-table14", caption="Table 14: stochastic evaluation on held-out test trajectories",
    experiments=tuple(f"sih-{setting}-*-stoch" for setting in SETTINGS), rows=_ROWS,
    metrics=(Metric("TF KL kg||m", "test_tf_kl_kgram", digits=4), Metric("TF KL true||m", "test_tf_kl_true", digits=4),
             Metric("TF cell acc", "test_tf_cell_acc", digits=4), Metric("(kgram)", "test_kgram_acc", digits=4),
             Metric("AR cell acc", "test_ar_cell_acc", digits=4), Metric("(kgram)", "test_ar_cell_acc_kgram", digits=4),
             Metric("AR KL kg||m", "test_ar_kl_kgram", digits=4)),
    description="spatial induction heads, App. I.4 Table 14 (mean ± sample SD over seeds)"))

