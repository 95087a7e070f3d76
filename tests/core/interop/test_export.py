"""`tinyscope export RUN --to transformer-lens OUT`: the folder it writes (classic state dict as
safetensors + HookedTransformerConfig JSON), loading it into TransformerLens and back, and the
one-line refusals."""
import json

import pytest
import torch
from safetensors.torch import load_file

from tinyscope.cli import main
from tinyscope.interop import from_transformer_lens, read_export, save_transformer_lens, to_tl_state_dict
from tinyscope.runs.rundir import load_run, run_experiment


@pytest.fixture(scope="module")
def dedicated(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "dedicated"
    run_experiment("sih-eca-dedicated-det", "smoke", out=out, progress=False, report="none")
    return out


def test_export_of_a_zoo_run_writes_the_classic_layout(tmp_path, capsys):
    out = tmp_path / "ple"
    assert main(["export", "zoo:plus-last-even-cpu", "--to", "transformer-lens", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "load_transformer_lens" in printed and "from_transformer_lens" in printed
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tinyscope.json"]
    run = load_run("zoo:plus-last-even-cpu")
    weights = load_file(str(out / "model.safetensors"))  # plain safetensors: any tool reads it
    expected = to_tl_state_dict(run.model)
    assert weights.keys() == expected.keys() and all(torch.equal(weights[k], v) for k, v in expected.items())
    tl = json.loads((out / "config.json").read_text())
    assert (tl["d_model"], tl["n_heads"], tl["d_head"], tl["normalization_type"]) == (2, 1, 2, None)
    meta = json.loads((out / "tinyscope.json").read_text())
    assert meta["source"]["experiment"] == "plus-last-even" and meta["source"]["step"] == run.step
    back = from_transformer_lens(out)  # the folder itself: no TransformerLens needed
    assert back.cfg == run.model.cfg
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in run.model.state_dict().items())


def test_the_exported_folder_loads_into_transformer_lens_and_back(tmp_path):
    pytest.importorskip("transformer_lens", reason="the interop extra")
    from tinyscope.interop import load_transformer_lens

    run = load_run("zoo:plus-last-even-cpu")
    save_transformer_lens(run.model, tmp_path / "x")
    bridge = load_transformer_lens(tmp_path / "x")
    tokens = torch.randint(0, 12, (4, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = run.model(tokens)  # (4, 8, d_vocab_out)
        # the two compute the same sums in another order: a few float32 ulps of the largest logit
        torch.testing.assert_close(bridge(tokens), ours, atol=1e-6 * ours.abs().max().item(), rtol=0)
    assert from_transformer_lens(bridge).cfg == run.model.cfg


def test_export_check_and_a_step(tmp_path, capsys):
    pytest.importorskip("transformer_lens", reason="the interop extra")
    out = tmp_path / "ple"
    assert main(["export", "zoo:plus-last-even-cpu", "--to", "transformer-lens", str(out), "--check"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("checked:")][0]
    assert float(line.split(", ")[1].split()[0]) < 1e-6  # relative to the largest |logit|
    # exporting again into the same folder replaces the earlier export
    assert main(["export", "zoo:plus-last-even-cpu", "--to", "transformer-lens", str(out), "--checkpoint", "best"]) == 0


def test_the_dedicated_heads_model_is_refused_in_one_line_and_nothing_is_written(dedicated, tmp_path, capsys):
    out = tmp_path / "ded"
    assert main(["export", str(dedicated), "--to", "transformer-lens", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tinyscope: error: TransformerLens cannot represent this model: "
                                               "layer 1: model.n_heads=1 differs from layer 0's 4")
    assert not out.exists()


@pytest.mark.parametrize("args, expected", [
    (["--checkpoint", "soon"], "--checkpoint='soon' must be best, last or a step number"),
    (["--checkpoint", "7"], "step_000007.safetensors does not exist"),
])
def test_bad_checkpoints_are_one_line(tmp_path, capsys, args, expected):
    assert main(["export", "zoo:plus-last-even-cpu", "--to", "transformer-lens", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0]


def test_a_folder_holding_other_files_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["export", "zoo:plus-last-even-cpu", "--to", "transformer-lens", str(tmp_path)]) == 2
    assert "is not empty and holds no earlier export" in capsys.readouterr().err
    with pytest.raises(SystemExit) as code:
        main(["export", "zoo:plus-last-even-cpu", "--to", "onnx", str(tmp_path / "o")])
    assert code.value.code == 2 and "invalid choice: 'onnx'" in capsys.readouterr().err


def test_reading_a_folder_that_is_not_an_export_names_the_missing_file(tmp_path):
    from tinyscope.errors import CheckpointError

    with pytest.raises(CheckpointError, match="config.json is missing"):
        save_transformer_lens(load_run("zoo:plus-last-even-cpu").model, tmp_path / "e")
        (tmp_path / "e" / "config.json").unlink()
        read_export(tmp_path / "e")
