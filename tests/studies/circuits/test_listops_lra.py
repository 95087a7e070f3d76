"""The listops-lra variant (Long Range Arena conventions): fan-in 2..10, MED the integer part of the
median; its closed-form construction (width 170) is exact."""
import numpy as np
import pytest
import torch

from tinyscope.studies.circuits.construction import construct
from tinyscope.studies.circuits.enumeration import enumerate_depth, pad_batch, sample_lra_expression
from tinyscope.studies.circuits.grammar import LISTOPS, LISTOPS_LRA, ParseError, depth, encode, evaluate, parse
from tinyscope.studies.circuits.reduction import reduce_once

G = LISTOPS_LRA


def test_med_is_the_integer_part_of_the_median():
    rng = np.random.default_rng(0)
    for _ in range(500):
        xs = rng.integers(10, size=int(rng.integers(2, 11))).tolist()
        assert G.apply("MED", xs) == int(np.median(xs))
    pairs = [(a, b) for a in range(10) for b in range(10)]
    assert sum(G.apply("MED", p) != LISTOPS.apply("MED", p) for p in pairs) == 72  # listops takes the lower one
    assert G.apply("MED", [2, 7]) == 4 and LISTOPS.apply("MED", [2, 7]) == 2


def test_fan_in_runs_from_2_to_10():
    text = "(SM 1 2 3 4 5 6 7 8 9 9)"
    assert evaluate(G, parse(G, text)) == 54 % 10
    with pytest.raises(ParseError, match="wrong arity"):
        parse(LISTOPS, text)
    with pytest.raises(ParseError, match="wrong arity"):
        parse(G, "(MAX 1 2 3 4 5 6 7 8 9 9 9)")
    with pytest.raises(ValueError, match="sample them instead"):
        enumerate_depth(G, 1)


def _answers(model, exprs):
    toks, _ = pad_batch(G, [encode(G, e) for e in exprs])
    with torch.no_grad():
        out = model.run(torch.from_numpy(toks))
    lit = out.readout[:, 2:12].argmax(-1).numpy()
    clean = out.readout.sum(-1).numpy() == 1
    return np.where(clean, lit, -1), out.iterations.numpy()


def test_construction_is_exact_on_random_bags_and_lra_style_expressions():
    model = construct("listops-lra")
    assert model.cfg.d_hidden == 170  # the paper's 128 units do not hold this closed form
    rng = np.random.default_rng(1)
    ops = list(G.operators)
    bags = [(ops[i % 4], tuple(int(v) for v in rng.integers(10, size=2 + i % 9))) for i in range(360)]
    toks, lens = pad_batch(G, [encode(G, e) for e in bags])
    with torch.no_grad():
        state = model.step(model.embed(torch.from_numpy(toks))).state  # (B, T, D)
    ids = torch.where(state.sum(-1) > 0, state.argmax(-1), torch.tensor(G.blank))
    ref, _ = pad_batch(G, [reduce_once(G, encode(G, e)) for e in bags])
    assert torch.equal(ids, torch.from_numpy(ref))
    exprs = [sample_lra_expression(G, rng, max_depth=4) for _ in range(30)]
    pred, iters = _answers(model, exprs)
    assert (pred == np.array([evaluate(G, e) for e in exprs])).all()
    assert (iters == np.array([depth(e) for e in exprs])).all()
