"""NC-FFN language modelling: a small GPT with GELU vs NC-FFN, with and without sequence
quantifiers, at equal parameter count, on the synthetic licensing language or a user text file.

    tinyscope run ncffn-lm --preset cpu                                         # GELU baseline
    tinyscope run ncffn-lm --preset cpu --set model.ffn=nc                      # NC-FFN
    tinyscope run ncffn-lm --preset cpu --set model.ffn=nc --set quant.layers=0,1   # + quantifiers
    tinyscope run ncffn-lm --preset cpu --set data.path=book.txt --set data.level=char

``model.vocab_size`` comes from the task (licensing vocabulary, 256 bytes, or the file's
characters); windows are ``model.n_ctx`` tokens. With ``match_params=true`` (default) the FFN of
every quantified layer is narrowed so the model has the parameter count of the same model
without quantifiers (NC-FFN itself is parameter-neutral). Presets: ``smoke`` (seconds), ``cpu``
(minutes on 2 cores), ``paper`` (the 125M GPT-2-small / OpenWebText setup; supply the text with
``--set data.path=openwebtext.txt``; byte-level, since tinyscope ships no BPE tokenizer).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from tinyscope.errors import check
from tinyscope.models.transformer import TransformerConfig
from tinyscope.runs.experiment import Citation, Experiment, View, ViewOptions
from tinyscope.runs.registry import register
from tinyscope.studies.ncffn.licensing import ID, SLOT_KINDS, Licensing, LicensingConfig
from tinyscope.studies.ncffn.model import QuantifiedTransformer, equal_parameter_widths, parameter_report
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
            check(self.model.n_ctx >= 14 + self.task.max_gap,
                  f"model.n_ctx={self.model.n_ctx} must hold a whole licensing sentence: >= {14 + self.task.max_gap}")


def _train(**kw) -> TrainConfig:
    base = dict(lr=3e-3, betas=[0.9, 0.95], weight_decay=0.1, schedule="cosine", warmup_steps=100,
                min_lr_ratio=0.1, grad_clip=1.0, select_metric="val_loss", select_mode="min",
                checkpoint_every=0, keep_checkpoints=False, threads=1)
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
    # The paper's 125M setting (GPT-2 small on OpenWebText); its optimiser and steps are not
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
    model = dataclasses.replace(cfg.model, vocab_size=vocab_size)
    if cfg.match_params and cfg.quant.layers:
        model = equal_parameter_widths(model, cfg.quant)
    return model


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


class NCLMExperiment(Experiment):
    name = "ncffn-lm"
    description = "GPT with GELU vs NC-FFN (+ sequence quantifiers), licensing language or --set data.path"
    citation = CITATION
    study = "ncffn"
    config_cls = NCLMRunConfig
    presets = PRESETS

    def build_task(self, cfg: NCLMRunConfig):
        if cfg.data.path:
            return TextTask(cfg.data, cfg.model.n_ctx)
        return Licensing(dataclasses.replace(cfg.task, block_size=cfg.model.n_ctx))

    def build_model(self, cfg: NCLMRunConfig, task) -> QuantifiedTransformer:
        return QuantifiedTransformer(build_model_config(cfg, task.vocab_size), cfg.quant)

    def evaluator(self, cfg: NCLMRunConfig, task):
        ev = task.eval_set().select(slice(0, cfg.eval.max_windows))
        tokens, targets = torch.from_numpy(ev.tokens), torch.from_numpy(ev.targets)
        slot = torch.from_numpy(ev.meta["slot"]) if "slot" in ev.meta else None
        return lambda model: lm_metrics(model, tokens, targets, slot)

    def final_evaluation(self, cfg: NCLMRunConfig, task, model) -> dict:
        from tinyscope.studies.ncffn.legibility import half_life_summary

        metrics = super().final_evaluation(cfg, task, model)
        metrics.update({f"params_{k}": float(v) for k, v in parameter_report(model).items()})
        if cfg.quant.layers:
            metrics.update(half_life_summary(model, cfg.eval.latch_half_life))
        return metrics

    def views(self, run, options: ViewOptions = ViewOptions()) -> list[View]:
        """The half-lives of the trained sequence quantifiers (when the model has them)."""
        if not run.cfg.quant.layers:
            return []
        from tinyscope.studies.ncffn.legibility import plot_half_lives

        return [View("half_lives", "Legibility", "Half-life of each trained sequence quantifier.",
                     lambda: plot_half_lives(run.model))]


register(NCLMExperiment())

