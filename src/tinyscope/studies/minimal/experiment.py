"""Plus-last-even with the 2-dimensional minimal transformer (Mahajne & Moldwin, Tables 1-2).

Presets: ``paper`` is Table 2 (AdamW 1e-3, batch 8, 20,000 steps, checkpoints every 100,
evaluation every 200); ``cpu`` reaches the same rule error in far fewer steps with a larger
batch and a higher (3e-2), cosine-decayed rate, and starts again from a fresh initialization,
up to four times, when a phase ends above 1% rule error (:mod:`~tinyscope.studies.minimal.restarts`);
``smoke`` runs in seconds for tests.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.runs.experiment import Citation, Experiment, ReportSection, View, ViewOptions
from tinyscope.runs.registry import register
from tinyscope.studies.minimal.task import PlusLastEven, PlusLastEvenConfig, rule_targets
from tinyscope.train.trainer import TrainConfig

CITATION = Citation("Raneem Mahajne, Toviah Moldwin", "Fully Interpretable Minimal Transformers: From Geometry to Algorithm", 2026)


def minimal_model(**kw) -> TransformerConfig:
    """The paper's model: d_model = d_head = 2, one head, FFN 2->32->2 (ReLU), no LayerNorm,
    bias-free Q/K/V, no attention output projection, LM head with bias: 250 parameters."""
    base = dict(vocab_size=12, n_ctx=8, d_model=2, d_head=None, n_heads=[1], d_mlp=[32], act="relu",
                norm="none", attn_out_proj=False, qkv_bias=False, mlp_bias=True, unembed_bias=True, init="torch")
    base.update(kw)
    return TransformerConfig(**base)


@dataclass
class PlusLastEvenEvalConfig:
    n_val_windows: int = 1024
    n_generated: int = 100        # sequences generated for the sampled (public-code) rule error
    generated_length: int = 30


@dataclass
class PlusLastEvenRunConfig:
    seed: int = 0
    task: PlusLastEvenConfig = field(default_factory=PlusLastEvenConfig)
    model: TransformerConfig = field(default_factory=minimal_model)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: PlusLastEvenEvalConfig = field(default_factory=PlusLastEvenEvalConfig)
    restarts: int = 0  # fresh initializations after a main phase that ends above 1% rule error (restarts.py)

    def __post_init__(self):
        from tinyscope.errors import check

        check(isinstance(self.restarts, int) and 0 <= self.restarts <= 10,
              f"restarts={self.restarts} must be an integer in [0, 10]")

        check(self.model.n_ctx >= self.task.block_size,
              f"model.n_ctx={self.model.n_ctx} must be >= task.block_size={self.task.block_size}")
        check(self.model.vocab_size == 12, f"model.vocab_size={self.model.vocab_size} must be 12 for plus-last-even")


# Checkpoint selection: the expected rule error of sampled generation (see ``evaluator``), which
# counts a correct but unconfident argmax as partly wrong, with the argmax rule error breaking ties.
SELECT_METRIC, TIE_BREAK_METRIC = "rule_error_expected", "rule_error"


def _train(**kw) -> TrainConfig:
    base = dict(select_metric=SELECT_METRIC, select_mode="min", tie_break_metric=TIE_BREAK_METRIC)
    base.update(kw)
    return TrainConfig(**base)


PRESETS = {
    "smoke": lambda: PlusLastEvenRunConfig(
        task=PlusLastEvenConfig(n_sequences=200, n_eval_sequences=100),
        train=_train(steps=300, batch_size=32, lr=3e-3, eval_every=100, checkpoint_every=100, log_every=50),
        eval=PlusLastEvenEvalConfig(n_val_windows=256, n_generated=20)),
    "cpu": lambda: PlusLastEvenRunConfig(
        train=_train(steps=6000, batch_size=64, lr=3e-2, weight_decay=0.0, schedule="cosine", warmup_steps=100,
                     min_lr_ratio=0.05, eval_every=250, checkpoint_every=100, log_every=100, threads="auto"),
        restarts=4),
    "paper": lambda: PlusLastEvenRunConfig(
        train=_train(steps=20000, batch_size=8, lr=1e-3, weight_decay=1e-2, eval_every=200, checkpoint_every=100,
                     log_every=100, grad_clip=0.0)),
}


@torch.no_grad()
def sampled_rule_error(model: torch.nn.Module, n: int, length: int, block_size: int, seed: int) -> float:
    """The public code's metric: let the model generate ``n`` sequences of ``length`` tokens
    (multinomial sampling, context cropped to ``block_size``, random first token) and count
    constrained positions of the generations where it broke the rule."""
    gen = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, 12, (n, 1), generator=gen)  # (n, 1)
    for _ in range(length - 1):
        logits = model(seq[:, -block_size:])[:, -1]  # (n, V)
        nxt = torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=gen)  # (n, 1)
        seq = torch.cat([seq, nxt], dim=1)
    wrong = total = 0
    for row in seq.numpy():
        rt = rule_targets(row)[:-1]
        hit = rt >= 0
        total += int(hit.sum())
        wrong += int((row[1:][hit] != rt[hit]).sum())
    return wrong / total if total else 0.0


class PlusLastEvenExperiment(Experiment):
    name = "plus-last-even"
    description = "2-d minimal transformer on plus-last-even (Mahajne & Moldwin)"
    citation = CITATION
    study = "minimal"
    config_cls = PlusLastEvenRunConfig
    presets = PRESETS

    def build_task(self, cfg: PlusLastEvenRunConfig) -> PlusLastEven:
        return PlusLastEven(cfg.task)

    def build_model(self, cfg: PlusLastEvenRunConfig, task) -> Transformer:
        return Transformer(cfg.model)

    def evaluator(self, cfg: PlusLastEvenRunConfig, task: PlusLastEven):
        """On the held-out constrained positions (N of them, target y_i): ``rule_error`` =
        mean[argmax p_i != y_i] (the paper's Fig. 3 metric), ``rule_loss`` = mean[-log p_i(y_i)],
        and ``rule_error_expected`` = mean[1 - p_i(y_i)], the probability that a token sampled
        from the model breaks the rule (the error of generation, which the argmax hides when the
        model is right but unconfident); ``val_loss`` over every position of held-out windows."""
        ev, val = task.eval_set(), task.val_windows(cfg.eval.n_val_windows)
        ev_tokens = torch.from_numpy(ev.tokens)  # (N, W)
        rows = torch.arange(len(ev))
        query = torch.from_numpy(ev.meta["query"])  # (N,)
        target = torch.from_numpy(ev.meta["target"])  # (N,)
        val_t = val.to_torch()

        def evaluate(model: torch.nn.Module) -> dict:
            device = next(model.parameters()).device
            logits = model(ev_tokens.to(device))[rows, query].float().cpu()  # (N, V)
            val_logits = model(val_t["tokens"].to(device)).float().cpu()  # (M, W, V)
            p_target = torch.softmax(logits, -1)[rows, target]  # (N,)
            return {
                "rule_error": (logits.argmax(-1) != target).float().mean().item(),
                "rule_error_expected": (1.0 - p_target).mean().item(),
                "rule_loss": F.cross_entropy(logits, target).item(),
                "val_loss": F.cross_entropy(val_logits.flatten(0, 1), val_t["targets"].flatten()).item(),
            }

        return evaluate

    def final_evaluation(self, cfg, task, model) -> dict:
        metrics = super().final_evaluation(cfg, task, model)
        metrics["rule_error_sampled"] = sampled_rule_error(
            model, cfg.eval.n_generated, cfg.eval.generated_length, cfg.task.block_size,
            seed=cfg.task.data_seed + 3 if cfg.task.eval_seed is None else cfg.task.eval_seed)
        metrics["n_constrained"] = float(len(task.eval_set()))
        return metrics

    def stages(self, cfg: PlusLastEvenRunConfig, task: PlusLastEven) -> list:
        """``cfg.restarts`` restart stages (:mod:`~tinyscope.studies.minimal.restarts`)."""
        if not cfg.restarts:
            return []
        from tinyscope.runs.rundir import start_model
        from tinyscope.studies.minimal.restarts import restart_stages

        return restart_stages(cfg, self.evaluator(cfg, task), lambda: start_model(self, cfg, task))

    def fresh_eval_config(self, cfg: PlusLastEvenRunConfig, seed: int, n: int | None = None) -> PlusLastEvenRunConfig:
        """A held-out corpus of ``n`` sequences (default: the run's count) drawn from ``seed``."""
        task = dataclasses.replace(cfg.task, eval_seed=int(seed), n_eval_sequences=n or cfg.task.n_eval_sequences)
        return dataclasses.replace(cfg, task=task)

    def claims(self):
        from tinyscope.studies.minimal.claims import CLAIMS

        return CLAIMS

    def views(self, run, options: ViewOptions = ViewOptions()) -> list[View]:
        """Every figure of the geometric walkthrough that applies to the run (Fig. 2-15)."""
        from tinyscope.studies.minimal.views import run_views

        return run_views(run, options)

    def next_commands(self, run: str) -> list[str]:
        """The walkthrough's figures, the training movies, and a fresh evaluation set."""
        return [f"tinyscope viz {run}", f"tinyscope movie {run}", f"tinyscope eval {run} --seed 1"]

    def report_sections(self, run, full: bool = True) -> list[ReportSection]:
        """The checkpoint selection (rule error and generation error), the walkthrough in paper
        order and the training movies already rendered into RUN/movies (`tinyscope movie`); the
        quick page (smoke runs) has none of them."""
        if not full:
            return []
        from tinyscope.studies.minimal.movies import report_movies

        movies = report_movies(run.path)
        return [self.selection_section(run), ReportSection("Walkthrough (paper order)", self.views(run)),
                ReportSection("Training movies", (), movies)]

    @staticmethod
    def selection_section(run) -> ReportSection:
        """The selected step's argmax rule error beside its generation error, over training."""
        from tinyscope.studies.minimal.selection_views import selection_caption, selection_figure

        results = run.results
        view = View("00_checkpoint_selection", "Selection", selection_caption(results),
                    lambda: selection_figure(run.metrics(), results))
        return ReportSection("Checkpoint selection: rule error and generation error", [view])


register(PlusLastEvenExperiment())
