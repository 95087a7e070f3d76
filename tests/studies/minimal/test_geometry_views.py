"""Wide models are drawn through a labelled PCA plane; viz saves the named figures (every view's
print checks: test_views_print.py)."""
import io

import numpy as np
import pytest
from PIL import Image

from tinyscope.cli import main
from tinyscope.interp.plotting import figure_png
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.minimal.views import ViewContext, render_views

QUICK = ["train.steps=200", "train.eval_every=100", "task.n_sequences=100", "task.n_eval_sequences=20",
         "eval.n_generated=4", "eval.n_val_windows=64"]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("viz") / "run"
    run_experiment("plus-last-even", "smoke", overrides=QUICK, out=out, progress=False)
    return out


def _is_real_image(png: bytes) -> bool:
    img = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return img.shape[0] > 100 and img.shape[1] > 100 and img.std() > 5  # not blank


def test_wide_model_views_say_they_are_projections(tmp_path):
    out = tmp_path / "wide"
    run_experiment("plus-last-even", "smoke", overrides=QUICK + ["train.steps=20", "model.d_model=4",
                                                                   "model.d_head=2", "model.n_heads=[2]"],
                   out=out, progress=False)
    ctx = ViewContext(load_run(out), grid=30)
    figs = dict(render_views(ctx, only=["06_qkv_projections", "10_output_entropy_argmax"]))
    assert len(figs) == 2
    for fig in figs.values():
        texts = [t.get_text() for ax in fig.axes for t in (ax.title, ax.xaxis.label)] + [fig._suptitle.get_text()]
        assert any("PCA" in t or "PC 1" in t for t in texts)
        assert _is_real_image(figure_png(fig, dpi=40))


def test_viz_cli_saves_named_figures_and_rejects_unknown_views(smoke_run, capsys):
    assert main(["viz", str(smoke_run), "--only", "learning_curve", "12_walk_queries_keys", "--dpi", "30",
                 "--sequence", "2 3 + 5 +"]) == 0
    saved = sorted(p.name for p in (smoke_run / "figures").iterdir())
    assert saved == ["03_learning_curve.png", "12_walk_queries_keys.png"]
    assert main(["viz", str(smoke_run), "--only", "no_such_view"]) == 2
    assert "no view named 'no_such_view'" in capsys.readouterr().err
    assert main(["viz", str(smoke_run), "--only", "walk_values", "--sequence", "4 x"]) == 2
