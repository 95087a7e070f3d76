"""ncffn-gpt2: the paper preset is GPT-2 small (124,439,808 parameters with GELU, tied embeddings,
NC-FFN and the quantifiers parameter-neutral), and a smoke run on a corpus file the test writes
trains, keeps its tokenizer, scores BLiMP and LAMBADA, loads and re-evaluates; bad files stop it
before training."""
from __future__ import annotations

import json

import pytest
import torch

from tinyscope.errors import ConfigError
from tinyscope.models.utils import count_parameters
from tinyscope.runs import registry
from tinyscope.runs.rundir import evaluate_run, load_run, run_experiment
from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.corpus import builtin_text
from tinyscope.studies.ncffn.paper_lm import GPT2_SMALL_PARAMS, build_transformer

EXP = registry.get("ncffn-gpt2")
QUANT_ALL = "quant.layers=" + ",".join(map(str, range(12)))


def _paper_params(*overrides: str) -> int:
    cfg = EXP.config("paper", 0, list(overrides))
    with torch.device("meta"):
        return count_parameters(build_transformer(cfg, cfg.model.vocab_size))


def test_paper_preset_is_gpt2_small():
    cfg = EXP.config("paper")
    assert (cfg.model.n_layers, cfg.model.d_model, cfg.model.n_ctx, cfg.model.vocab_size) == (12, 768, 1024, 50257)
    assert _paper_params() == GPT2_SMALL_PARAMS == 124_439_808
    assert _paper_params("model.ffn=nc") == GPT2_SMALL_PARAMS
    assert abs(_paper_params("model.ffn=nc", QUANT_ALL) / GPT2_SMALL_PARAMS - 1) < 1e-3
    assert _paper_params("tie_embeddings=false") == GPT2_SMALL_PARAMS + 50257 * 768


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "corpus.txt").write_text(builtin_text(1500, seed=7))
    (tmp_path / "blimp").mkdir()
    with open(tmp_path / "blimp" / "npi.jsonl", "w") as f:
        for good, bad in [("neither the bird nor the fox sang .", "neither the bird or the fox sang ."),
                          ("the fox is taller than the bird .", "the fox is taller and the bird .")]:
            f.write(json.dumps({"sentence_good": good, "sentence_bad": bad, "UID": "npi_1",
                                "linguistics_term": "npi_licensing"}) + "\n")
    (tmp_path / "lambada.txt").write_text("the fox was seen by the bird\nneither the bird nor the fox\n")
    return [f"data.paths={tmp_path / 'corpus.txt'}", f"data.cache_dir={tmp_path / 'cache'}",
            f"eval.blimp={tmp_path / 'blimp'}", f"eval.lambada={tmp_path / 'lambada.txt'}"]


def test_smoke_run_keeps_its_tokenizer_and_scores_blimp_and_lambada(files, tmp_path):
    out = tmp_path / "run"
    res = run_experiment("ncffn-gpt2", "smoke", 0, files + ["model.ffn=nc", "quant.layers=0"], out=out,
                         progress=False, report="none")
    m = res["metrics"]
    assert m["blimp_pairs"] == 2 and m["lambada_passages"] == 2 and 0 <= m["blimp_licensing_acc"] <= 1
    assert m["val_ppl"] == pytest.approx(torch.tensor(m["val_loss"]).exp().item(), rel=1e-5)
    assert "half_life_median" in m and m["params_quantifiers"] > 0
    run = load_run(out)
    assert run.model.W_U.weight is run.model.W_E.weight  # tied after loading too
    saved = bpe.load_tokenizer(out / "tokenizer.json")
    assert saved.to_str() == run.task.tokenizer.to_str()
    assert evaluate_run(out)["metrics"] == pytest.approx(m)
    fresh = evaluate_run(out, seed=3, n=4)
    assert fresh["eval_fingerprint"] != res["eval_fingerprint"]


def test_bad_files_stop_the_run_before_training(files, tmp_path):
    (tmp_path / "blimp" / "npi.jsonl").write_text('{"sentence_good": "a b ."}\n')
    with pytest.raises(ConfigError, match=r"npi.jsonl:1: 'sentence_bad' is missing"):
        run_experiment("ncffn-gpt2", "smoke", 0, files, out=tmp_path / "run", progress=False, report="none")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="corpus file .* does not exist"):
        run_experiment("ncffn-gpt2", "smoke", 0, ["data.paths=/no/such/corpus.txt"], out=tmp_path / "run2",
                       progress=False, report="none")


def test_gpu_claims_name_the_torchrun_command_of_each_run():
    """Each paper-scale claim's note holds one torchrun command per run it compares, writing where
    `tinyscope reproduce ncffn --include-gpu` looks for that run."""
    from tinyscope.runs.reproduce import _spec
    from tinyscope.studies.ncffn.claims import CLAIMS

    gpu = [c for c in CLAIMS if c.needs_gpu]
    assert len(gpu) == 10 and all(c.experiment == "ncffn-gpt2" for c in gpu)
    for c in gpu:
        commands = c.note.split("commands: ")[1].split(" && ")
        assert len(commands) == len(c.runs), c.id
        for rs, command in zip(c.runs, commands):
            assert command.startswith("torchrun --standalone --nproc_per_node 8 -m tinyscope.cli run ncffn-gpt2 "
                                      "--preset paper --seed 0")
            assert all(f"--set {o}" in command for o in rs.overrides)
            assert command.endswith(f"--out reproduce/ncffn/{_spec(rs, 0).rel_path}"), (c.id, command)
