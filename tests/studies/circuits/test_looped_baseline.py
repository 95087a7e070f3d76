"""The looped softmax baseline (Fan et al.'s loop): targets, the loop itself, and training on it."""
import numpy as np
import pytest
import torch

from tinyscope.models.transformer import Transformer
from tinyscope.studies.circuits.enumeration import pad_batch, sample_expression
from tinyscope.studies.circuits.experiment import baseline_model
from tinyscope.studies.circuits.grammar import encode, evaluate, grammar
from tinyscope.studies.circuits.looped_baseline import (
    final_targets,
    final_targets_reference,
    logits_at_depth,
    loop_logits,
    looped_ce,
    looped_exact,
    token_loop_logits,
)
from tinyscope.studies.circuits.relative_baseline import RelativeBaselineConfig, RelativeLoopedBlock


def _expressions(name: str, n: int = 40, max_depth: int = 4, seed: int = 0):
    g = grammar(name)
    rng = np.random.default_rng(seed)
    exprs = [sample_expression(g, rng, int(rng.integers(1, max_depth + 1)), 0.5) for _ in range(n)]
    tokens, lengths = pad_batch(g, [encode(g, e) for e in exprs])
    return g, exprs, tokens, lengths


@pytest.mark.parametrize("name", ["boolean", "arithmetic", "listops"])
def test_final_targets_equal_reduction_to_the_end(name):
    g, exprs, tokens, lengths = _expressions(name)
    values = torch.tensor([evaluate(g, e) for e in exprs])
    fast = final_targets(g, torch.from_numpy(tokens), values).numpy()
    for i, n in enumerate(lengths):
        assert np.array_equal(fast[i, :n], final_targets_reference(g, tokens[i, :n]))


def _models(vocab: int):
    torch.manual_seed(0)
    return [Transformer(baseline_model(vocab - 1, n_ctx=128)),
            RelativeLoopedBlock(RelativeBaselineConfig(vocab_size=vocab, positions="rope")),
            RelativeLoopedBlock(RelativeBaselineConfig(vocab_size=vocab, positions="fire"))]


def test_one_iteration_is_the_plain_forward_and_depth_selects_the_iteration():
    g, exprs, tokens, _ = _expressions("arithmetic", n=6)
    x = torch.from_numpy(tokens)
    depths = torch.tensor([1, 3, 2, 1, 3, 2])
    for model in _models(g.blank + 1):
        steps = loop_logits(model, x, 3)
        assert len(steps) == 3 and torch.allclose(steps[0], model(x), atol=1e-6)
        assert not torch.allclose(steps[1], steps[0])  # the injected state changes the next pass
        picked = logits_at_depth(model, x, depths)
        for i, d in enumerate(depths.tolist()):
            assert torch.equal(picked[i], steps[d - 1][i])


def test_the_token_loop_stops_each_example_at_its_depth():
    g, exprs, tokens, lengths = _expressions("boolean", n=5)
    x = torch.from_numpy(tokens)
    pad = torch.arange(x.shape[1])[None] >= torch.from_numpy(lengths)[:, None]
    model = _models(g.blank + 1)[0]
    depths = torch.tensor([1, 2, 3, 1, 2])
    out = token_loop_logits(model, x, depths, pad, g.blank)
    for i, d in enumerate(depths.tolist()):  # one example alone, looped d times
        t = x[i:i + 1]
        for _ in range(d):
            logits = model(t)
            t = logits.argmax(-1).masked_fill(pad[i:i + 1], g.blank)
        assert torch.allclose(out[i], logits[0], atol=1e-5)


def test_the_hidden_loop_fits_depth_two_expressions_through_both_iterations():
    """Trained on looped_ce alone, the block reduces 24 depth-2 Boolean expressions exactly after
    two injected iterations: the objective reaches the answer through the loop."""
    from tinyscope.studies.circuits.enumeration import enumerate_depth
    from tinyscope.studies.circuits.task import expression_set

    g = grammar("boolean")
    exprs = enumerate_depth(g, 2)
    data = expression_set(g, [exprs[i] for i in np.random.default_rng(0).permutation(len(exprs))[:24]])
    batch = data.batch(np.arange(len(data)), g.blank).to_torch()
    torch.manual_seed(0)
    model = Transformer(baseline_model(g.D, n_ctx=64))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        opt.zero_grad()
        looped_ce(g, model, batch).backward()
        opt.step()
    with torch.no_grad():
        assert looped_exact(g, model, batch).all()


def test_baseline_runs_write_the_training_depth_accuracies(tmp_path):
    from tinyscope.runs.rundir import run_experiment

    for loop in ("hidden", "tokens"):
        res = run_experiment("circuit-boolean-baseline", "smoke", seed=8739, out=tmp_path / loop, progress=False,
                             report="none", overrides=[f"loop={loop}", "train.threads=1"])
        m = res["metrics"]
        assert {"train_depth1_acc", "train_depth2_acc", "step_exact", "depth3_acc"} <= set(m)
    with pytest.raises(Exception, match="loop"):
        run_experiment("circuit-boolean-baseline", "smoke", out=tmp_path / "bad", overrides=["loop=soft"])


def test_the_training_depth_accuracies_read_every_depth_1_expression():
    """Arithmetic's 400 depth-1 expressions are 0.15% of its mixed training set, so the 500 checked
    expressions of the cpu preset hold none: depth 1 is read on the first epoch's depth-1 set
    itself (this failure left every arithmetic baseline without a Table 2 entry)."""
    from tinyscope.runs import registry
    from tinyscope.runs.rundir import build

    exp = registry.get("circuit-arithmetic-baseline")
    cfg = exp.config("cpu", 8739, [])
    task, model = build(exp, cfg)
    assert not (exp._train_data(cfg, task).depths == 1).any()
    model.eval()
    with torch.no_grad():
        m = exp.train_depth_metrics(model, cfg, task)
    assert set(m) == {"train_depth1_acc", "train_depth2_acc"}
    one = task._epoch_sets(cfg.seed, 0)[0]
    with torch.no_grad():
        right = exp.answers(model, cfg, task, one) == exp._value_index(task, one.values)
    assert len(one) == 400 and m["train_depth1_acc"] == float(right.mean())
