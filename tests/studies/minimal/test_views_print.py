"""Every view passes the print checks (labels, colour keys, fonts, overlaps); Fig. 8 shows only
keys at or before the query; the new views draw; viz saves PDF/SVG beside the PNG and prints the
next-token table."""
import io

import numpy as np
import pytest
import torch
from PIL import Image

from tinyscope.cli import main
from tinyscope.interp.figure_lint import lint
from tinyscope.interp.plotting import figure_png
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.minimal import supplementary_views as xv
from tinyscope.studies.minimal.architecture import architecture_parts
from tinyscope.studies.minimal.geometry import all_points
from tinyscope.studies.minimal.geometry_views import query_token_scores, query_token_scores_figure
from tinyscope.studies.minimal.views import VIEW_NAMES, ViewContext, render_views

QUICK = ["train.steps=100", "train.eval_every=100", "task.n_sequences=100", "task.n_eval_sequences=20",
         "eval.n_generated=4", "eval.n_val_windows=64"]
NEW = ["01_architecture", "08x_qkv_overview", "08y_qkv_extended", "09e_output_probabilities_embeddings",
       "09v_output_probabilities_values", "16_next_token_probabilities", "17_attention_readout", "18_value_arrows"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("print") / "run"
    run_experiment("plus-last-even", "smoke", overrides=QUICK, out=out, progress=False)
    return out


def test_every_view_passes_the_print_checks(run_dir):
    ctx = ViewContext(load_run(run_dir), grid=30)
    names = []
    for view, fig in render_views(ctx):
        names.append(view.name)
        assert lint(fig) == [], view.name
        img = np.asarray(Image.open(io.BytesIO(figure_png(fig, dpi=30))).convert("L"), dtype=float)
        assert img.std() > 5, view.name  # not blank
        assert fig.get_figwidth() <= 7.2, view.name  # prints at its own size in a two-column paper
    assert names == VIEW_NAMES and set(NEW) <= set(names)


def test_fig8_shows_only_keys_at_or_before_the_query(run_dir):
    geom = all_points(load_run(run_dir).model, None)
    plus = geom.V - 1
    S = query_token_scores(geom, plus)  # (T query positions, V, T key positions)
    t_q, t_k = np.meshgrid(np.arange(geom.T), np.arange(geom.T), indexing="ij")
    for b in range(geom.V):
        assert np.isnan(S[:, b][t_k > t_q]).all()
        np.testing.assert_allclose(S[:, b][t_k <= t_q], geom.scores()[plus, :, b][t_k <= t_q])
    fig = query_token_scores_figure(geom, str(plus))
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == geom.V
    for im in images:
        shown = np.ma.getdata(im.get_array()), np.ma.getmaskarray(im.get_array())
        assert (np.isnan(shown[0]) | shown[1])[t_k > t_q].all() and not np.isnan(shown[0][t_k <= t_q]).any()
        finite = S[np.isfinite(S)]
        assert im.get_clim()[1] == pytest.approx(np.abs(finite).max())  # the scale of the shown cells only
    assert any("masked" in t.get_text() for leg in fig.legends for t in leg.get_texts())


def test_architecture_counts_every_parameter(run_dir):
    model = load_run(run_dir).model
    dims, parts = architecture_parts(model)
    assert sum(p.n_params for p in parts) == dims["total"] == sum(p.numel() for p in model.parameters())
    assert (dims["V"], dims["T"], dims["D"], dims["d_head"]) == (model.cfg.vocab_size, model.cfg.n_ctx,
                                                                   model.cfg.d_model, model.blocks[0].attn.d_head)


def test_readout_and_table_match_the_model(run_dir):
    run = load_run(run_dir)
    ctx = ViewContext(run, sequence="4 1 + 4 6 9 5 +")
    rd = xv.readout(run.model, ctx.sequence_ids())
    with torch.no_grad():
        logits = run.model(torch.tensor([ctx.sequence_ids()]))[0].numpy()
    np.testing.assert_allclose(rd.logits, logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rd.pattern.sum(-1), 1, atol=1e-5)
    assert np.allclose(np.triu(rd.pattern, 1), 0)
    table = xv.next_token_table(ctx.trace, ctx.rule)
    lines = table.splitlines()
    assert len(lines) == 1 + 8 and "rule target" in lines[0]
    assert lines[-1].split()[1] == "+" and "p=" in lines[-1]  # "+" after 6: constrained
    status = xv.rule_status(ctx.trace, ctx.rule)
    assert status[2] > 0 and status[7] > 0 and status[[0, 1, 3, 4, 5, 6]].sum() == 0


def test_viz_writes_vector_formats_and_prints_the_table(run_dir, capsys):
    assert main(["viz", str(run_dir), "--only", "architecture", "next_token_probabilities", "--format", "pdf",
                 "svg", "--dpi", "30", "--sequence", "2 3 + 5 +"]) == 0
    out = capsys.readouterr().out
    figs = run_dir / "figures"
    for name in ("01_architecture", "16_next_token_probabilities"):
        assert (figs / f"{name}.pdf").read_bytes().startswith(b"%PDF")
        assert b"<svg" in (figs / f"{name}.svg").read_bytes()[:2000]
        assert (figs / f"{name}.png").exists()
    assert "rule target" in out and "top-3" in out
    with pytest.raises(SystemExit) as exit_:
        main(["viz", str(run_dir), "--only", "architecture", "--format", "eps"])
    assert exit_.value.code == 2
