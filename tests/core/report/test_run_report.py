"""RUN/report.html is self-contained: every image embedded, nothing fetched from outside."""
import base64
import re

import pytest

from tinyscope.interp.plotting import new_figure
from tinyscope.report.run_report import write_run_report
from tinyscope.runs.experiment import ReportSection, View
from tinyscope.runs.rundir import load_run, run_experiment
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
    assert [alt for alt, _ in images] == ["learning_curve"]  # the smoke preset's quick page
    assert base64.b64decode(images[0][1].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "rule_error" in page and "&quot;block_size&quot;: 8" in page  # metrics and config
    assert "Mahajne" in page  # the experiment's citation


def test_full_report_has_the_sections_the_experiment_declares_in_order(run_dir, monkeypatch):
    def extra_section(self, run, full=True):
        fig = new_figure(3, 2)
        fig.subplots().plot([0, 1], [1, 0])
        return [ReportSection("Walkthrough", self.views(run)),
                ReportSection("Extra", [View("experiment_extra", "Extra", "a declared figure", lambda: fig)])]

    monkeypatch.setattr(PlusLastEvenExperiment, "report_sections", extra_section)
    from tinyscope.studies.minimal import views

    only_some = ["03_learning_curve", "05_embeddings", "12_walk_queries_keys"]
    monkeypatch.setattr(views, "VIEWS", [v for v in views.VIEWS if v.name in only_some])
    page = write_run_report(load_run(run_dir), full=True, dpi=30).read_text()
    alts = [alt for alt, _ in IMG.findall(page)]
    assert alts == ["learning_curve"] + only_some + ["experiment_extra"]
    assert page.index("<h2 id=\"s1\">Walkthrough") < page.index("Extra</h2>")
    for _, src in IMG.findall(page):
        assert src.startswith("data:image/png;base64,")
    assert _external_refs(page) == []


def test_a_failing_figure_or_section_is_reported_not_fatal(run_dir, monkeypatch):
    def failing_view(self, run, full=True):
        def boom():
            raise RuntimeError("boom")

        return [ReportSection("Broken", [View("broken", "Broken", "", boom)])]

    monkeypatch.setattr(PlusLastEvenExperiment, "report_sections", failing_view)
    page = write_run_report(load_run(run_dir), full=False).read_text()
    assert "could not draw: RuntimeError: boom" in page
    assert [alt for alt, _ in IMG.findall(page)] == ["learning_curve"]

    def failing_sections(self, run, full=True):
        raise RuntimeError("no sections")

    monkeypatch.setattr(PlusLastEvenExperiment, "report_sections", failing_sections)
    page = write_run_report(load_run(run_dir), full=True).read_text()
    assert "could not draw: RuntimeError: no sections" in page
