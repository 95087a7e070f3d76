"""NC-FFN at the paper's scale: a GPT-2-small decoder on a user's BPE corpus, GELU vs NC-FFN vs
NC-FFN + sequence quantifiers at equal parameter count, scored on held-out loss, BLiMP and LAMBADA.

    torchrun --standalone --nproc_per_node 8 -m tinyscope.cli run ncffn-gpt2 --preset paper \\
        --set data.paths=openwebtext.txt --set eval.blimp=blimp/data --set eval.lambada=lambada_test.txt \\
        [--set model.ffn=nc] [--set quant.layers=0,1,2,3,4,5,6,7,8,9,10,11]
    tinyscope run ncffn-gpt2 --preset cpu --set data.paths=book.txt          # minutes, on a CPU

The corpus, its BPE tokenizer and the token cache: :mod:`~tinyscope.studies.ncffn.corpus`; a
run keeps its tokenizer as ``RUN/tokenizer.json`` (written before training), which
``--set data.tokenizer=RUN/tokenizer.json`` reuses. The paper preset is GPT-2 small (12 layers,
D 768, 12 heads, FFN 3072, context 1024, 50,257 BPE entries, input and output embeddings tied:
124,439,808 parameters with GELU). ``eval.blimp`` (a folder of BLiMP ``.jsonl`` files, or one)
and ``eval.lambada`` (a text file, one passage per line) are read and tokenized before training
starts, so a bad file fails in one line at once; they are evaluated at every evaluation.

results.json: ``val_loss``, ``val_bits_per_token``, ``val_ppl``, the BLiMP metrics of
:mod:`~tinyscope.studies.ncffn.blimp`, the LAMBADA metrics of :mod:`~tinyscope.studies.ncffn.lambada`,
``params_total|ffn|quantifiers`` and, with quantifiers, the half-life summary.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tinyscope.errors import check
from tinyscope.models.transformer import TransformerConfig
from tinyscope.runs.experiment import Experiment
from tinyscope.runs.registry import register
from tinyscope.studies.ncffn.blimp import LICENSING, BlimpEvaluator
from tinyscope.studies.ncffn.corpus import BPECorpus, CorpusConfig
from tinyscope.studies.ncffn.experiment import CITATION, NCLMExperiment, _train, gpt, lm_metrics
from tinyscope.studies.ncffn.lambada import LambadaEvaluator
from tinyscope.studies.ncffn.model import QuantifiedTransformer, lm_model_config, parameter_report
from tinyscope.studies.ncffn.quantifiers import QuantifierConfig
from tinyscope.train.checkpoint import atomic_write_bytes
from tinyscope.train.trainer import TrainConfig

GPT2_VOCAB = 50_257
GPT2_SMALL_PARAMS = 124_439_808  # GPT-2 small with tied embeddings (Radford et al. 2019, the released 124M)


@dataclass
class PaperEvalConfig:
    max_windows: int = 200            # held-out windows per evaluation
    latch_half_life: float = 1024.0   # a quantifier unit whose half-life reaches this many tokens is a latch
    blimp: str = ""                   # a folder of BLiMP .jsonl files (or one file); empty: no BLiMP
    blimp_licensing: list[str] = field(default_factory=lambda: list(LICENSING))  # phenomena of blimp_licensing_acc
    lambada: str = ""                 # a text file, one passage per line; empty: no LAMBADA
    eval_seed: int | None = None      # None: the run's held-out windows; else random ones drawn from this seed


@dataclass
class GPT2RunConfig:
    seed: int = 0
    data: CorpusConfig = field(default_factory=CorpusConfig)
    model: TransformerConfig = field(default_factory=gpt)
    quant: QuantifierConfig = field(default_factory=QuantifierConfig)
    match_params: bool = True
    tie_embeddings: bool = True       # W_U = W_E, as GPT-2
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: PaperEvalConfig = field(default_factory=PaperEvalConfig)

    def __post_init__(self):
        check(all(l < self.model.n_layers for l in self.quant.layers),
              f"quant.layers={self.quant.layers} names a layer beyond model.n_heads' {self.model.n_layers} layers")
        check(not self.tie_embeddings or self.model.d_vocab_out in (None, self.model.vocab_size),
              f"tie_embeddings=true needs model.d_vocab_out unset (it is {self.model.d_vocab_out})")


def gpt2_small(**kw) -> TransformerConfig:
    return gpt(**{**dict(vocab_size=GPT2_VOCAB, n_ctx=1024, d_model=768, d_head=64, n_heads=[12] * 12,
                         d_mlp=[3072] * 12), **kw})


PRESETS = {
    "smoke": lambda: GPT2RunConfig(
        data=CorpusConfig(vocab_size=320, val_fraction=0.05, max_eval_windows=16),
        model=gpt(vocab_size=320, n_ctx=32, d_model=32, d_head=8, d_mlp=[64, 64]),
        quant=QuantifierConfig(n_exist=4, n_prop=4),
        train=_train(steps=30, batch_size=8, warmup_steps=5, eval_every=15, log_every=10),
        eval=PaperEvalConfig(max_windows=16, latch_half_life=32.0)),
    "cpu": lambda: GPT2RunConfig(
        data=CorpusConfig(vocab_size=512, val_fraction=0.02, builtin_sentences=20_000),
        model=gpt(vocab_size=512),  # ncffn-lm's cpu model: 2 layers, D 96, context 64
        quant=QuantifierConfig(n_exist=16, n_prop=16),
        train=_train(steps=1200, batch_size=32, eval_every=200, log_every=50),
        eval=PaperEvalConfig(max_windows=100, latch_half_life=64.0)),
    # GPT-2 small on the user's corpus (OpenWebText in the paper). The paper's optimiser, steps and
    # schedule are not public: nanoGPT's OpenWebText recipe (AdamW 6e-4, betas 0.9/0.95, wd 0.1,
    # 2,000 warmup steps, cosine to 10%), batch 64 x 1024 tokens, 100k steps (6.6B tokens). BPE of
    # 50,257 entries learned on the corpus' first 2 GB (data.tokenizer=gpt2/tokenizer.json takes GPT-2's).
    "paper": lambda: GPT2RunConfig(
        data=CorpusConfig(paths=["openwebtext.txt"], vocab_size=GPT2_VOCAB, bpe_sample_bytes=2_000_000_000),
        model=gpt2_small(),
        quant=QuantifierConfig(n_exist=32, n_prop=32),
        train=_train(steps=100_000, batch_size=64, lr=6e-4, warmup_steps=2000, eval_every=2000, log_every=100,
                     checkpoint_every=10_000, keep_checkpoints=True, threads=0),
        eval=PaperEvalConfig(blimp="blimp/data", lambada="lambada_test.txt")),
}


def build_transformer(cfg: GPT2RunConfig, vocab_size: int) -> QuantifiedTransformer:
    """The run's model: :func:`lm_model_config` (FFNs narrowed for quantifiers), W_U tied to W_E."""
    model = QuantifiedTransformer(lm_model_config(cfg.model, cfg.quant, vocab_size, cfg.match_params), cfg.quant)
    if cfg.tie_embeddings:
        model.W_U.weight = model.W_E.weight  # both (V, D): one matrix embeds and unembeds
    return model


class GPT2Experiment(Experiment):
    name = "ncffn-gpt2"
    description = "GPT-2 small, GELU vs NC-FFN (+ quantifiers), BPE corpus, BLiMP and LAMBADA (--set data.paths)"
    citation = CITATION
    study = "ncffn"
    config_cls = GPT2RunConfig
    presets = PRESETS

    def build_task(self, cfg: GPT2RunConfig) -> BPECorpus:
        return BPECorpus(cfg.data, cfg.model.n_ctx, cfg.eval.eval_seed)

    def build_model(self, cfg: GPT2RunConfig, task: BPECorpus) -> QuantifiedTransformer:
        return build_transformer(cfg, task.vocab_size)

    def write_run_files(self, cfg: GPT2RunConfig, task: BPECorpus, out: Path) -> None:
        """RUN/tokenizer.json: the tokenizer the run trains with."""
        atomic_write_bytes(out / "tokenizer.json", task.tokenizer.to_str().encode("utf-8"))

    def evaluator(self, cfg: GPT2RunConfig, task: BPECorpus):
        ev = task.eval_set().select(slice(0, cfg.eval.max_windows))
        tokens, targets = torch.from_numpy(ev.tokens), torch.from_numpy(ev.targets)
        extra = []
        if cfg.eval.blimp:
            extra.append(BlimpEvaluator(cfg.eval.blimp, task.tokenizer, cfg.model.n_ctx, cfg.eval.blimp_licensing))
        if cfg.eval.lambada:
            extra.append(LambadaEvaluator(cfg.eval.lambada, task.tokenizer, cfg.model.n_ctx))

        def evaluate(model: torch.nn.Module) -> dict:
            out = lm_metrics(model, tokens, targets, None)
            out["val_ppl"] = math.exp(min(out["val_loss"], 700.0))
            for e in extra:
                out.update(e(model))
            return out

        return evaluate

    def final_evaluation(self, cfg: GPT2RunConfig, task: BPECorpus, model) -> dict:
        from tinyscope.studies.ncffn.legibility import half_life_summary

        metrics = super().final_evaluation(cfg, task, model)
        metrics.update({f"params_{k}": float(v) for k, v in parameter_report(model).items()})
        if cfg.quant.layers:
            metrics.update(half_life_summary(model, cfg.eval.latch_half_life))
        return metrics

    def fresh_eval_config(self, cfg: GPT2RunConfig, seed: int, n: int | None = None) -> GPT2RunConfig:
        """Random windows of the held-out tail drawn from ``seed`` (``n`` of them, default the run's
        count); the tokenizer, the training data and the model are unchanged."""
        n_windows = n or cfg.eval.max_windows
        data = dataclasses.replace(cfg.data, max_eval_windows=n_windows)
        ev = dataclasses.replace(cfg.eval, eval_seed=int(seed), max_windows=n_windows)
        return dataclasses.replace(cfg, data=data, eval=ev)

    def claims(self):
        from tinyscope.studies.ncffn.claims import CLAIMS

        return [c for c in CLAIMS if c.experiment == self.name]

    views = NCLMExperiment.views  # the trained quantifiers' half-lives, when the model has them


register(GPT2Experiment())
