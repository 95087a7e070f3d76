"""runs/restarts.py: a restart keeps a solved model and otherwise draws every weight from its
own seed, which also seeds the stage's batches."""
import torch

from tinyscope.runs.restarts import restart_seed, restart_stages
from tinyscope.train.trainer import TrainConfig


def _fresh():
    return torch.nn.Linear(3, 2)


def test_a_solved_model_is_kept_and_an_unsolved_one_redrawn_from_the_restart_seed():
    stages = restart_stages(11, 2, TrainConfig(steps=5), lambda m: bool(m.bias[0] > 100), _fresh)
    assert [s.name for s in stages] == ["restart1", "restart2"]
    assert [s.seed for s in stages] == [restart_seed(11, 1), restart_seed(11, 2)] and stages[0].seed != stages[1].seed
    model = _fresh()
    with torch.no_grad():
        model.bias.fill_(1000.0)
    kept = {k: v.clone() for k, v in model.state_dict().items()}
    stages[0].prepare(model)
    assert all(torch.equal(kept[k], v) for k, v in model.state_dict().items())
    with torch.no_grad():
        model.bias.fill_(0.0)
    model.train()
    stages[1].prepare(model)
    torch.manual_seed(restart_seed(11, 2))
    expected = _fresh().state_dict()
    assert all(torch.equal(expected[k], v) for k, v in model.state_dict().items()) and model.training


def test_a_salt_separates_streams_and_zero_restarts_is_none():
    assert restart_seed(3, 1, (7,)) != restart_seed(3, 1) and restart_stages(3, 0, TrainConfig(), None, None) == []
