import json

import numpy as np
import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.runs.registry import get
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.log_icot.experiment import answer_accuracy, teacher_forced
from tinyscope.studies.log_icot.model import ConstrainedParityConfig, ConstrainedParityTransformer, set_tree_attention
from tinyscope.studies.log_icot.task import Parity, ParityConfig, encode, encode_ahead, removal_schedule


@pytest.mark.parametrize("kind,stages", [("direct", 1), ("cot", 1), ("icot", 7), ("logicot", 3)])
def test_experiments_and_presets(kind, stages):
    exp = get(f"parity-{kind}")
    assert set(exp.presets) == {"smoke", "cpu", "paper"}
    paper, cpu = exp.config("paper"), exp.config("cpu")
    assert (paper.task.n, paper.task.k, paper.model.n_layers) == (30, 16, 4)
    assert (cpu.task.n, cpu.task.k, cpu.model.n_layers) == (20, 8, 3)
    assert cpu.kind == kind and len(exp.build_task(cpu).curriculum.stages) == stages


def test_config_errors_name_the_field():
    exp = get("parity-logicot")
    with pytest.raises(ConfigError, match="kind"):
        exp.config("smoke", overrides=["kind=tree"])
    with pytest.raises(ConfigError, match="n_ctx"):
        exp.config("smoke", overrides=["task.n=20"])


def test_rollout_and_teacher_forcing_of_an_exact_model():
    task = Parity(ParityConfig(n=14, k=8, subset_seed=6))
    model = ConstrainedParityTransformer(ConstrainedParityConfig(), 14, 8)
    set_tree_attention(model, task.subset)
    bits, nodes = task.draw(np.random.default_rng(0), 300)
    for removed in removal_schedule(8, "icot"):
        assert answer_accuracy(model, task, bits, nodes, removed, chunk=128) == 1.0
        acc, loss = teacher_forced(model, encode(bits, nodes, task.layout(removed)), chunk=128)
        assert acc == 1.0 and loss < 0.2
    with torch.no_grad():  # a model that answers the negation is always wrong
        model.beta.neg_()
    assert answer_accuracy(model, task, bits, nodes, ()) == 0.0


def test_smoke_run_counts_samples_per_stage_and_resumes(tmp_path):
    out = tmp_path / "icot"
    sets = ["train.steps=60", "curriculum.stage_steps=20", "train.eval_every=10", "train.checkpoint_every=10"]
    full = run_experiment("parity-icot", "smoke", overrides=sets, out=out, progress=False, report="none")
    m = full["metrics"]
    assert m["n_stages"] == 3 and m["samples"] == 60 * 64
    assert sum(m[f"samples_stage_{s}"] for s in range(int(m["stages_reached"]))) == m["samples"]
    evals = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines() if '"eval"' in ln]
    assert [e["stage"] for e in evals if e["step"] in (10, 30, 50)] == [0.0, 1.0, 2.0]

    part = tmp_path / "part"
    run_experiment("parity-icot", "smoke", overrides=["train.steps=30"] + sets[1:], out=part, progress=False,
                   report="none")
    cfg = json.loads((part / "config.json").read_text())
    cfg["config"]["train"]["steps"] = 60  # continue the same run to the full budget
    (part / "config.json").write_text(json.dumps(cfg))
    (part / "results.json").unlink()
    resumed = run_experiment("parity-icot", "smoke", overrides=sets, out=part, resume=True, progress=False,
                             report="none")
    for key in ("samples", "samples_stage_0", "samples_stage_1", "samples_stage_2", "test_acc"):
        assert resumed["metrics"][key] == m[key]


def test_a_stalled_stage_0_restarts_from_fresh_weights_and_counts_its_samples(tmp_path):
    """curriculum.restart_steps through a whole run: a stage 0 that cannot meet its threshold
    starts again from fresh weights every 20 steps, at most twice, then its budget ends it; the
    abandoned starts' samples stay in stage 0's count; the same seed gives the same bytes."""
    sets = ["train.steps=100", "curriculum.stage_steps=50", "curriculum.restart_steps=20", "curriculum.max_restarts=2",
            "curriculum.advance_threshold=1.5", "train.eval_every=10", "train.checkpoint_every=10"]
    a = run_experiment("parity-logicot", "smoke", overrides=sets, out=tmp_path / "a", progress=False, report="none")
    m = a["metrics"]
    assert m["restarts"] == 2.0 and m["samples_stage_0"] == (20 + 20 + 50) * 64 and m["stages_reached"] == 2
    evals = [json.loads(ln) for ln in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines() if '"eval"' in ln]
    assert [e["restarts"] for e in evals if e["step"] in (10, 20, 30, 40, 50)] == [0.0, 0.0, 1.0, 1.0, 2.0]
    b = run_experiment("parity-logicot", "smoke", overrides=sets, out=tmp_path / "b", progress=False, report="none")
    assert b["metrics"] == m
    assert (tmp_path / "a" / "checkpoints" / "resume.safetensors").read_bytes() == \
        (tmp_path / "b" / "checkpoints" / "resume.safetensors").read_bytes()


def test_grow_depth_runs_each_stage_at_its_depth():
    from tinyscope.models.transformer import Transformer
    from tinyscope.studies.log_icot.experiment import parity_model, skip_layers_hooks, stage_depth
    from tinyscope.train.trainer import masked_next_token_loss

    assert [stage_depth(8, r) for r in removal_schedule(8, "logicot")] == [1, 2, 3]
    assert [stage_depth(8, r) for r in removal_schedule(8, "icot")] == [1, 2, 2, 2, 2, 3, 3]
    assert stage_depth(16, removal_schedule(16, "direct")[0]) == 4
    torch.manual_seed(0)
    model = Transformer(parity_model(8, 8, d_model=16, n_heads=2, d_mlp=32))  # 3 layers
    task = Parity(ParityConfig(n=8, k=8))
    batch = task.sample(np.random.default_rng(0), 16).to_torch()
    with model.hooks(skip_layers_hooks(3, 1)):
        one_layer = model(batch["tokens"])
        masked_next_token_loss(model, batch).backward()
    direct = model.W_U(model.ln_final(model.blocks[0](model.embed(batch["tokens"]))))
    assert torch.allclose(one_layer, direct)
    assert model.blocks[0].attn.W_Q.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.blocks[1:].parameters())
    assert not torch.allclose(model(batch["tokens"]), one_layer)  # hooks are gone afterwards


def test_at_depth_computes_the_skip_hooks_function_without_the_skipped_blocks():
    from tinyscope.models.transformer import Transformer
    from tinyscope.studies.log_icot.experiment import AtDepth, parity_model, skip_layers_hooks

    torch.manual_seed(0)
    model = Transformer(parity_model(8, 8, d_model=16, n_heads=2, d_mlp=32))  # 3 layers
    tokens = torch.from_numpy(Parity(ParityConfig(n=8, k=8)).sample(np.random.default_rng(0), 8).tokens)
    calls = []
    model.blocks[2].register_forward_hook(lambda *a: calls.append(2))
    for depth in (1, 2):
        with model.hooks(skip_layers_hooks(3, depth)):
            hooked = model(tokens)
        calls.clear()
        assert torch.equal(AtDepth(model, depth)(tokens), hooked)
        assert calls == []  # block 3 never ran
    exp = get("parity-logicot")
    cfg = exp.config("smoke", overrides=["task.n=8", "task.k=8", "model.n_ctx=15", "model.n_heads=[2,2,2]",
                                         "model.d_mlp=[16,16,16]"])
    assert exp.stage_model(cfg, model, removal_schedule(8, "direct")[0]) is model  # full depth: the model itself
    assert exp.stage_model(cfg, model, ()).depth == 1


def test_freeze_absorbed_trains_only_the_deepest_active_layer():
    exp = get("parity-logicot")
    cfg = exp.config("smoke", overrides=["task.n=8", "task.k=8", "model.n_ctx=15", "model.n_heads=[2,2,2]",
                                         "model.d_mlp=[16,16,16]"])
    task = exp.build_task(cfg)
    model = exp.build_model(cfg, task)
    objective = exp.objective(cfg, task)
    for stage, trained in [(0, {0}), (1, {1}), (2, {2})]:
        task.curriculum.stage = stage
        model.zero_grad(set_to_none=True)
        objective(model, task.sample(np.random.default_rng(stage), 8).to_torch()).backward()
        got = {i for i, block in enumerate(model.blocks) if any(p.grad is not None for p in block.parameters())}
        assert got == trained
        assert (model.W_E.weight.grad is not None) == (stage == 0)
        assert model.W_U.weight.grad is not None


def test_blank_ahead_draws_the_next_stages_layout_in_every_stage_but_the_last():
    """task.blank_ahead: the curriculum task writes look-ahead rows (the next stage's BLANKs) in
    stages 0 and 1 of k = 8, none in the last stage, where no stage follows."""
    exp = get("parity-logicot")
    cfg = exp.config("smoke", overrides=["task.n=8", "task.k=8", "model.n_ctx=15", "model.n_heads=[2,2,2]",
                                         "model.d_mlp=[16,16,16]", "task.blank_ahead=0.5"])
    task = exp.build_task(cfg)
    schedule = removal_schedule(8, "logicot")
    for stage in range(3):
        task.curriculum.stage = stage
        batch = task.sample(np.random.default_rng(stage), 64)
        own = encode(batch.meta["bits"], batch.meta["nodes"], task.layout(schedule[stage]))
        differs = (batch.tokens != own.tokens).any(1)  # (B,) rows in the next stage's layout
        assert (0 < differs.sum() < 64) if stage < 2 else not differs.any()


def test_lookahead_steps_draw_only_the_next_stages_layout_then_advance():
    """curriculum.lookahead_steps = 2: after stage 0 meets its threshold, both of its look-ahead
    batches are look-ahead rows (the next stage's tokens, task.encode_ahead's loss), then stage 1."""
    exp = get("parity-logicot")
    cfg = exp.config("smoke", overrides=["task.n=8", "task.k=8", "model.n_ctx=15", "model.n_heads=[2,2,2]",
                                         "model.d_mlp=[16,16,16]", "curriculum.lookahead_steps=2"])
    task = exp.build_task(cfg)
    schedule = removal_schedule(8, "logicot")
    task.sample(np.random.default_rng(0), 4)
    task.curriculum.update({"acc": 1.0})
    for i in range(2):
        assert task.curriculum.stage == 0
        b = task.sample(np.random.default_rng(i), 32)
        look = encode_ahead(b.meta["bits"], b.meta["nodes"], task.layout(schedule[0]), task.layout(schedule[1]))
        assert np.array_equal(b.tokens, look.tokens) and np.array_equal(b.loss_mask, look.loss_mask)
    assert task.curriculum.stage == 1 and task.curriculum.summary()[0]["samples"] == 4 + 64


def test_finetune_stage_trains_every_layer_after_the_curriculum_at_a_decaying_rate(tmp_path):
    """finetune_steps: stage ``finetune`` starts from the main phase's selected model, trains the
    layers the last curriculum stage froze, at finetune_lr_scale of the rate with a cosine to 0,
    without moving the curriculum; the final evaluation measures its selected model."""
    from safetensors.torch import load_file

    exp = get("parity-logicot")
    sets = ["task.n=8", "task.k=8", "model.n_ctx=15", "model.n_heads=[2,2,2]", "model.d_mlp=[16,16,16]",
            "train.steps=60", "curriculum.stage_steps=20", "train.eval_every=10", "train.checkpoint_every=10",
            "train.log_every=5"]
    cfg = exp.config("smoke", overrides=sets + ["finetune_steps=20", "finetune_lr_scale=0.5"])
    task = exp.build_task(cfg)
    (stage,) = exp.stages(cfg, task)
    assert (stage.name, stage.train.steps, stage.train.schedule) == ("finetune", 20, "cosine")
    assert stage.train.lr == cfg.train.lr * 0.5 and stage.train.muon_lr == cfg.train.muon_lr * 0.5
    assert exp.stages(exp.config("smoke", overrides=sets), task) == []

    task.curriculum.stage = len(task.curriculum.stages) - 1
    model = exp.build_model(cfg, task)
    model.zero_grad(set_to_none=True)
    stage.objective(model, task.sample(np.random.default_rng(0), 8).to_torch()).backward()
    assert all(any(p.grad is not None for p in b.parameters()) for b in model.blocks)  # nothing frozen
    assert set(stage.evaluate(model)) == {"acc", "token_acc", "val_loss", "single_pass_acc"}

    out = tmp_path / "ft"
    res = run_experiment("parity-logicot", "smoke", overrides=sets + ["finetune_steps=20"], out=out,
                         progress=False, report="none")
    main = load_file(out / "checkpoints" / "best.safetensors")
    tuned = load_file(out / "stages" / "finetune" / "checkpoints" / "best.safetensors")
    assert not torch.equal(main["blocks.0.attn.W_Q.weight"], tuned["blocks.0.attn.W_Q.weight"])  # layer 0 moved
    lrs = [json.loads(ln)["lr"] for ln in (out / "stages" / "finetune" / "metrics.jsonl").read_text().splitlines()
           if '"train"' in ln]
    assert lrs == sorted(lrs, reverse=True) and lrs[-1] < 0.05 * lrs[0]
    assert "test_single_pass_acc" in res["metrics"]
    assert res["metrics"]["samples"] == 60 * 64  # the curriculum's samples only, not the fine-tune's
    with pytest.raises(ConfigError, match="finetune_steps"):
        exp.config("smoke", overrides=["finetune_steps=-1"])
