"""Phases 2 and 3 of THEIA's mod-3 chain protocol (Li 2026, seed003-details Sec. 1.6), the parts
the Trainer runs as stages after phase 1 (the step model on single records).

* Phase 2, ``transition``: the TransitionNet learns y_t = (y_{t-1} + local_t) mod 3 from
  teacher-forced pairs (onehot(y_{t-1}), onehot(local_t)) of fresh ``chain_steps``-step chains,
  cross-entropy over steps 1 .. T-1 (:func:`transition_loss`); the step model is frozen.
* Phase 3, ``end_to_end``: step model and transition together on fresh chains, straight-through
  Gumbel-softmax one-hots between steps at temperature tau = max(0.1, 0.5 - 0.01 (epoch + 1)),
  epoch = step // steps_per_epoch, and the loss sum_t (1 + 0.5 t) CE_t / T
  (:func:`end_to_end_loss`).

:class:`ChainData` draws both phases' batches; it carries the Gumbel draws and the temperature
in the batch, so a stage killed and resumed trains on the same numbers as an uninterrupted one.
The evaluations during the stages: :func:`transition_table_accuracy` (the TransitionNet against
the mod-3 table on all 9 label pairs) and the final-step accuracy on fixed training-length chains.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.studies.theia.chain import ChainModel
from tinyscope.studies.theia.engines import N_CLASSES
from tinyscope.studies.theia.task import RecordSpec, sample_chains
from tinyscope.tasks.base import Batch


class ChainData:
    """Training data of phases 2 and 3: ``sample(rng, B)`` draws B chains of ``steps`` fresh
    records as a Batch with tokens = records (B, T, 31) and, in meta, the running labels
    ``labels`` (B, T) and the records' own labels ``local`` (B, T); with ``gumbel``, also the
    uniform draws ``noise`` (B, T, 2, 3) of the Gumbel one-hots and this step's temperature
    ``tau`` (B,). ``targets`` holds the running label at each step's last field (``loss_mask``).

    The Trainer draws one batch per step, so the number of batches drawn is the step; it is the
    ``state_dict`` the Trainer checkpoints, and the temperature schedule resumes with it."""

    vocab_size = N_CLASSES

    def __init__(self, spec: RecordSpec, steps: int, gumbel: bool = False, steps_per_epoch: int = 123):
        self.spec, self.steps, self.gumbel, self.steps_per_epoch = spec, steps, gumbel, steps_per_epoch
        self.step = 0

    def tau(self, step: int) -> float:
        """Gumbel-softmax temperature at training step ``step`` (Sec. 1.6)."""
        return max(0.1, 0.5 - 0.01 * (step // self.steps_per_epoch + 1))

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        data = sample_chains(rng, batch_size, self.steps, self.spec)
        x = data["records"]  # (B, T, 31)
        targets = np.zeros_like(x)  # (B, T, 31)
        targets[..., -1] = data["labels"]
        mask = np.zeros(x.shape, dtype=bool)  # (B, T, 31)
        mask[..., -1] = True
        meta = {"labels": data["labels"], "local": data["local"]}  # (B, T) each
        if self.gumbel:
            meta["noise"] = rng.random((batch_size, self.steps, 2, N_CLASSES), dtype=np.float32)  # (B, T, 2, 3)
            meta["tau"] = np.full(batch_size, self.tau(self.step))  # (B,)
        self.step += 1
        return Batch(x, targets, mask, meta)

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.step = int(state["step"])


def transition_loss(model: ChainModel, batch: dict) -> torch.Tensor:
    """Phase 2: cross-entropy of Transition(onehot(y_{t-1}), onehot(local_t)) against y_t,
    teacher-forced, over steps t = 1 .. T-1."""
    y, local = batch["labels"], batch["local"]  # (B, T) each
    prev = F.one_hot(y[:, :-1], N_CLASSES).float()  # (B, T-1, 3)
    logits = model.transition(prev, F.one_hot(local[:, 1:], N_CLASSES).float())  # (B, T-1, 3)
    return F.cross_entropy(logits.reshape(-1, N_CLASSES), y[:, 1:].reshape(-1))


def end_to_end_loss(chain_steps: int):
    """Phase 3's objective: sum_t (1 + 0.5 t) CE_t / T over the chain's running labels, with
    the straight-through Gumbel one-hots of the batch's ``noise`` at its ``tau``."""
    weights = 1.0 + 0.5 * torch.arange(chain_steps, dtype=torch.float32)  # (T,)

    def loss(model: ChainModel, batch: dict) -> torch.Tensor:
        y = batch["labels"]  # (B, T)
        logits = model(batch["tokens"], tau=float(batch["tau"][0]), noise=batch["noise"])  # (B, T, 3)
        ce = F.cross_entropy(logits.reshape(-1, N_CLASSES), y.reshape(-1), reduction="none").view_as(y).mean(0)  # (T,)
        return (weights.to(ce.device) * ce).sum() / chain_steps

    return loss


def transition_table_accuracy(model: ChainModel) -> float:
    """Fraction of the 9 label pairs (y_{t-1}, local_t) that the TransitionNet maps to
    (y_{t-1} + local_t) mod 3 (hard argmax, as at inference)."""
    device = next(model.transition.parameters()).device
    prev, local = torch.meshgrid(torch.arange(N_CLASSES), torch.arange(N_CLASSES), indexing="ij")  # (3, 3) each
    prev, local = prev.reshape(-1).to(device), local.reshape(-1).to(device)  # (9,) each
    with torch.no_grad():
        logits = model.transition(F.one_hot(prev, N_CLASSES).float(), F.one_hot(local, N_CLASSES).float())  # (9, 3)
    return float((logits.argmax(-1) == (prev + local) % N_CLASSES).float().mean())


def final_step_accuracy(model: ChainModel, records: np.ndarray, labels: np.ndarray, batch: int = 1024) -> float:
    """Final-step accuracy of ``model`` (hard one-hots) on fixed chains ``records`` (N, T, 31)
    with running labels ``labels`` (N, T)."""
    device = next(model.parameters()).device
    correct = 0
    with torch.no_grad():
        for i in range(0, len(records), batch):
            x = torch.from_numpy(records[i:i + batch]).to(device)  # (b, T, 31)
            pred = model(x)[:, -1].argmax(-1).cpu()  # (b,)
            correct += int((pred == torch.from_numpy(labels[i:i + batch, -1])).sum())
    return correct / max(1, len(records))
