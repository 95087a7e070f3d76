"""CRvNN baseline: the paper's parameter count, the soft neighbours, a hard composition schedule
reducing a tree in order, the input without BLANKs, and a smoke run."""
import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.runs.registry import get
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.circuits.crvnn import CRvNN, CRvNNConfig, left_neighbours, n_parameters, right_neighbours
from tinyscope.studies.circuits.crvnn_experiment import CRVNN_DEPTHS, compact


def test_paper_preset_has_the_papers_521611_parameters():
    cfg = get("circuit-listops-crvnn").config("paper")
    model = CRvNN(cfg.crvnn)
    assert n_parameters(model) == 521_611
    assert model.embedding.num_embeddings == 16  # the 16 ListOps symbols
    assert n_parameters(CRvNN(CRvNNConfig(vocab_size=18))) == 521_611 + 2 * 128


def test_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="window"):
        CRvNNConfig(window=4)
    with pytest.raises(ConfigError, match="stop_threshold"):
        CRvNNConfig(stop_threshold=0.0)


def test_neighbours_take_the_first_unit_of_existence_mass():
    a = torch.tensor([[1.0, 0.0, 1.0, 1.0]])
    R, L = right_neighbours(a)[0], left_neighbours(a)[0]
    assert torch.equal(R[0], torch.tensor([0.0, 0.0, 1.0, 0.0]))  # skips the composed-away position 1
    assert torch.equal(L[3], torch.tensor([0.0, 0.0, 1.0, 0.0]))
    assert torch.equal(L[2], torch.tensor([1.0, 0.0, 0.0, 0.0]))
    soft = right_neighbours(torch.tensor([[1.0, 0.5, 0.75, 1.0]]))[0]
    assert torch.allclose(soft[0], torch.tensor([0.0, 0.5, 0.5, 0.0]))  # 0.5 + the rest of the unit
    assert torch.allclose(soft.sum(-1)[:3], torch.ones(3))


def test_a_hard_schedule_composes_the_tree_in_that_order():
    """Tokens a b c d; iteration 0 folds b into c, 1 folds a into (b c), 2 folds that into d:
    the last state is cell(cell(a, cell(b, c)), d) and only d still exists."""
    torch.manual_seed(0)
    model = CRvNN(CRvNNConfig()).eval()
    tokens, mask = torch.tensor([[3, 7, 12, 5]]), torch.ones(1, 4, dtype=torch.bool)
    schedule = [torch.tensor([[0.0, 1, 0, 0]]), torch.tensor([[1.0, 0, 0, 0]]), torch.tensor([[0.0, 0, 1, 0]])]
    with torch.no_grad():
        out = model(tokens, mask, transitions=schedule)
        a, b, c, d = model.leaves(tokens, mask.float())[0]
        expected = model.cell(model.cell(a, model.cell(b, c)), d)
        wrong_order = model.cell(model.cell(model.cell(a, b), c), d)
    assert torch.allclose(out.states[0, 3], expected, atol=1e-6)
    assert not torch.allclose(out.states[0, 3], wrong_order, atol=1e-3)
    assert torch.equal(out.existence[0], torch.tensor([0.0, 0, 0, 1]))
    assert float(out.penalty[0]) == pytest.approx(0.0, abs=1e-6)  # ended with the last token alone
    assert torch.allclose(model.classifier(expected), out.logits[0], atol=1e-6)


def test_learned_recursion_halts_and_ignores_padding():
    torch.manual_seed(1)
    model = CRvNN(CRvNNConfig()).eval()
    tokens = torch.randint(0, 16, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, 5:] = False
    with torch.no_grad():
        out = model(tokens, mask)
        alone = model(tokens[1:2, :5], mask[1:2, :5])
    assert (out.iterations <= mask.sum(1)).all()
    assert torch.allclose(out.logits[1], alone.logits[0], atol=1e-5)  # padding changes nothing


def test_compact_drops_blanks_in_order():
    blank = 16
    ids, mask = compact(torch.tensor([[0, 10, 2, 1, 16, 3], [16, 16, 4, 16, 16, 16]]), blank)
    assert ids.tolist() == [[0, 10, 2, 1, 3], [4, 0, 0, 0, 0]]
    assert mask.tolist() == [[True] * 5, [True, False, False, False, False]]


def test_smoke_run_trains_and_reports_accuracy_by_depth(tmp_path):
    torch.set_num_threads(1)
    res = run_experiment("circuit-listops-crvnn", "smoke", out=tmp_path / "r", progress=False)
    m = res["metrics"]
    assert {f"depth{d}_acc" for d in CRVNN_DEPTHS} <= set(m)
    assert all(0.0 <= m[f"depth{d}_acc"] <= 1.0 for d in CRVNN_DEPTHS)
    assert {"train_depth1_acc", "train_depth2_acc", "train_loss_ce"} <= set(m)
    assert res["steps"] >= 10


def test_claims_cover_the_seven_depths_on_the_paper_preset():
    from tinyscope.studies.circuits.claims import CLAIMS, CRVNN_ACC

    ours = [c for c in CLAIMS if c.experiment == "circuit-listops-crvnn"]
    assert sorted(c.id for c in ours if c.compute is None) == sorted(f"circuits/crvnn/listops/acc_d{d}" for d in CRVNN_ACC)
    assert [float(CRVNN_ACC[d]) for d in CRVNN_DEPTHS] == [1.0, 0.961, 0.674, 0.431, 0.302, 0.177, 0.169]
    exp = get("circuit-listops-crvnn")
    for c in ours:
        if c.compute is not None:
            assert c.compute() == 521_611
            continue
        rs = c.runs[0]
        cfg = exp.config(rs.preset, rs.seeds[0])
        assert c.needs_gpu and rs.preset == "paper" and len(rs.seeds) == 5
        assert cfg.task.eval_depths == CRVNN_DEPTHS and cfg.epochs == 300
