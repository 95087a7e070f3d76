"""A model's per-phenomenon accuracy on the npi licensing language, beside the exact ceilings.

For each phenomenon of :data:`~tinyscope.studies.ncffn.licensing_npi.PHENOMENA`:

* ``slot_acc_<ph>``: top-1 accuracy at the slot of held-out sentences (the word after ``has``),
  ``slot_acc_bayes_<ph>`` its exact Bayes ceiling (:func:`~.licensing_npi.slot_ceiling`) and
  ``slot_acc_bayes_set_<ph>`` the Bayes predictor's accuracy on these very sentences;
* ``pair_acc_<ph>``: share of minimal pairs whose grammatical member has the higher total
  log-probability (BLiMP's full-sentence comparison), ``pair_acc_bayes_<ph>`` the share the
  grammar itself ranks right (1 when ungrammatical sentences have probability 0).

``npi_slot_acc`` and ``npi_pair_acc`` average the phenomena.
"""
from __future__ import annotations

import numpy as np
import torch

from tinyscope.studies.ncffn.licensing_npi import PHENOMENA, NPIGrammar, slot_ceiling


@torch.no_grad()
def sequence_logprobs(model: torch.nn.Module, tokens: np.ndarray, length: np.ndarray,
                      chunk: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence, the summed log-probability of tokens 1 .. length-1, and the argmax
    prediction at every position (for the next token)."""
    device = next(model.parameters()).device
    x = torch.from_numpy(tokens)  # (M, T)
    valid = torch.arange(x.shape[1] - 1)[None, :] < torch.from_numpy(length)[:, None] - 1  # (M, T-1)
    total, preds = [], []
    for i in range(0, len(x), chunk):
        logits = model(x[i:i + chunk, :-1].to(device)).float().cpu()  # (b, T-1, V)
        logp = torch.log_softmax(logits, -1).gather(-1, x[i:i + chunk, 1:, None])[..., 0]  # (b, T-1)
        total.append((logp * valid[i:i + chunk]).sum(-1))
        preds.append(logits.argmax(-1))
    return torch.cat(total), torch.cat(preds)


def phenomenon_metrics(model: torch.nn.Module, sets: dict, grammar: NPIGrammar) -> dict:
    """The module docstring's metrics on ``sets`` (:func:`~.licensing_npi.phenomenon_sets`)."""
    lp, pred = sequence_logprobs(model, sets["tokens"], sets["length"])
    rows = np.arange(len(sets["tokens"]))
    slot = sets["slot"]
    slot_hit = (pred[rows, slot - 1] == torch.from_numpy(sets["tokens"][rows, slot])).numpy()
    good = sets["pair_good"]
    pair_hit = (lp[good] > lp[good + 1]).numpy()
    sentence_phenomenon = sets["phenomenon"][sets["role"] == 0]
    out = {}
    for ph, name in enumerate(PHENOMENA):
        sent = (sets["role"] == 0) & (sets["phenomenon"] == ph)
        pairs = sets["phenomenon"][good] == ph
        out[f"slot_acc_{name}"] = float(slot_hit[sent].mean())
        out[f"slot_acc_bayes_{name}"] = slot_ceiling(grammar, ph)
        out[f"slot_acc_bayes_set_{name}"] = float(sets["bayes_slot_correct"][sentence_phenomenon == ph].mean())
        out[f"pair_acc_{name}"] = float(pair_hit[pairs].mean())
        out[f"pair_acc_bayes_{name}"] = float(sets["bayes_pair_correct"][pairs].mean())
    out["npi_slot_acc"] = float(np.mean([out[f"slot_acc_{n}"] for n in PHENOMENA]))
    out["npi_pair_acc"] = float(np.mean([out[f"pair_acc_{n}"] for n in PHENOMENA]))
    return out
