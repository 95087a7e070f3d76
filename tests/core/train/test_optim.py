import copy
import json

import pytest
import torch
from torch import nn

from tinyscope.errors import ConfigError
from tinyscope.runs.rundir import run_experiment
from tinyscope.train import machine
from tinyscope.train.optim import TORCH_MUON, MuonAdamW, muon_param_groups, orthogonalize, orthogonalize_svd
from tinyscope.train.trainer import TrainConfig


@pytest.mark.parametrize("shape", [(96, 48), (48, 96), (64, 64)])
def test_newton_schulz_is_close_to_the_exact_polar_factor(shape):
    g = torch.Generator().manual_seed(0)
    u, _ = torch.linalg.qr(torch.randn(shape[0], min(shape), generator=g))
    v, _ = torch.linalg.qr(torch.randn(shape[1], min(shape), generator=g))
    sv = torch.linspace(0.05, 1.0, min(shape))  # condition number 20; five iterations cannot
    m = u @ torch.diag(sv) @ v.T                # lift singular values near 0 (a random square matrix)
    approx, exact = orthogonalize(m), orthogonalize_svd(m)
    assert approx.shape == m.shape
    # the quintic iteration maps singular values into roughly [0.7, 1.2], not exactly to 1 ...
    sv = torch.linalg.svdvals(approx)
    assert sv.min() > 0.5 and sv.max() < 1.3
    # ... with the singular vectors of m: the projection onto the exact factor dominates
    cos = (approx * exact).sum() / (approx.norm() * exact.norm())
    assert cos > 0.95
    # and the exact reference is orthogonal
    small = min(shape)
    gram = exact.T @ exact if shape[0] >= shape[1] else exact @ exact.T
    assert torch.allclose(gram, torch.eye(small), atol=1e-5)


def test_groups_split_hidden_matrices_from_everything_else():
    net = nn.Sequential(nn.Linear(1, 64), nn.Linear(64, 48), nn.LayerNorm(48), nn.Linear(48, 3))
    groups = muon_param_groups(net, muon_lr=0.02, adam_lr=1e-3)
    muon = {id(p) for p in groups[0]["params"]}
    assert groups[0]["use_muon"] and not groups[1]["use_muon"]
    assert muon == {id(net[1].weight)}
    assert sum(len(g["params"]) for g in groups) == len(list(net.parameters()))
    assert [g["base_lr"] for g in groups] == [0.02, 1e-3]


def test_the_adamw_half_matches_torch_adamw_step_for_step():
    torch.manual_seed(0)
    a, b = nn.Linear(5, 4), nn.Linear(5, 4)
    b.load_state_dict(a.state_dict())
    ours = MuonAdamW([dict(params=list(a.parameters()), use_muon=False, lr=3e-3)], weight_decay=0.1)
    ref = torch.optim.AdamW(b.parameters(), lr=3e-3, weight_decay=0.1)
    for _ in range(5):
        x = torch.randn(8, 5)
        for net, opt in ((a, ours), (b, ref)):
            opt.zero_grad()
            net(x).pow(2).sum().backward()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_a_muon_step_is_the_orthogonalised_nesterov_momentum():
    torch.manual_seed(1)
    w = nn.Parameter(torch.randn(32, 16))
    start = w.detach().clone()
    opt = MuonAdamW([dict(params=[w], use_muon=True, lr=0.1)], momentum=0.9, weight_decay=0.0)
    grads = [torch.randn(32, 16) for _ in range(2)]
    buf = torch.zeros(32, 16)
    expect = start.clone()
    for g in grads:
        w.grad = g.clone()
        opt.step()
        buf = 0.9 * buf + g
        expect = expect - 0.1 * (32 / 16) ** 0.5 * orthogonalize(g + 0.9 * buf)
    assert torch.allclose(w.detach(), expect, atol=1e-5)


def _mlp(seed: int = 0) -> nn.Module:
    """Matrices for Muon of every kind (wide, tall, square) and thin layers for AdamW."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(24, 64), nn.GELU(), nn.Linear(64, 96), nn.GELU(), nn.Linear(96, 40),
                         nn.GELU(), nn.Linear(40, 40), nn.Linear(40, 3))


def _muon_adamw(net: nn.Module, **kw) -> MuonAdamW:
    return MuonAdamW(muon_param_groups(net, muon_lr=0.02, adam_lr=1e-3), weight_decay=0.1, momentum=0.9, **kw)


def _step(net: nn.Module, opt: MuonAdamW, x: torch.Tensor, scale: float) -> None:
    for group in opt.param_groups:  # as the trainer's schedule does
        group["lr"] = group["base_lr"] * scale
    opt.zero_grad()
    net(x).pow(2).mean().backward()
    opt.step()


def test_torch_muon_runs_where_torch_has_it():
    """torch >= 2.9 ships torch.optim.Muon; `auto` uses it when Newton-Schulz runs in bf16."""
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 9):
        assert TORCH_MUON is torch.optim.Muon
    expect = "torch" if TORCH_MUON is not None else "tinyscope"
    assert _muon_adamw(_mlp(), ns_bf16=True).implementation == expect
    assert _muon_adamw(_mlp(), ns_bf16=False).implementation == "tinyscope"  # torch's Muon is bf16 only
    with pytest.raises(ValueError, match="bfloat16"):
        _muon_adamw(_mlp(), ns_bf16=False, implementation="torch")


@pytest.mark.skipif(TORCH_MUON is None, reason="this torch has no torch.optim.Muon to compare with")
def test_torch_muon_and_ours_are_equal_step_for_step_in_bf16():
    """The fallback does torch's operations in torch's order: the same parameters and momentum
    after every step, with a schedule changing the rates and weight decay on."""
    a, b = _mlp(), _mlp()
    theirs, ours = _muon_adamw(a, ns_bf16=True, implementation="torch"), _muon_adamw(b, ns_bf16=True,
                                                                                  implementation="tinyscope")
    g = torch.Generator().manual_seed(3)
    for s in range(6):
        x = torch.randn(16, 24, generator=g)
        _step(a, theirs, x, 1 - s / 10)
        _step(b, ours, x, 1 - s / 10)
        for p, q in zip(a.parameters(), b.parameters()):
            assert torch.equal(p, q)
    sa, sb = theirs.state_dict()["state"], ours.state_dict()["state"]
    assert sa.keys() == sb.keys() and all(torch.equal(sa[i][k], sb[i][k]) for i in sa for k in sa[i])


@pytest.mark.skipif(TORCH_MUON is None, reason="this torch has no torch.optim.Muon to compare with")
def test_ours_in_fp32_is_torch_muon_to_bf16_rounding():
    """From the same state, a step of ours with Newton-Schulz in float32 moves each Muon matrix
    as torch's bfloat16 step does, to 3% (bfloat16 keeps ~3 digits; ~1.6% measured)."""
    a, b = _mlp(), _mlp()
    theirs, ours = _muon_adamw(a, ns_bf16=True), _muon_adamw(b, ns_bf16=False)
    g = torch.Generator().manual_seed(4)
    for _ in range(3):
        b.load_state_dict(a.state_dict())
        ours.load_state_dict(copy.deepcopy(theirs.state_dict()))  # (a load keeps the tensors it is given)
        before = [p.detach().clone() for p in a.parameters()]
        for p, q in zip(a.parameters(), b.parameters()):  # full-rank gradients: the whole update is determined
            p.grad = torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()
        theirs.step()
        ours.step()
        for p, q, p0 in zip(a.parameters(), b.parameters(), before):
            if p.dim() == 2 and min(p.shape) >= 32:
                assert float((p - q).detach().norm() / (p.detach() - p0).norm()) < 0.03, p.shape


def test_a_checkpoint_moves_between_implementations_and_from_the_summed_momentum():
    """A state_dict of torch's Muon loads into ours (the same keys), and one of before, with
    the summed momentum B' (B' <- mu B' + G), is converted to the average B = (1 - mu) B'."""
    a, b = _mlp(), _mlp()
    first, second = _muon_adamw(a, ns_bf16=True), _muon_adamw(b, ns_bf16=True, implementation="tinyscope")
    _step(a, first, torch.randn(16, 24), 1.0)
    b.load_state_dict(a.state_dict())
    second.load_state_dict(copy.deepcopy(first.state_dict()))
    x = torch.randn(16, 24)
    _step(a, first, x, 1.0)
    _step(b, second, x, 1.0)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))

    old = copy.deepcopy(first.state_dict())
    muon_ids = old["param_groups"][0]["params"]
    for i in muon_ids:
        old["state"][i] = {"momentum": old["state"][i]["momentum_buffer"] / (1 - 0.9)}
    for key in ("nesterov", "ns_coefficients", "adjust_lr_fn"):
        del old["param_groups"][0][key]
    fresh = _muon_adamw(_mlp(), ns_bf16=True)
    fresh.load_state_dict(old)
    for i, p in zip(muon_ids, fresh.param_groups[0]["params"]):
        assert torch.allclose(fresh.state[p]["momentum_buffer"], first.state_dict()["state"][i]["momentum_buffer"])
    assert fresh.param_groups[0]["nesterov"] is True


def test_bad_optimizer_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="train.optimizer"):
        TrainConfig(optimizer="sgd")
    with pytest.raises(ConfigError, match="train.muon_lr"):
        TrainConfig(optimizer="muon", muon_lr=0.0)
    with pytest.raises(ConfigError, match="train.muon_momentum"):
        TrainConfig(optimizer="muon", muon_momentum=1.0)


def test_a_killed_muon_run_resumes_exactly(tmp_path, kill_run_at):
    """Muon's momentum and AdamW's moments travel through the resume checkpoint."""
    overrides = ["train.optimizer=muon", "train.checkpoint_every=6"]
    full = run_experiment("theia-kleene", "smoke", seed=2, overrides=overrides, out=tmp_path / "full",
                          progress=False, report="none")
    out = tmp_path / "killed"
    trainer = kill_run_at("theia-kleene", "smoke", 2, overrides, out, tmp_path / "full", step=12)
    assert isinstance(trainer.opt, MuonAdamW) and trainer.opt.param_groups[0]["use_muon"]
    # torch's Muon iterates in bf16 only, which the trainer asks for on a CPU with native bf16
    torch_muon = TORCH_MUON is not None and trainer.opt.defaults["ns_bf16"]
    assert trainer.opt.defaults["ns_bf16"] == machine.bf16_native()
    assert trainer.opt.implementation == ("torch" if torch_muon else "tinyscope")
    resumed = run_experiment("theia-kleene", "smoke", seed=2, overrides=overrides, out=out, resume=True,
                             progress=False, report="none")
    assert resumed["metrics"] == full["metrics"]
    lines = lambda d: [ln for ln in (d / "metrics.jsonl").read_text().splitlines() if '"train"' in ln]  # noqa: E731
    strip = lambda ln: {k: v for k, v in json.loads(ln).items() if k != "time"}  # noqa: E731
    assert [strip(x) for x in lines(out)] == [strip(x) for x in lines(tmp_path / "full")]


def _decay_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(5, 8), nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 3))


@pytest.mark.parametrize("decay", ["all", "matrices"])
def test_train_decay_chooses_which_parameters_adamw_decays(decay):
    """With a zero gradient an AdamW step only decays: p <- p (1 - lr wd). ``matrices`` decays
    the ndim >= 2 parameters (embedding, linear weights) and leaves biases and norm gains."""
    from types import SimpleNamespace

    from tinyscope.train.trainer import Trainer

    net = _decay_net()
    before = copy.deepcopy(net.state_dict())
    opt = Trainer._optimizer(SimpleNamespace(cfg=TrainConfig(lr=0.1, weight_decay=0.5, decay_params=decay)), net)
    for p in net.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for name, p in net.named_parameters():
        decayed = decay == "all" or p.ndim >= 2
        expected = before[name] * (1 - 0.1 * 0.5) if decayed else before[name]
        assert torch.allclose(p.detach(), expected), name
    assert decay == "all" or any(p.ndim < 2 for p in net.parameters())


def test_train_decay_refuses_what_it_cannot_do():
    with pytest.raises(ConfigError, match="train.decay_params='some' is not allowed"):
        TrainConfig(decay_params="some")
    with pytest.raises(ConfigError, match="train.decay_params='matrices' applies to train.optimizer=adamw only"):
        TrainConfig(decay_params="matrices", optimizer="muon")


def test_train_decay_leaves_a_model_its_own_groups():
    from types import SimpleNamespace

    from tinyscope.train.trainer import Trainer

    net = _decay_net()
    net.optimizer_groups = lambda lr, wd: [dict(params=list(net.parameters()), weight_decay=wd)]
    with pytest.raises(ConfigError, match="chooses its own weight-decay groups"):
        Trainer._optimizer(SimpleNamespace(cfg=TrainConfig(decay_params="matrices")), net)
    assert Trainer._optimizer(SimpleNamespace(cfg=TrainConfig()), net).param_groups[0]["weight_decay"] == 0.01
