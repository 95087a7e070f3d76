"""The 2-D geometry measured through hooks equals the model's own arithmetic."""
import numpy as np
import pytest
import torch

from tinyscope.errors import TinyscopeError
from tinyscope.interp.projection import fit_plane
from tinyscope.models.transformer import Transformer
from tinyscope.studies.minimal.experiment import minimal_model
from tinyscope.studies.minimal.geometry import all_points, landscape, output_probs
from tinyscope.studies.minimal.task import VOCAB
from tinyscope.studies.minimal.walkthrough import attention_from_qk, parse_sequence, trace_sequence


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(3)
    m = Transformer(minimal_model())
    with torch.no_grad():  # larger weights than the default init, so that argmax regions are varied
        for p in m.parameters():
            p.mul_(3.0)
    return m.eval()


def test_all_points_equal_the_weights(model):
    g = all_points(model, VOCAB)
    W_E, W_pos = model.W_E.weight.detach().numpy(), model.W_pos.weight.detach().numpy()
    e = W_E[:, None, :] + W_pos[None, :, :]  # (V, T, D)
    attn = model.blocks[0].attn
    np.testing.assert_allclose(g.emb, e, atol=1e-6)
    np.testing.assert_allclose(g.q, e @ attn.W_Q.weight.detach().numpy().T, atol=1e-5)
    np.testing.assert_allclose(g.k, e @ attn.W_K.weight.detach().numpy().T, atol=1e-5)
    np.testing.assert_allclose(g.v, e @ attn.W_V.weight.detach().numpy().T, atol=1e-5)
    assert g.point_labels()[11 * 8 + 5] == "+\u2085"
    S = g.scores()  # (V, T, V, T)
    assert S.shape == (12, 8, 12, 8)
    np.testing.assert_allclose(S[11, 5, 4, 2], g.q[11, 5] @ g.k[4, 2], rtol=1e-6)


def _manual_logits(model, z: np.ndarray) -> np.ndarray:
    """FFN with residual and LM head written out by hand (Sec. 2.2), no hooks."""
    mlp = model.blocks[0].mlp
    zt = torch.from_numpy(z).float()
    h = zt + mlp.W_out(torch.relu(mlp.W_in(zt)))
    return model.W_U(h).detach().numpy()


def test_argmax_map_agrees_with_the_model_at_sampled_points(model):
    land = landscape(model, (-6.0, 6.0), (-6.0, 6.0), n=41)
    rng = np.random.default_rng(0)
    iy, ix = rng.integers(0, 41, 200), rng.integers(0, 41, 200)
    z = np.stack([land.xs[ix], land.ys[iy]], -1)  # (200, 2)
    expected = _manual_logits(model, z).argmax(-1)
    np.testing.assert_array_equal(land.argmax[iy, ix], expected)
    assert len(np.unique(land.argmax)) > 1  # the check is not vacuous
    np.testing.assert_allclose(land.probs.sum(-1), 1.0, atol=1e-5)
    assert (land.entropy >= -1e-6).all() and (land.entropy <= np.log(12) + 1e-5).all()


def test_output_probs_equal_the_forward_pass_on_real_residuals(model):
    tokens = torch.randint(0, 12, (16, 8), generator=torch.Generator().manual_seed(1))
    logits, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_mid")
    z = cache["resid_mid", 0].reshape(-1, 2).numpy()  # (128, 2)
    expected = torch.softmax(logits, -1).reshape(-1, 12).detach().numpy()  # (128, 12)
    np.testing.assert_allclose(output_probs(model, z), expected, atol=1e-5)


def test_walkthrough_attention_equals_the_cached_pattern(model):
    ids = parse_sequence("4 1 + 4 6 9 5 +", VOCAB)
    tr = trace_sequence(model, ids, VOCAB)
    _, cache = model.run_with_cache(torch.tensor([ids]))
    np.testing.assert_allclose(tr.pattern, cache["pattern", 0][0, 0].numpy(), atol=1e-6)
    np.testing.assert_allclose(tr.head_out, cache["z", 0][0, :, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(tr.z, tr.e + tr.attn_out, atol=1e-5)
    assert np.isneginf(tr.scores[0, 1]) and np.isfinite(tr.scores[1, 0])
    np.testing.assert_array_equal(tr.probs.argmax(-1), model(torch.tensor([ids]))[0].argmax(-1).numpy())


def test_attention_from_qk_matches_a_loop():
    rng = np.random.default_rng(4)
    q, k = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    _, A = attention_from_qk(q, k)
    for i in range(5):
        s = np.array([q[i] @ k[j] / np.sqrt(2) for j in range(i + 1)])
        np.testing.assert_allclose(A[i, :i + 1], np.exp(s) / np.exp(s).sum(), rtol=1e-10)
        assert (A[i, i + 1:] == 0).all()


def test_parse_sequence_names_the_bad_token():
    with pytest.raises(TinyscopeError, match="'x'"):
        parse_sequence("4 x +", VOCAB)


def test_plane_is_exact_in_2d_and_pca_otherwise():
    rng = np.random.default_rng(0)
    exact = fit_plane(rng.normal(size=(10, 2)))
    assert exact.exact and exact.axis_labels() == ("dim 1", "dim 2")
    basis = np.linalg.qr(rng.normal(size=(5, 2)))[0].T  # (2, 5) orthonormal rows
    pts = rng.normal(size=(50, 2)) * [3.0, 1.0] @ basis + 7.0  # points on an affine plane of R^5
    plane = fit_plane(pts)
    assert not plane.exact and "PC 1" in plane.axis_labels()[0] and "PCA" in plane.note
    np.testing.assert_allclose(plane.lift(plane.project(pts)), pts, atol=1e-9)
    assert plane.explained[0] > plane.explained[1] and sum(plane.explained) == pytest.approx(1.0)


def test_geometry_is_a_copy_that_loading_other_weights_leaves_alone():
    torch.manual_seed(0)
    m = Transformer(minimal_model()).eval()
    g, tr = all_points(m, VOCAB), trace_sequence(m, parse_sequence("4 1 + 4 6", VOCAB), VOCAB)
    before = {k: getattr(g, k).copy() for k in ("tok", "pos", "emb", "q", "k", "v", "W_Q", "W_K", "W_V")}
    p_before = tr.p.copy()
    with torch.no_grad():  # what loading the next checkpoint into the same model does: copy_ into the parameters
        for p in m.parameters():
            p.copy_(torch.randn_like(p))
    for name, arr in before.items():
        np.testing.assert_array_equal(getattr(g, name), arr, err_msg=name)
    np.testing.assert_array_equal(tr.p, p_before)
    assert not np.allclose(all_points(m, VOCAB).pos, before["pos"])  # the weights did change


def test_masked_scores_and_pooled_attention_equal_a_loop(model):
    g = all_points(model, VOCAB)
    V, T, dk = g.V, g.T, g.d_head
    S = g.masked_scaled_scores()  # (V*T, V*T)
    out = g.pooled_attention()  # (V, T, Dh)
    for a in (0, 4, 11):
        for t in (0, 3, 7):
            row = S[a * T + t]
            keys = [(b, s) for b in range(V) for s in range(T) if s <= t]
            assert np.isfinite(row).sum() == len(keys) == V * (t + 1)
            for b, s in keys[::7]:
                np.testing.assert_allclose(row[b * T + s], g.q[a, t] @ g.k[b, s] / np.sqrt(dk), rtol=1e-5)
            assert np.isnan(row[[b * T + s for b in range(V) for s in range(T) if s > t]]).all()
            logits = np.array([g.q[a, t] @ g.k[b, s] / np.sqrt(dk) for b, s in keys])
            w = np.exp(logits - logits.max())
            w /= w.sum()
            expected = sum(wi * g.v[b, s] for wi, (b, s) in zip(w, keys))
            np.testing.assert_allclose(out[a, t], expected, rtol=1e-4, atol=1e-6)
