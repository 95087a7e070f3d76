"""NC-FFN language modelling: a small GPT with GELU vs NC-FFN, with and without sequence
quantifiers, at equal parameter count, on the synthetic licensing language or a user text file.

    tinyscope run ncffn-lm --preset cpu                                         # GELU baseline
    tinyscope run ncffn-lm --preset cpu --set model.ffn=nc                      # NC-FFN
    tinyscope run ncffn-lm --preset cpu --set model.ffn=nc --set quant.layers=0,1   # + quantifiers
    tinyscope run ncffn-lm --preset cpu --set data.path=book.txt --set data.level=char
    tinyscope run ncffn-lm --preset cpu --set task.language=npi   # the harder npi licensing language

``model.vocab_size`` comes from the task (licensing vocabulary, 256 bytes, or the file's
characters); windows are ``model.n_ctx`` tokens. With ``match_params=true`` (default) the FFN of
every quantified layer is narrowed so the model has the parameter count of the same model
without quantifiers (NC-FFN itself is parameter-neutral). Presets: ``smoke`` (seconds), ``cpu``
(minutes on 2 cores), ``paper`` (GPT-2 small's shapes on a byte-level text file,
``--set data.path=FILE``). The paper's own setting, GPT-2 small on a BPE corpus with BLiMP and
LAMBADA, is ``ncffn-gpt2`` (:mod:`~tinyscope.studies.ncffn.paper_lm`), where its claims live.

results.json: the held-out :func:`lm_metrics`, ``params_total|ffn|quantifiers``, and with
quantifiers the half-life summary and, on the classic licensing language, :func:`detector_counts`;
on the npi language the per-phenomenon slot and minimal-pair accuracies of
:func:`~tinyscope.studies.ncffn.licensing_eval.phenomenon_metrics`, at every evaluation.
``eval.eval_seed`` draws fresh held-out windows (`tinyscope eval RUN --seed S`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.errors import check
from tinyscope.models.transformer import TransformerConfig
from tinyscope.report.tables import Key, Metric, TableLayout
from tinyscope.runs.experiment import AnalysisOptions, AnalysisResult, Citation, Experiment, View, ViewOptions
from tinyscope.runs.registry import register
from tinyscope.studies.ncffn.licensing import ID, SLOT_KINDS, Licensing, LicensingConfig
from tinyscope.studies.ncffn.licensing_npi import PHENOMENA
from tinyscope.studies.ncffn.model import QuantifiedTransformer, lm_model_config, parameter_report
from tinyscope.studies.ncffn.quantifiers import QuantifierConfig
from tinyscope.tasks.text import TextConfig, TextTask
from tinyscope.train.trainer import TrainConfig

CITATION = Citation("Oskin", "Explicit Fuzzy Logic in the Feed-Forward Layer: Self-Forgetting Quantifiers Discover Legible Grammatical-Licensing Detectors", 2026, "arXiv 2606.31845")

SLOT_NAMES = {1: "than", 2: "by", 3: "nor", 4: "or", 5: "and"}


def gpt(**kw) -> TransformerConfig:
    base = dict(vocab_size=len(Licensing.vocab), n_ctx=64, d_model=96, d_head=24, n_heads=[4, 4], d_mlp=[384, 384],
                act="gelu", ffn="gelu", norm="pre", final_norm=True, attn_out_proj=True, qkv_bias=True,
                attn_out_bias=True, mlp_bias=True, unembed_bias=False, init="gpt2")
    base.update(kw)
    return TransformerConfig(**base)


@dataclass
class NCEvalConfig:
    max_windows: int = 400        # held-out windows per evaluation
    latch_half_life: float = 64.0  # a quantifier unit whose half-life reaches this many tokens is a latch
    eval_seed: int | None = None  # None: the run's held-out windows; else fresh ones drawn from this seed
    legibility_windows: int = 100  # held-out windows for the per-layer half-life and two-operand metrics

    def __post_init__(self):
        check(self.legibility_windows >= 1, f"eval.legibility_windows={self.legibility_windows} must be >= 1")


class FreshTextTask(TextTask):
    """A text file whose evaluation windows are ``max_eval_windows`` random windows of the held-out
    tail drawn from ``eval_seed`` (the held-out part of a file is its tail; a fresh set can only
    be other windows of it)."""

    def __init__(self, cfg: TextConfig, block_size: int, eval_seed: int):
        super().__init__(cfg, block_size)
        self.eval_seed = int(eval_seed)

    def eval_set(self):
        if self._eval is None:
            rng = np.random.default_rng([self.eval_seed, 7])
            starts = rng.integers(0, len(self.val_ids) - self.block_size - 1, size=self.cfg.max_eval_windows)
            self._eval = self._window(self.val_ids, np.sort(starts))
        return self._eval


@dataclass
class NCLMRunConfig:
    seed: int = 0
    task: LicensingConfig = field(default_factory=LicensingConfig)
    data: TextConfig = field(default_factory=TextConfig)  # data.path set: train on that file instead
    model: TransformerConfig = field(default_factory=gpt)
    quant: QuantifierConfig = field(default_factory=QuantifierConfig)
    match_params: bool = True
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: NCEvalConfig = field(default_factory=NCEvalConfig)

    def __post_init__(self):
        check(all(l < self.model.n_layers for l in self.quant.layers),
              f"quant.layers={self.quant.layers} names a layer beyond model.n_heads' {self.model.n_layers} layers")
        if not self.data.path:
            need = self.task.max_sentence_len
            check(self.model.n_ctx >= need,
                  f"model.n_ctx={self.model.n_ctx} must hold a whole licensing sentence: >= {need}")


def _train(**kw) -> TrainConfig:
    base = dict(lr=3e-3, betas=[0.9, 0.95], weight_decay=0.1, schedule="cosine", warmup_steps=100,
                min_lr_ratio=0.1, grad_clip=1.0, select_metric="val_loss", select_mode="min",
                checkpoint_every=0, keep_checkpoints=False, threads="auto")
    base.update(kw)
    return TrainConfig(**base)


PRESETS = {
    "smoke": lambda: NCLMRunConfig(
        task=LicensingConfig(max_gap=3, n_train_tokens=20_000, n_val_tokens=4_000, block_size=32),
        model=gpt(n_ctx=32, d_model=32, d_head=8, d_mlp=[64, 64]),
        quant=QuantifierConfig(n_exist=4, n_prop=4),
        train=_train(steps=60, batch_size=16, warmup_steps=10, eval_every=30, log_every=10),
        eval=NCEvalConfig(max_windows=64)),
    "cpu": lambda: NCLMRunConfig(
        task=LicensingConfig(max_gap=6, n_train_tokens=300_000, n_val_tokens=30_000, block_size=64),
        model=gpt(),
        quant=QuantifierConfig(n_exist=16, n_prop=16),
        train=_train(steps=1200, batch_size=32, eval_every=200, log_every=50),
        eval=NCEvalConfig(max_windows=300)),
    # GPT-2 small's shapes on bytes (the BPE setting of the paper is ncffn-gpt2); its optimiser and steps are not
    # public, so nanoGPT's OpenWebText recipe is used (AdamW 6e-4, betas 0.9/0.95, wd 0.1,
    # 2000 warmup steps, cosine to 10%), with batch 64 x 1024 tokens.
    "paper": lambda: NCLMRunConfig(
        data=TextConfig(path="openwebtext.txt", level="byte", val_fraction=0.005, max_eval_windows=200),
        model=gpt(vocab_size=256, n_ctx=1024, d_model=768, d_head=64, n_heads=[12] * 12, d_mlp=[3072] * 12),
        quant=QuantifierConfig(n_exist=32, n_prop=32),
        train=_train(steps=100_000, batch_size=64, lr=6e-4, warmup_steps=2000, eval_every=2000, log_every=100,
                     checkpoint_every=10_000, keep_checkpoints=True, threads=0),
        eval=NCEvalConfig(max_windows=200, latch_half_life=1024.0)),
}


def build_model_config(cfg: NCLMRunConfig, vocab_size: int) -> TransformerConfig:
    """The run's transformer config: the task's vocabulary, FFNs narrowed for quantifiers if matched."""
    return lm_model_config(cfg.model, cfg.quant, vocab_size, cfg.match_params)


@torch.no_grad()
def lm_metrics(model: torch.nn.Module, tokens: torch.Tensor, targets: torch.Tensor, slot: torch.Tensor | None,
               chunk: int = 64) -> dict:
    """Held-out loss, and for the licensing language the accuracy at each kind of slot.

    ``licensed_acc``: top-1 accuracy where the target is a licensed word (than, by, nor);
    ``licensed_acc_bayes``: the Bayes-optimal ceiling of that accuracy (when the gap is empty the
    licensor is followed by its word with probability 1/(max_gap+1) only, and ``,`` is likelier,
    so only slots after a gap's closing comma are predictable);
    ``licensed_pair_acc``: how often the licensed word outscores the default ``and`` there;
    ``acc_<word>``: top-1 accuracy per slot kind; ``and_acc``: at unlicensed twins' slots.
    """
    device = next(model.parameters()).device
    total, n = 0.0, 0
    correct: dict[int, list[torch.Tensor]] = {k: [] for k in SLOT_KINDS}
    pair: list[torch.Tensor] = []
    after_gap: list[torch.Tensor] = []
    for i in range(0, len(tokens), chunk):
        logits = model(tokens[i:i + chunk].to(device)).float().cpu()  # (b, T, V)
        tgt = targets[i:i + chunk]  # (b, T)
        total += F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), reduction="sum").item()
        n += tgt.numel()
        if slot is None:
            continue
        s = slot[i:i + chunk]  # (b, T)
        pred = logits.argmax(-1)  # (b, T)
        for k in SLOT_KINDS:
            correct[k].append((pred[s == k] == tgt[s == k]).float())
        lic = (s >= 1) & (s <= 3)
        after_gap.append((tokens[i:i + chunk][lic] == ID[","]).float())
        pair.append((logits[lic].gather(1, tgt[lic, None])[:, 0] > logits[lic][:, ID["and"]]).float())
    out = {"val_loss": total / n, "val_bits_per_token": total / n / math.log(2)}
    if slot is not None:
        for k, word in SLOT_NAMES.items():
            c = torch.cat(correct[k])
            out[f"acc_{word}"] = float(c.mean()) if len(c) else float("nan")
        lic = torch.cat([torch.cat(correct[k]) for k in (1, 2, 3)])
        out["licensed_acc"] = float(lic.mean()) if len(lic) else float("nan")
        out["licensed_acc_bayes"] = float(torch.cat(after_gap).mean()) if len(lic) else float("nan")
        p = torch.cat(pair)
        out["licensed_pair_acc"] = float(p.mean()) if len(p) else float("nan")
        out["and_acc"] = out.pop("acc_and")
    return out


DETECTOR_KEYS = {"comparative": "comparative", "passive participle": "participle", "negative polarity (neither)": "npi"}


def detector_counts(model: torch.nn.Module, batch) -> dict:
    """Which licensor classes have a quantifier unit that reads as their detector
    (:func:`~tinyscope.studies.ncffn.legibility.licensor_detectors`: it fires on the licensor and
    carries it to the licensed word): ``detector_<class>`` 1 or 0 for comparative, participle and
    npi, and ``licensor_classes_detected``, their sum (3: every licensor has a detector)."""
    from tinyscope.studies.ncffn.legibility import licensor_detectors

    table = licensor_detectors(model, batch)
    out = {f"detector_{DETECTOR_KEYS[name]}": float(any(r["detector"] for r in rows)) for name, rows in table.items()}
    return out | {"licensor_classes_detected": float(sum(out.values()))}


def _model_label(run) -> str:
    """GELU, NC-FFN or NC-FFN + quantifiers (``model.ffn`` and whether ``quant.layers`` is set)."""
    ffn = {"gelu": "GELU", "nc": "NC-FFN", "nc_bool": "fully Boolean FFN"}.get(run.config.get("model.ffn"),
                                                                          str(run.config.get("model.ffn")))
    return ffn + (" + quantifiers" if run.config.get("quant.layers") else "")


NPI_TABLE = TableLayout(
    name="ncffn-npi-phenomena",
    caption="npi licensing language: minimal-pair and slot top-1 accuracy by phenomenon at the selected step",
    experiments=("ncffn-lm",), where=lambda r: r.config.get("task.language") == "npi",
    rows=(Key("Model", _model_label, order=("GELU", "NC-FFN", "NC-FFN + quantifiers")), Key("Preset", "preset"),
          Key("Steps", "train.steps")),
    metrics=tuple(Metric(f"pairs: {ph}", f"pair_acc_{ph}", digits=3) for ph in PHENOMENA)
    + (Metric("pairs: mean", "npi_pair_acc", digits=3),)
    + tuple(Metric(f"slot top-1: {ph}", f"slot_acc_{ph}", digits=3) for ph in PHENOMENA)
    + (Metric("slot top-1: mean", "npi_slot_acc", digits=3),),
    description="NC-FFN, the npi language (task.language=npi): per-phenomenon accuracy, mean ± sample SD over seeds; "
                "the Bayes ceilings are in each run's slot_acc_bayes_* / pair_acc_bayes_* metrics")


class NCLMExperiment(Experiment):
    name = "ncffn-lm"
    description = "GPT with GELU vs NC-FFN (+ sequence quantifiers), licensing language or --set data.path"
    citation = CITATION
    study = "ncffn"
    config_cls = NCLMRunConfig
    presets = PRESETS

    def build_task(self, cfg: NCLMRunConfig):
        seed = cfg.eval.eval_seed
        if cfg.data.path:
            return TextTask(cfg.data, cfg.model.n_ctx) if seed is None else FreshTextTask(cfg.data, cfg.model.n_ctx, seed)
        return Licensing(dataclasses.replace(cfg.task, block_size=cfg.model.n_ctx), eval_seed=seed)

    def build_model(self, cfg: NCLMRunConfig, task) -> QuantifiedTransformer:
        return QuantifiedTransformer(build_model_config(cfg, task.vocab_size), cfg.quant)

    def evaluator(self, cfg: NCLMRunConfig, task):
        ev = task.eval_set().select(slice(0, cfg.eval.max_windows))
        tokens, targets = torch.from_numpy(ev.tokens), torch.from_numpy(ev.targets)
        if not cfg.data.path and cfg.task.language == "npi":  # per-phenomenon slots and minimal pairs
            from tinyscope.studies.ncffn.licensing_eval import phenomenon_metrics

            sets, grammar = task.phenomenon_sets(), cfg.task.grammar
            base = lambda model: lm_metrics(model, tokens, targets, None) | phenomenon_metrics(model, sets, grammar)  # noqa: E731
        else:
            slot = torch.from_numpy(ev.meta["slot"]) if "slot" in ev.meta else None
            base = lambda model: lm_metrics(model, tokens, targets, slot)  # noqa: E731
        probe = tokens[:cfg.eval.legibility_windows]

        def evaluate(model):  # and per layer: quantifier half-lives, two-operand logic of the NC-FFN pairs
            from tinyscope.studies.ncffn.legibility_training import layer_metrics

            return base(model) | layer_metrics(model, probe)

        return evaluate

    def final_evaluation(self, cfg: NCLMRunConfig, task, model) -> dict:
        from tinyscope.studies.ncffn.legibility import half_life_summary

        metrics = super().final_evaluation(cfg, task, model)
        metrics.update({f"params_{k}": float(v) for k, v in parameter_report(model).items()})
        if cfg.quant.layers:
            metrics.update(half_life_summary(model, cfg.eval.latch_half_life))
            if not cfg.data.path and cfg.task.language == "classic":
                metrics.update(detector_counts(model, task.eval_set().select(slice(0, cfg.eval.max_windows))))
        return metrics

    def fresh_eval_config(self, cfg: NCLMRunConfig, seed: int, n: int | None = None) -> NCLMRunConfig:
        """Held-out windows drawn afresh from ``seed``: ``n`` of them (default: the run's count).

        The licensing language gets a new held-out corpus (same grammar, large enough for ``n``
        sentence-aligned windows); a text file gets random windows of its held-out tail. The
        training data and the model are unchanged."""
        n_windows = n or cfg.eval.max_windows
        task, data = cfg.task, cfg.data
        if data.path:
            data = dataclasses.replace(data, max_eval_windows=n_windows)
        else:
            per_window = cfg.model.n_ctx + task.max_sentence_len + 2  # a window and at most one sentence to the next start
            task = dataclasses.replace(task, n_val_tokens=max(task.n_val_tokens, (n_windows + 2) * per_window))
        ev = dataclasses.replace(cfg.eval, eval_seed=int(seed), max_windows=n_windows)
        return dataclasses.replace(cfg, task=task, data=data, eval=ev)

    def claims(self):
        from tinyscope.studies.ncffn.claims import CLAIMS

        return [c for c in CLAIMS if c.experiment == self.name]

    def analyses(self) -> tuple[str, ...]:
        return ("legibility_over_training",)

    def analyze(self, run, options: AnalysisOptions) -> AnalysisResult:
        """``legibility_over_training``: at every kept checkpoint, the half-life of each quantifier
        unit by layer and the two-operand logic of each NC-FFN layer
        (:mod:`~tinyscope.studies.ncffn.legibility_training`), on ``options.n`` held-out windows
        drawn from ``options.seed``. Needs the run's checkpoints (``--set train.checkpoint_every=100
        --set train.keep_checkpoints=true``)."""
        from tinyscope.errors import TinyscopeError
        from tinyscope.studies.ncffn import legibility_training as lt

        steps = run.checkpoint_steps()
        if len(steps) < 2:
            raise TinyscopeError(f"{run.path} kept {len(steps)} checkpoint(s); an analysis across training needs "
                                 f"them: train with --set train.checkpoint_every=100 --set train.keep_checkpoints=true")
        if not run.cfg.quant.layers and not lt.nc_layers(run.model):
            raise TinyscopeError(f"{run.path} has neither quantifiers nor NC-FFN layers: nothing to trace "
                                 f"(train with --set model.ffn=nc --set quant.layers=0,1)")
        fresh = self.build_task(self.fresh_eval_config(run.cfg, options.seed, options.n))
        tokens = torch.from_numpy(fresh.eval_set().tokens[:options.n])
        records = lt.legibility_over_training(run, tokens, progress=options.progress)
        numbers = lt.summarize_trajectory(records) | {"n_windows": len(tokens)}
        figures, captions = {}, {}
        if run.cfg.quant.layers:
            figures["half_lives_over_training"] = lt.plot_half_lives_over_training(records)
            captions["half_lives_over_training"] = ("Half-life of every quantifier unit by layer at each checkpoint "
                                                    "(median black; the paper's ~1.5 tokens dashed).")
        if lt.nc_layers(run.model):
            figures["two_operand_logic_over_training"] = lt.plot_logic_over_training(records)
            captions["two_operand_logic_over_training"] = (
                "Share of NC-FFN fuzzy pairs whose two operands both vary (std >= 0.1, |corr| <= 0.9), and the "
                "weaker operand's median spread, by layer at each checkpoint.")
        return AnalysisResult(numbers, figures, captions)

    def tables(self) -> list[TableLayout]:
        """Per-phenomenon accuracy on the npi licensing language, over seeds."""
        return [NPI_TABLE]

    def views(self, run, options: ViewOptions = ViewOptions()) -> list[View]:
        """The half-lives of the trained sequence quantifiers (when the model has them)."""
        if not run.cfg.quant.layers:
            return []
        from tinyscope.studies.ncffn.legibility import plot_half_lives

        return [View("half_lives", "Legibility", "Half-life of each trained sequence quantifier.",
                     lambda: plot_half_lives(run.model))]


register(NCLMExperiment())

