"""RUN/report.html is self-contained: every image embedded, nothing fetched from outside."""
import base64
import re

import pytest

from tinyscope.interp.plotting import new_figure
from tinyscope.report.run_report import write_run_report
from tinyscope.runs.rundir import run_experiment
from tinyscope.studies.minimal.experiment import PlusLastEvenExperiment

QUICK = ["train.steps=100", "train.eval_every=50", "task.n_sequences=100", "task.n_eval_sequences=20",
         "eval.n_generated=4", "eval.n_val_windows=64"]
IMG = re.compile(r'<img alt="([^"]+)" src="([^"]+)"')


def _external_refs(page: str) -> list[str]:
    return re.findall(r"https?://|<script|<link|url\(", page, flags=re.IGNORECASE)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    run_experiment("plus-last-even", "smoke", overrides=QUICK, out=out, progress=False)
    return out


def test_run_writes_a_self_contained_report(run_dir):
    page = (run_dir / "report.html").read_text()
    assert _external_refs(page) == []
    images = IMG.findall(page)
    assert [alt for alt, _ in images] == ["03_learning_curve"]  # the smoke preset's quick page
    assert base64.b64decode(images[0][1].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "rule_error" in page and "&quot;block_size&quot;: 8" in page  # metrics and config


def test_full_report_has_every_view_in_paper_order_and_the_experiment_figures(run_dir, monkeypatch):
    def figures(self, run):
        fig = new_figure(3, 2)
        fig.subplots().plot([0, 1], [1, 0])
        return {"experiment_extra": fig}

    monkeypatch.setattr(PlusLastEvenExperiment, "figures", figures)
    from tinyscope.studies.minimal import views

    only_some = ["03_learning_curve", "05_embeddings", "12_walk_queries_keys"]
    monkeypatch.setattr(views, "VIEWS", [v for v in views.VIEWS if v.name in only_some])
    page = write_run_report(run_dir, full=True, dpi=30).read_text()
    alts = [alt for alt, _ in IMG.findall(page)]
    assert alts == only_some + ["experiment_extra"]
    for _, src in IMG.findall(page):
        assert src.startswith("data:image/png;base64,")
    assert _external_refs(page) == []


def test_a_failing_figure_is_reported_not_fatal(run_dir, monkeypatch):
    def figures(self, run):
        raise RuntimeError("boom")

    monkeypatch.setattr(PlusLastEvenExperiment, "figures", figures)
    page = write_run_report(run_dir, full=False).read_text()
    assert "could not draw: RuntimeError: boom" in page
    assert [alt for alt, _ in IMG.findall(page)] == ["03_learning_curve"]
