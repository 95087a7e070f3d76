"""Import of the authors' checkpoint format (Raneem-mahajne/creating_transformer): a checkpoint
written here in their format, by a re-implementation of their model, gives the same logits in
tinyscope's model; anything but a plain state dict is refused in one line."""
import json
import math
import pickle

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tinyscope.cli import main
from tinyscope.runs.rundir import load_run
from tinyscope.studies.minimal.authors_checkpoint import AuthorsCheckpointError, import_checkpoints, read_state


class _Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))


class _FFN(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_embd, 16 * n_embd), nn.ReLU(), nn.Linear(16 * n_embd, n_embd))


class _Heads(nn.Module):
    def __init__(self, n_heads, n_embd, head_size, block_size):
        super().__init__()
        self.heads = nn.ModuleList([_Head(n_embd, head_size, block_size) for _ in range(n_heads)])


class TheirModel(nn.Module):
    """The authors' architecture under their parameter names (Sec. 2.2 of the paper), written here."""

    def __init__(self, vocab=12, n_embd=2, block_size=8, n_heads=1, head_size=2):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.sa_heads = _Heads(n_heads, n_embd, head_size, block_size)
        self.ffwd = _FFN(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding_table(torch.arange(T))  # (B, T, C)
        outs = []
        for h in self.sa_heads.heads:
            q, k, v = h.query(x), h.key(x), h.value(x)  # (B, T, hs)
            w = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, T, T)
            w = F.softmax(w.masked_fill(h.tril[:T, :T] == 0, float("-inf")), -1)
            outs.append(w @ v)
        x = x + torch.cat(outs, -1)
        x = x + self.ffwd.net(x)
        return self.lm_head(x)  # (B, T, V)


def _write_theirs(folder, models: dict, final):
    """Their layout: checkpoints/model.pt (final), checkpoints/step_NNNNNN/model.pt, metadata.json."""
    ck = folder / "checkpoints"
    ck.mkdir(parents=True)
    torch.save(final.state_dict(), ck / "model.pt")
    for step, m in models.items():
        (ck / f"step_{step:06d}").mkdir()
        torch.save(m.state_dict(), ck / f"step_{step:06d}" / "model.pt")
    meta = {"vocab_size": 12, "step": None, "steps_for_plot": [0, 200], "train_loss_history": [2.5, 2.0],
            "val_loss_history": [2.6, 2.1], "rule_error_history": [0.8, 0.4], "eval_interval": 200,
            "model_config": {"n_embd": 2, "block_size": 8, "num_heads": 1, "head_size": 2}}
    (ck / "metadata.json").write_text(json.dumps(meta))
    return ck


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("authors")
    torch.manual_seed(1)
    early, final = TheirModel(), TheirModel()
    ck = _write_theirs(root / "theirs", {100: early}, final)

    class Trap:  # unpickling this would write the file: the importer must never unpickle their pickles
        def __reduce__(self):
            return (open, (str(root / "unpickled"), "w"))

    (ck / "itos.pkl").write_bytes(pickle.dumps(Trap()))
    out = root / "run"
    results = import_checkpoints(ck, out)
    return root, out, early, final, results


def test_imported_logits_equal_the_authors_model(imported):
    root, out, early, final, results = imported
    tokens = torch.randint(0, 12, (16, 8), generator=torch.Generator().manual_seed(0))
    run = load_run(out)
    assert run.step == 400 == results["steps"]  # the last evaluation (200) + eval_interval
    with torch.no_grad():
        assert torch.allclose(run.model(tokens), final(tokens), atol=1e-5)
        assert torch.allclose(load_run(out, 100).model(tokens), early(tokens), atol=1e-5)
        assert not torch.allclose(early(tokens), final(tokens), atol=1e-3)
    assert not (root / "unpickled").exists()
    assert set(results["metrics"]) >= {"rule_error", "rule_error_sampled", "rule_error_expected"}
    assert results["imported_from"]["steps"] == [100, 400]
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["rule_error_sampled"] for r in logged if "rule_error_sampled" in r] == [0.8, 0.4]


def test_a_two_head_checkpoint_imports_with_heads_stacked(tmp_path):
    torch.manual_seed(2)
    theirs = TheirModel(n_embd=4, n_heads=2, head_size=2)
    ck = _write_theirs(tmp_path / "theirs", {}, theirs)
    meta = json.loads((ck / "metadata.json").read_text())
    meta["model_config"] = {"n_embd": 4, "block_size": 8, "num_heads": 2, "head_size": 2}
    (ck / "metadata.json").write_text(json.dumps(meta))
    import_checkpoints(ck / "model.pt", tmp_path / "run", final_step=7)
    run = load_run(tmp_path / "run")
    tokens = torch.randint(0, 12, (4, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert run.step == 7 and torch.allclose(run.model(tokens), theirs(tokens), atol=1e-5)


class _NotTensors:
    pass


def test_anything_but_a_state_dict_is_refused_in_one_line(tmp_path, capsys):
    code = tmp_path / "code.pt"
    torch.save({"token_embedding.weight": _NotTensors()}, code)
    with pytest.raises(AuthorsCheckpointError, match="weights_only"):
        read_state(code)
    ln = tmp_path / "ln" / "checkpoints"
    ln.mkdir(parents=True)
    state = TheirModel().state_dict()
    state["ln1.weight"] = torch.ones(2)
    torch.save(state, ln / "model.pt")
    assert main(["import", "creating-transformer", str(ln), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ln1.weight" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run").exists()
    assert main(["import", "creating-transformer", str(tmp_path / "missing"), "--out", str(tmp_path / "r2")]) == 2
