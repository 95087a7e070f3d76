"""The THEIA training objective: class weights [1, 1, 2] on the prototype dot-product logits, and
its bf16-autocast variant (train.precision=bf16) agreeing with FP32."""
import numpy as np
import torch
import torch.nn.functional as F

from tinyscope.studies.theia.experiment import weighted_label_loss
from tinyscope.studies.theia.model import Theia
from tinyscope.studies.theia.task import records_batch, sample_records


def _batch(n=256, seed=0):
    b = records_batch(sample_records(np.random.default_rng(seed), n))
    return {"tokens": torch.from_numpy(b.tokens), "label": torch.from_numpy(b.meta["label"])}


def test_objective_is_weighted_cross_entropy_of_the_dot_product_logits():
    torch.manual_seed(0)
    model, batch = Theia(dropout=0.0), _batch()
    logits = model.features(batch["tokens"]) @ model.head.prototypes.weight.T  # (B, 3)
    w = torch.tensor([1.0, 1.0, 2.0])
    per_record = F.cross_entropy(logits, batch["label"], reduction="none")  # (B,)
    manual = (w[batch["label"]] * per_record).sum() / w[batch["label"]].sum()
    assert torch.allclose(weighted_label_loss([1.0, 1.0, 2.0])(model, batch), manual, atol=1e-6)


def test_bf16_objective_matches_fp32_and_reaches_every_engine():
    torch.manual_seed(0)
    model, batch = Theia(dropout=0.0), _batch()
    full = weighted_label_loss([1.0, 1.0, 2.0])(model, batch)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what the Trainer does for train.precision=bf16
        half = weighted_label_loss([1.0, 1.0, 2.0])(model, batch)
    assert half.dtype == torch.float32 and abs(half.item() - full.item()) < 0.02 * full.item()
    half.backward()
    for engine in (model.arith, model.order, model.set, model.logic, model.head):
        grads = [p.grad for p in engine.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
        assert sum(g.abs().sum() for g in grads) > 0
