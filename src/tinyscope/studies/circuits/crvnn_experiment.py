"""``circuit-listops-crvnn``: the CRvNN baseline (:mod:`.crvnn`) on the circuit paper's ListOps.

Same data as ``circuit-listops`` and its looped softmax baselines (the depth-1 then depth-1+2
curriculum of :class:`~tinyscope.studies.circuits.task.LogicTask`, 4,400 depth-1 and 8,800 fresh
depth-2 expressions per epoch), but CRvNN classifies the whole expression: its input is the
token sequence with the BLANK formatting tokens dropped (the 16 ListOps symbols, so 16 embedding
rows), its target the answer, its loss cross-entropy plus the entropy penalty.

Evaluation: answer accuracy at the depths the paper reports for CRvNN (1/2/3/4/5/8/10), 100
sampled expressions per depth (``depth{d}_acc``), and on the checked training expressions by
depth (``train_depth{1,2}_acc``). Optimiser: AdamW, lr 1e-3, weight decay 0.01, batch 128, clip 1
(the authors' ListOps values; they use Ranger with a plateau schedule) with the circuit
protocol's warmup and cosine; ``paper`` runs the circuit paper's 300 ListOps epochs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.errors import check
from tinyscope.models.utils import device_of
from tinyscope.runs.registry import register
from tinyscope.studies.circuits.crvnn import CRvNN, CRvNNConfig
from tinyscope.studies.circuits.experiment import (
    CircuitEvalConfig,
    CircuitExperiment,
    CircuitRunConfig,
    _length_batches,
    _task,
    _train,
)
from tinyscope.studies.circuits.model import CircuitConfig
from tinyscope.studies.circuits.protocol import PAPER_EPOCHS
from tinyscope.studies.circuits.task import ExpressionSet, LogicTask

CRVNN_DEPTHS = [1, 2, 3, 4, 5, 8, 10]  # the paper's CRvNN row
CRVNN_CPU_EPOCHS = 1  # one epoch of the full model: ~33 min at load 6.5 (docs/results/circuits.md)


@dataclass
class CRvNNRunConfig(CircuitRunConfig):
    crvnn: CRvNNConfig = field(default_factory=CRvNNConfig)

    def __post_init__(self):
        super().__post_init__()
        check(self.task.grammar in ("listops", "listops-lra"),
              f"task.grammar={self.task.grammar!r}: the CRvNN baseline runs on listops or listops-lra")
        D = CircuitConfig(grammar=self.task.grammar).D
        check(self.crvnn.vocab_size == D and self.crvnn.n_classes == 10,
              f"crvnn.vocab_size={self.crvnn.vocab_size}, crvnn.n_classes={self.crvnn.n_classes} must be {D} and 10")


def compact(tokens: torch.Tensor, blank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop BLANK tokens (the zero-vector formatting token and padding), keeping the order:
    (B, T) ids -> (B, n) ids (padding filled with 0) and their (B, n) bool mask."""
    keep = tokens != blank  # (B, T)
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices  # kept tokens first
    n = max(int(keep.sum(1).max()), 1)
    ids = tokens.gather(1, order)[:, :n]  # (B, n)
    mask = keep.gather(1, order)[:, :n]  # (B, n)
    return ids.masked_fill(~mask, 0), mask


def _labels(values: torch.Tensor) -> torch.Tensor:
    return values.long()  # ListOps literals 0-9 are the classes in value order


def crvnn_loss(model: CRvNN, batch: dict, blank: int) -> torch.Tensor:
    """Cross-entropy of the answer plus entropy_gamma x the mean entropy penalty (the authors' loss)."""
    ids, mask = compact(batch["tokens"], blank)
    out = model(ids, mask)
    return F.cross_entropy(out.logits.float(), _labels(batch["value"])) + model.cfg.entropy_gamma * out.penalty.mean()


@torch.no_grad()
def crvnn_answers(model: CRvNN, data: ExpressionSet, blank: int, max_tokens: int = 20000) -> np.ndarray:
    """Predicted answer (class index) of every expression, batched by length."""
    device = device_of(model)
    pred = np.zeros(len(data), dtype=np.int64)
    for idx in _length_batches(data, max_tokens):
        T = int(data.lengths[idx].max())
        ids, mask = compact(torch.from_numpy(data.tokens[idx, :T]).to(device), blank)
        pred[idx] = model(ids, mask).logits.argmax(-1).cpu().numpy()
    return pred


SMOKE_MODEL = dict(embed_dim=16, hidden=16, cell_hidden=64, momentum_dim=8)  # tests only


def _presets() -> dict:
    """``paper``: the authors' 521,611-parameter model for the circuit paper's 300 ListOps epochs;
    ``cpu``: the same model for :data:`CRVNN_CPU_EPOCHS` epochs (a trial, not a reproduction);
    ``smoke``: a 16-wide model, batch 500, one short epoch (seconds)."""
    def cfg(epochs: int, batch: int = 128, model: dict | None = None, ev: CircuitEvalConfig | None = None,
            train: dict | None = None, **task) -> CRvNNRunConfig:
        return CRvNNRunConfig(epochs=epochs, task=_task("listops", eval_depths=list(CRVNN_DEPTHS), **task),
                              model=CircuitConfig(grammar="listops"), crvnn=CRvNNConfig(**(model or {})),
                              train=_train(batch_size=batch, lr=1e-3, weight_decay=0.01, threads="auto",
                                           select_metric="train_answer_acc", tie_break_metric="train_loss_ce", **(train or {})),
                              eval=ev or CircuitEvalConfig(quick_depths=[3, 5], quick_per_depth=50))

    def smoke() -> CRvNNRunConfig:
        return cfg(1, batch=500, model=SMOKE_MODEL, ev=CircuitEvalConfig(train_eval_size=50, quick_depths=[3],
                                                                        quick_per_depth=5),
                   train=dict(eval_every=10, log_every=5), eval_per_depth=5, depth2_samples=300)

    return {"smoke": smoke, "cpu": lambda: cfg(CRVNN_CPU_EPOCHS), "paper": lambda: cfg(PAPER_EPOCHS["listops"])}


class CRvNNExperiment(CircuitExperiment):
    """CRvNN (Ray Chowdhury & Caragea 2021) on the circuit paper's ListOps, its Table 2 text baseline."""

    config_cls = CRvNNRunConfig
    one_step = False  # trained on the answer, not on a reduction step

    def __init__(self):
        super().__init__("listops", CRVNN_CPU_EPOCHS)
        self.name = "circuit-listops-crvnn"
        self.description = "CRvNN (continuous recursive NN) on ListOps, the circuit paper's baseline"
        self.presets = _presets()

    def build_model(self, cfg: CRvNNRunConfig, task: LogicTask) -> CRvNN:
        return CRvNN(cfg.crvnn)

    def objective(self, cfg, task: LogicTask):
        blank = task.grammar.blank
        return lambda model, batch: crvnn_loss(model, batch, blank)

    def answers(self, model, cfg, task: LogicTask, data: ExpressionSet) -> np.ndarray:
        return crvnn_answers(model, data, task.grammar.blank)

    def step_metrics(self, model, b: dict, cfg, task) -> dict:
        was = model.training
        model.eval()
        with torch.no_grad():
            ids, mask = compact(b["tokens"], model.cfg.vocab_size)  # BLANK is id D = vocab_size (checked)
            logits = model(ids, mask).logits
        model.train(was)
        return {"train_loss_ce": float(F.cross_entropy(logits.float(), _labels(b["value"])))}

    @torch.no_grad()
    def final_evaluation(self, cfg: CRvNNRunConfig, task: LogicTask, model) -> dict:
        metrics = dict(self.evaluator(cfg, task)(model)) | self.train_depth_metrics(model, cfg, task)
        return metrics | self.accuracy_by_depth(cfg, task, lambda data: (self.answers(model, cfg, task, data), {}))


register(CRvNNExperiment())
