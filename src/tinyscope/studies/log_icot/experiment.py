"""k-parity with explicit CoT, ICoT, Log-ICoT or no CoT (Huang et al., "Transformers Provably Learn
to Internalize Chain-of-Thought"; see docs/parity.md for every open choice).

Experiments ``parity-direct``, ``parity-cot``, ``parity-icot`` and ``parity-logicot`` share one
config; they differ only in the curriculum (:func:`~tinyscope.studies.log_icot.task.removal_schedule`).

Presets:
* ``paper``: the headline setting, n = 30, k = 16, a 4-layer transformer (L = log2 k);
* ``cpu``: n = 20, k = 8, 3 layers, a sample budget in which the direct model fails;
* ``smoke``: n = 8, k = 4, seconds, for tests.

Metrics of each evaluation (validation set, the current stage's layout): ``acc`` (answer accuracy,
kept thinking tokens generated greedily by the model), ``token_acc`` (teacher-forced accuracy over
the supervised positions), ``val_loss``, ``single_pass_acc`` (answer from ``x, SEP, BLANK...``
in one forward pass), plus the curriculum's ``stage``, ``progress``, ``done``, ``samples``.

The final evaluation (test set, results.json) gives ``test_acc`` (the last stage's layout),
``test_single_pass_acc``, ``n_stages``, the training curriculum's ``stages_reached``,
``curriculum_done``, ``samples`` and ``samples_stage_<s>`` (stage 0's include the samples of
starts that ``curriculum.restart_steps`` abandoned), ``restarts``, and, when the last stage is the single
pass (ICoT, Log-ICoT, direct), the attention mass of each layer on its own tree level
(:func:`own_level_attention`). ``task.eval_seed`` draws a fresh test set (`tinyscope eval --seed`).
With ``finetune_steps`` a stage ``finetune`` trains every layer after the curriculum
(:meth:`ParityExperiment.stages`); the final evaluation then measures its selected model.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.errors import check, check_choice
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.runs.experiment import Citation, Experiment, View, ViewOptions
from tinyscope.runs.experiment import Stage as RunStage
from tinyscope.runs.registry import register
from tinyscope.studies.log_icot import scaling  # noqa: F401  (registers the n-scaling figure of `tinyscope report`)
from tinyscope.studies.log_icot.model import ConstrainedParityConfig, ConstrainedParityTransformer
from tinyscope.studies.log_icot.task import CURRICULA, Parity, ParityConfig, encode, node_levels, removal_schedule
from tinyscope.tasks.base import Batch
from tinyscope.train.curriculum import Curriculum, CurriculumConfig, CurriculumTask, Stage
from tinyscope.train.trainer import TrainConfig, masked_next_token_loss

CITATION = Citation("Huang, Zhu, Wang, Jiao, Russell, Sojoudi, Mei", "Transformers Provably Learn to Internalize Chain-of-Thought", 2026, "arXiv 2605.28600")


def parity_model(n: int, k: int, d_model: int = 64, n_heads: int = 2, d_mlp: int = 256, **kw) -> TransformerConfig:
    """Pre-LN transformer with L = log2 k layers, context n + k - 1, two output classes (bit values)."""
    layers = k.bit_length() - 1
    base = dict(vocab_size=4, n_ctx=n + k - 1, d_model=d_model, d_head=None, n_heads=[n_heads] * layers,
                d_mlp=[d_mlp] * layers, act="gelu", norm="pre", final_norm=True, attn_out_proj=True,
                qkv_bias=False, mlp_bias=True, unembed_bias=True, d_vocab_out=2, init="torch")
    base.update(kw)
    return TransformerConfig(**base)


@dataclass
class ParityEvalConfig:
    batch_size: int = 1024        # evaluation forward-pass chunk


@dataclass
class ParityRunConfig:
    seed: int = 0
    kind: str = "logicot"                                   # direct | cot | icot | logicot
    arch: Literal["transformer", "constrained"] = "transformer"
    grow_depth: bool = True                                 # stage s runs only the layers it needs (see docs)
    freeze_absorbed: bool = True                            # with grow_depth: train only the deepest active layer
    finetune_steps: int = 0                                 # then: steps that train every layer (see docs)
    finetune_lr_scale: float = 0.1                          # the fine-tune's peak rates over train.lr, train.muon_lr
    task: ParityConfig = field(default_factory=ParityConfig)
    model: TransformerConfig = field(default_factory=lambda: parity_model(20, 8))
    constrained: ConstrainedParityConfig = field(default_factory=ConstrainedParityConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: ParityEvalConfig = field(default_factory=ParityEvalConfig)

    def __post_init__(self):
        check_choice("kind", self.kind, CURRICULA)
        check(self.finetune_steps >= 0, f"finetune_steps={self.finetune_steps} must be >= 0 (0 = no fine-tune)")
        check(self.finetune_lr_scale > 0, f"finetune_lr_scale={self.finetune_lr_scale} must be > 0")
        check_choice("arch", self.arch, ("transformer", "constrained"))
        need = self.task.n + self.task.k - 1
        if self.arch == "transformer":
            check(self.model.n_ctx >= need, f"model.n_ctx={self.model.n_ctx} must be >= task.n + task.k - 1 = {need}")
            check(self.model.vocab_size == 4, f"model.vocab_size={self.model.vocab_size} must be 4 (0, 1, SEP, BLANK)")
            check(self.model.n_out == 2, f"model.d_vocab_out={self.model.d_vocab_out} must be 2 (the bit values)")


def _train(**kw) -> TrainConfig:
    base = dict(batch_size=256, lr=1e-3, weight_decay=0.0, schedule="constant", warmup_steps=100, grad_clip=1.0,
                eval_every=100, checkpoint_every=100, log_every=50, select_metric="progress", select_mode="max",
                tie_break_metric="val_loss", tie_break_mode="min", stop_metric="done", stop_mode="max",
                stop_threshold=1.0)
    base.update(kw)
    return TrainConfig(**base)


def make_presets(kind: str) -> dict:
    return {
        "smoke": lambda: ParityRunConfig(
            kind=kind, task=ParityConfig(n=8, k=4, n_val=256, n_test=512),
            model=parity_model(8, 4, d_model=32, d_mlp=64),
            curriculum=CurriculumConfig(stage_steps=60),
            train=_train(steps=120, batch_size=64, lr=3e-3, eval_every=20, checkpoint_every=20, log_every=20)),
        "cpu": lambda: ParityRunConfig(
            kind=kind, task=ParityConfig(n=20, k=8),
            model=parity_model(20, 8, d_model=32, n_heads=2, d_mlp=128),
            curriculum=CurriculumConfig(stage_steps=4000),
            train=_train(steps=20000, batch_size=64, lr=1e-3, betas=[0.9, 0.98], threads="auto")),
        "paper": lambda: ParityRunConfig(
            kind=kind, task=ParityConfig(n=30, k=16, n_val=4096, n_test=8192),
            model=parity_model(30, 16, d_model=128, n_heads=4, d_mlp=512),
            curriculum=CurriculumConfig(stage_steps=10000),
            train=_train(steps=40000, batch_size=512, lr=5e-4, betas=[0.9, 0.98], eval_every=200,
                         checkpoint_every=200)),
    }


# ------------------------------------------------------------------ evaluation
@torch.no_grad()
def answer_accuracy(model: torch.nn.Module, task: Parity, bits: np.ndarray, nodes: np.ndarray,
                    removed=(), chunk: int = 1024) -> float:
    """Answer accuracy in the layout of ``removed``: kept thinking tokens are generated greedily by the
    model (one forward pass per kept token), removed ones stay blank; the answer is the last output."""
    layout = task.layout(removed)
    device = next(model.parameters()).device
    correct = 0
    for lo in range(0, len(bits), chunk):
        batch = encode(bits[lo:lo + chunk], nodes[lo:lo + chunk], layout)
        tokens = torch.from_numpy(batch.tokens).to(device)  # (B, T)
        for j in layout.kept[:-1]:  # fill each kept thinking token with the model's own prediction
            pred = model(tokens)[:, layout.slot[j]].argmax(-1)  # (B,)
            tokens[:, layout.token_pos[j]] = pred
        answer = model(tokens)[:, layout.answer_pos].argmax(-1).cpu().numpy()  # (B,)
        correct += int((answer == batch.meta["answer"]).sum())
    return correct / len(bits)


@torch.no_grad()
def teacher_forced(model: torch.nn.Module, batch, chunk: int = 1024) -> tuple[float, float]:
    """(token accuracy, cross-entropy) over the supervised positions of ``batch``."""
    device = next(model.parameters()).device
    hits = loss = total = 0.0
    for lo in range(0, len(batch), chunk):
        part = batch.select(slice(lo, lo + chunk)).to_torch(device)
        logits = model(part["tokens"])[part["loss_mask"]].float()  # (N, 2)
        target = part["targets"][part["loss_mask"]]  # (N,)
        hits += float((logits.argmax(-1) == target).sum())
        loss += float(F.cross_entropy(logits, target, reduction="sum"))
        total += int(target.numel())
    return hits / total, loss / total


def stage_depth(k: int, removed) -> int:
    """Layers a stage needs: 1 + the highest tree level among its removed nodes (one layer per
    absorbed level, and one to compute the next token from given tokens)."""
    levels = node_levels(k)
    return 1 + max((int(levels[j]) for j in removed), default=0)


def skip_layers_hooks(n_layers: int, active: int) -> list:
    """Forward hooks that turn blocks ``active .. n_layers-1`` into the identity (each returns its
    input), so only the first ``active`` layers compute and receive gradient."""
    stash: dict[int, torch.Tensor] = {}
    hooks = []
    for layer in range(active, n_layers):
        def save(x, hook, layer=layer):
            stash[layer] = x

        def restore(x, hook, layer=layer):
            return stash.pop(layer)

        hooks += [(f"blocks.{layer}.hook_resid_pre", save), (f"blocks.{layer}.hook_resid_post", restore)]
    return hooks


class AtDepth(torch.nn.Module):
    """``model`` run through its first ``depth`` blocks, then its final norm and unembedding: the
    function :func:`skip_layers_hooks` gives (blocks from ``depth`` on are the identity), without
    computing the skipped blocks. ``forward(tokens) -> logits`` (B, T, n_out)."""

    def __init__(self, model: Transformer, depth: int):
        super().__init__()
        self.model, self.depth = model, depth

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.model(tokens, stop_at_layer=self.depth)  # (B, T, D)
        return self.model.W_U(self.model.ln_final(x))  # (B, T, n_out)


def own_level_attention(model: torch.nn.Module, task: Parity, n_examples: int = 512, seed: int = 0) -> dict:
    """How much of each layer's attention goes where the tree says it should, on the single-pass
    (all-blank) layout: ``attn_own_level_mass_layer{l}`` is the mean attention mass from the slots
    of level-``l`` nodes onto level ``l-1`` (the selected bits for ``l = 1``, else the slots of the
    level ``l-1`` nodes), for ``l = 1 .. log2 k``; ``attn_own_level_mass_min`` is the smallest.
    1 everywhere is the paper's picture of each layer attending exactly to its tree level."""
    from tinyscope.studies.log_icot.absorption import attention_patterns, level_mass, own_level_column

    mass, _ = level_mass(attention_patterns(model, task, n_examples=n_examples, seed=seed), task)  # (L, G)
    own = {f"attn_own_level_mass_layer{l + 1}": float(mass[l, own_level_column(l)])
           for l in range(min(task.levels, mass.shape[0]))}
    return own | {"attn_own_level_mass_min": min(own.values())}


def _draw_stage(parity: Parity, curriculum: Curriculum, rng: np.random.Generator, batch_size: int, removed) -> Batch:
    """A training batch of the stage that removes ``removed``: only look-ahead samples during its
    look-ahead steps (``curriculum.lookahead_steps``), else a share ``task.blank_ahead`` of them."""
    if curriculum.ahead is not None:
        return parity.sample(rng, batch_size, removed, ahead=curriculum.ahead, share=1.0)
    following = None if curriculum.is_last else curriculum.stages[curriculum.stage + 1].spec
    return parity.sample(rng, batch_size, removed, ahead=following)


@dataclass
class StageSampler:
    """Training batches of the curriculum's current stage that do not count in its samples: the
    fine-tune's data, so that ``samples`` and ``samples_stage_<s>`` stay the curriculum's own."""

    parity: Parity
    curriculum: Curriculum

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        return self.parity.sample(rng, batch_size, self.curriculum.current.spec)


def build_curriculum(cfg: ParityRunConfig) -> Curriculum:
    schedule = removal_schedule(cfg.task.k, cfg.kind)
    stages = [Stage(f"{cfg.kind}-{i}:removed={len(r)}", list(r)) for i, r in enumerate(schedule)]
    return Curriculum(stages, cfg.curriculum)


class ParityExperiment(Experiment):
    citation = CITATION
    study = "log_icot"
    config_cls = ParityRunConfig

    def __init__(self, kind: str):
        self.kind = kind
        self.name = f"parity-{kind}"
        self.description = {"direct": "k-parity, answer only (no CoT)",
                             "cot": "k-parity with the explicit XOR-tree CoT",
                             "icot": "k-parity, ICoT: one thinking token removed per stage",
                             "logicot": "k-parity, Log-ICoT: one tree level removed per stage"}[kind]
        self.presets = make_presets(kind)

    def build_task(self, cfg: ParityRunConfig) -> CurriculumTask:
        parity, curriculum = Parity(cfg.task), build_curriculum(cfg)
        return CurriculumTask(parity, curriculum, functools.partial(_draw_stage, parity, curriculum))

    def build_model(self, cfg: ParityRunConfig, task) -> torch.nn.Module:
        if cfg.arch == "constrained":
            return ConstrainedParityTransformer(cfg.constrained, n=cfg.task.n, k=cfg.task.k)
        return Transformer(cfg.model)

    def stage_hooks(self, cfg: ParityRunConfig, removed) -> list:
        """Hooks that run the model at the depth of the stage that removes ``removed`` (none unless
        ``grow_depth``)."""
        if not cfg.grow_depth or cfg.arch != "transformer":
            return []
        return skip_layers_hooks(cfg.model.n_layers, min(stage_depth(cfg.task.k, removed), cfg.model.n_layers))

    def stage_model(self, cfg: ParityRunConfig, model: torch.nn.Module, removed) -> torch.nn.Module:
        """The model as the stage that removes ``removed`` runs it: :class:`AtDepth` at the stage's
        depth with ``grow_depth`` (the layers above it are not computed), else ``model`` itself."""
        if not cfg.grow_depth or cfg.arch != "transformer":
            return model
        depth = min(stage_depth(cfg.task.k, removed), cfg.model.n_layers)
        return model if depth == cfg.model.n_layers else AtDepth(model, depth)

    def objective(self, cfg: ParityRunConfig, task: CurriculumTask):
        if not cfg.grow_depth or cfg.arch != "transformer":
            return None

        def loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
            removed = task.curriculum.current.spec
            inner = getattr(model, "module", model)
            # a DDP-wrapped model must be called as itself (gradient sync): there the hooks skip the layers
            hooks, net = (self.stage_hooks(cfg, removed), model) if inner is not model \
                else ([], self.stage_model(cfg, model, removed))
            deepest = min(stage_depth(cfg.task.k, removed), cfg.model.n_layers) - 1
            if cfg.freeze_absorbed and deepest > 0:  # no gradient into the layers earlier stages trained
                hooks.append((f"blocks.{deepest}.hook_resid_pre", lambda x, hook: x.detach()))
            with inner.hooks(hooks):
                return masked_next_token_loss(net, batch)

        return loss

    def measurer(self, cfg: ParityRunConfig, task: CurriculumTask):
        """``measure(model) -> metrics`` on the validation set, in the current stage's layout."""
        parity, curriculum = task.task, task.curriculum
        bits, nodes = parity.fixed("val")
        final = removal_schedule(cfg.task.k, "direct")[0]
        chunk = cfg.eval.batch_size

        def measure(model: torch.nn.Module) -> dict:
            removed = curriculum.current.spec
            net = self.stage_model(cfg, model, removed)
            token_acc, val_loss = teacher_forced(net, encode(bits, nodes, parity.layout(removed)), chunk)
            return {"acc": answer_accuracy(net, parity, bits, nodes, removed, chunk),
                    "token_acc": token_acc, "val_loss": val_loss,
                    "single_pass_acc": answer_accuracy(net, parity, bits, nodes, final, chunk)}

        return measure

    def evaluator(self, cfg: ParityRunConfig, task: CurriculumTask):
        measure, curriculum = self.measurer(cfg, task), task.curriculum

        def evaluate(model: torch.nn.Module) -> dict:
            metrics = measure(model)
            return metrics | curriculum.update(metrics)

        return evaluate

    def stages(self, cfg: ParityRunConfig, task: CurriculumTask) -> list[RunStage]:
        """With ``finetune_steps``: stage ``finetune`` after the curriculum. It trains every layer
        (no layer frozen) on the stage the curriculum ended in, the single pass when it finished,
        at ``finetune_lr_scale`` times the rates with a cosine to 0, and selects the checkpoint of
        best validation ``acc`` (ties: lowest ``val_loss``). The curriculum does not move in it,
        and its samples are not counted in the curriculum's (:class:`StageSampler`)."""
        if not cfg.finetune_steps:
            return []
        t, scale = cfg.train, cfg.finetune_lr_scale
        train = dataclasses.replace(t, steps=cfg.finetune_steps, lr=t.lr * scale, muon_lr=t.muon_lr * scale,
                                    schedule="cosine", warmup_steps=0, min_lr_ratio=0.0, select_metric="acc",
                                    select_mode="max", tie_break_metric="val_loss", tie_break_mode="min",
                                    stop_metric=None)
        every_layer = dataclasses.replace(cfg, freeze_absorbed=False)
        return [RunStage("finetune", train, objective=self.objective(every_layer, task),
                         evaluate=self.measurer(cfg, task), task=StageSampler(task.task, task.curriculum))]

    def final_evaluation(self, cfg: ParityRunConfig, task: CurriculumTask, model: torch.nn.Module) -> dict:
        parity, curriculum = task.task, task.curriculum
        bits, nodes = parity.fixed("test")
        last = curriculum.stages[-1].spec
        single_pass = removal_schedule(cfg.task.k, "direct")[0]
        net = self.stage_model(cfg, model, last)  # the model as its last stage runs it
        out = {"test_acc": answer_accuracy(net, parity, bits, nodes, last, cfg.eval.batch_size),
               "test_single_pass_acc": answer_accuracy(net, parity, bits, nodes, single_pass, cfg.eval.batch_size),
               "n_stages": float(len(curriculum.stages))}
        if set(last) == set(single_pass):  # the last stage is the single pass: its layers hold the tree
            with model.hooks(self.stage_hooks(cfg, last)):
                out |= own_level_attention(model, parity, seed=cfg.task.eval_seed or 0)
        if curriculum.step:  # the training process's curriculum (absent when a run is re-evaluated)
            out |= {"stages_reached": float(curriculum.stage + 1), "curriculum_done": float(curriculum.done),
                    "samples": float(curriculum.samples)}
            out |= {f"samples_stage_{r['stage']}": float(r["samples"]) for r in curriculum.summary()}
            out["restarts"] = float(curriculum.records[0].restarts)  # fresh starts of stage 0
        return out

    def fresh_eval_config(self, cfg: ParityRunConfig, seed: int, n: int | None = None) -> ParityRunConfig:
        """A test set of ``n`` inputs (default: the run's count) drawn from ``seed``, for the same
        secret subset (the held-out part of k-parity is the inputs, never the subset)."""
        task = dataclasses.replace(cfg.task, eval_seed=int(seed), n_test=n or cfg.task.n_test)
        return dataclasses.replace(cfg, task=task)

    def claims(self):
        from tinyscope.studies.log_icot.claims import CLAIMS

        return [c for c in CLAIMS if c.experiment == self.name]

    def views(self, run, options: ViewOptions = ViewOptions()) -> list[View]:
        """Attention heatmaps per layer: the chain of thought moving into depth."""
        from tinyscope.studies.log_icot.absorption import absorption_figures

        return [View(name, "Absorption", "Attention per layer over the input and the tree levels.", lambda f=fig: f)
                for name, fig in absorption_figures(run).items()]


for _kind in CURRICULA:
    register(ParityExperiment(_kind))
