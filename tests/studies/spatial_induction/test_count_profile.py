import numpy as np
import pytest
import torch

from tinyscope.studies.spatial_induction.bayes import posterior_predictive
from tinyscope.studies.spatial_induction.construction_sets import query_sets
from tinyscope.studies.spatial_induction.count_profile import ALPHAS, BIN_EDGES, CountProfile, bin_labels
from tinyscope.studies.spatial_induction.evolve import evolve
from tinyscope.studies.spatial_induction.lattice import elementary
from tinyscope.studies.spatial_induction.serialize import Layout


def stochastic_batch(V=3, B=6, T=8, seed=0):
    lat = elementary(10, V=V)
    rng = np.random.default_rng(seed)
    tables = rng.dirichlet(np.ones(V), size=(B, lat.n_configs))  # (B, C, V)
    return lat, Layout(lat, T), evolve(lat, tables, T, rng)


def bayes_logits(layout, traj, alpha):
    """Logits (B, N, V) whose softmax is the alpha-posterior predictive at every query."""
    probs = layout.to_stream(posterior_predictive(layout.lattice, traj, alpha).probs, fill=1.0 / layout.V)
    return torch.from_numpy(np.log(np.clip(probs, 1e-300, None)))


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_a_bayes_model_has_zero_kl_at_its_own_pseudocount(alpha):
    lat, layout, traj = stochastic_batch()
    sets = query_sets(layout, traj, 2)
    profile = CountProfile(layout)
    profile.add(bayes_logits(layout, traj, alpha), traj[:3], query_sets(layout, traj[:3], 2))
    profile.add(bayes_logits(layout, traj, alpha)[3:], traj[3:], query_sets(layout, traj[3:], 2))
    res = profile.result()
    assert sum(res["n_queries"]) == len(sets)
    assert res["closest_alpha"] == alpha and res["kl_by_alpha"][str(alpha)] < 1e-9
    assert min(res["kl_by_alpha"].values()) > -1e-12 and len(res["kl_by_alpha"]) == len(ALPHAS)
    if alpha == 1.0:
        assert max(res["kl_kgram"]) < 1e-9
        filled = [i for i, n in enumerate(res["n_queries"]) if n]
        assert np.allclose(np.array(res["entropy_model"])[filled], np.array(res["entropy_kgram"])[filled])
    else:  # pseudocount 2 against 1: both uniform where n_c = 0, different wherever n_c >= 1
        assert res["n_queries"][0] > 0 and res["kl_kgram"][0] < 1e-12
        assert all(kl > 1e-4 for kl, n in zip(res["kl_kgram"][1:], res["n_queries"][1:]) if n)

def test_bins_count_the_earlier_occurrences_directly():
    lat, layout, traj = stochastic_batch(V=2, B=2, T=6, seed=3)
    sets = query_sets(layout, traj, 2)
    profile = CountProfile(layout)
    profile.add(bayes_logits(layout, traj, 1.0), traj, sets)
    n_c = sets.matching.sum(1)  # earlier completed cells with the target's configuration
    expected = np.bincount(np.searchsorted(BIN_EDGES, n_c, side="right") - 1, minlength=len(BIN_EDGES))
    assert profile.result()["n_queries"] == expected.tolist()
    assert bin_labels() == ["0", "1", "2", "3", "4-7", "8-15", "16-31", "32+"]


def test_error_rate_counts_wrong_argmax_by_bin_directly():
    """A model that predicts the true next state except at the queries of one bin errs there only."""
    lat, layout, traj = stochastic_batch(V=2, B=4, T=6, seed=5)
    sets = query_sets(layout, traj, 2)
    n_c = sets.matching.sum(1)  # (Q,)
    bins = np.searchsorted(BIN_EDGES, n_c, side="right") - 1  # (Q,)
    wrong = bins == 1
    logits = torch.zeros(len(traj), layout.input_length, layout.V, dtype=torch.float64)  # (B, N, V)
    guess = np.where(wrong, 1 - sets.target, sets.target)  # (Q,)
    logits[torch.as_tensor(sets.batch), torch.as_tensor(sets.pos), torch.as_tensor(guess)] = 5.0
    profile = CountProfile(layout)
    profile.add(logits, traj, sets)
    res = profile.result()
    assert wrong.any() and res["error_rate"][1] == 1.0
    assert all(e == 0.0 for i, e in enumerate(res["error_rate"]) if i != 1)
