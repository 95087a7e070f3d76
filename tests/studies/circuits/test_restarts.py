"""Restart stages: a solved phase is kept, an unsolved one is redrawn from (seed, k)."""
import dataclasses

import torch

from tinyscope.runs.registry import get
from tinyscope.studies.circuits.construction import construct
from tinyscope.studies.circuits.restarts import restart_seed, restart_stages


def _setup(restarts: int = 2):
    exp = get("circuit-boolean")
    cfg = dataclasses.replace(exp.config("smoke"), restarts=restarts)
    task = exp.build_task(cfg)
    stages = exp.stages(cfg, task)
    return exp, cfg, task, stages


def test_a_solved_model_is_kept_and_an_unsolved_one_redrawn_from_seed_and_k():
    exp, cfg, task, stages = _setup()
    assert [s.name for s in stages] == ["restart1", "restart2"]
    assert stages[0].seed == restart_seed(cfg.seed, 1) != stages[1].seed
    assert stages[0].train.stop_consecutive == 1 and stages[0].train.eval_at_start
    solved = construct("boolean")
    before = {k: v.clone() for k, v in solved.state_dict().items()}
    stages[0].prepare(solved)
    assert all(torch.equal(before[k], v) for k, v in solved.state_dict().items())

    def unsolved():
        torch.manual_seed(0)
        return exp.build_model(cfg, task)

    a, b = unsolved(), unsolved()
    stages[0].prepare(a)
    stages[0].prepare(b)
    fresh = unsolved()
    assert torch.equal(a.g_pe, b.g_pe) and not torch.equal(a.g_pe, fresh.g_pe)
    stages[1].prepare(fresh)
    assert not torch.equal(fresh.g_pe, a.g_pe)  # restart 2 draws other weights than restart 1


def test_no_restarts_no_stages():
    assert _setup(0)[3] == [] and restart_stages(dataclasses.replace(_setup(0)[1], restarts=0), None, None) == []
