"""RUN/report.html: one self-contained page per run.

The page holds the run's identity and results, its full config, the learning curve, the sections
the run's experiment declares (``Experiment.report_sections``: its views, and image files such as
training movies), and the figures of `tinyscope analyze`. Images are embedded as ``data:`` URIs
and the page has no scripts and no external references, so it opens anywhere, offline, exactly
as written.
"""
from __future__ import annotations

import base64
import html
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from tinyscope.runs.experiment import View
from tinyscope.train.checkpoint import atomic_write_bytes

if TYPE_CHECKING:
    from tinyscope.runs.rundir import Run

log = logging.getLogger(__name__)
MAX_EMBED_BYTES = 8_000_000  # larger images (long movies) are linked by path, not embedded

STYLE = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;
line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .7em;text-align:left}
th{background:#f5f5f5}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:.85em}
figure{margin:1.5em 0}figure img,figure video{max-width:100%;border:1px solid #eee}
figcaption{font-size:.92em;color:#444;margin-top:.3em}.muted{color:#777}.err{color:#b00}
nav a{margin-right:.8em}
"""


@dataclass
class ReportFigure:
    """One image of the report: ``data`` is PNG or GIF bytes; ``error`` replaces it when drawing failed."""

    name: str
    label: str
    caption: str
    data: bytes | None = None
    mime: str = "image/png"
    error: str | None = None


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _table(rows: list[tuple[str, object]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _figure_html(fig: ReportFigure) -> str:
    anchor = html.escape(fig.name)
    head = f"<strong>{html.escape(fig.label)}</strong> ({anchor}). {html.escape(fig.caption)}"
    if fig.error is not None:
        return f'<figure id="{anchor}"><p class="err">could not draw: {html.escape(fig.error)}</p>' \
               f"<figcaption>{head}</figcaption></figure>"
    if fig.mime.startswith("video/"):
        return (f'<figure id="{anchor}"><video controls autoplay loop muted playsinline preload="auto" '
                f'src="{data_uri(fig.data, fig.mime)}"></video><figcaption>{head}</figcaption></figure>')
    return (f'<figure id="{anchor}"><img alt="{anchor}" src="{data_uri(fig.data, fig.mime)}">'
            f"<figcaption>{head}</figcaption></figure>")


def render_html(title: str, summary: list[tuple[str, object]], metrics: dict, config: dict,
                sections: list[tuple[str, list[ReportFigure]]], note: str = "") -> str:
    """The report page as a string; ``sections`` are (heading, figures) in display order."""
    nav = " ".join(f'<a href="#s{i}">{html.escape(h)}</a>' for i, (h, figs) in enumerate(sections) if figs)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             f"<p class='muted'>{html.escape(note)}</p>" if note else "", f"<nav>{nav}</nav>",
             "<h2>Run</h2>", _table(summary)]
    if metrics:
        parts += ["<h2>Results (selected checkpoint)</h2>", _table(sorted(metrics.items()))]
    parts += ["<h2>Config</h2>", f"<details><summary>config.json (click to open)</summary><pre>"
              f"{html.escape(json.dumps(config, indent=2))}</pre></details>"]
    for i, (heading, figs) in enumerate(sections):
        if figs:
            parts.append(f'<h2 id="s{i}">{html.escape(heading)}</h2>')
            parts += [_figure_html(f) for f in figs]
    parts.append("</body></html>")
    return "\n".join(parts)


def _render(name: str, label: str, caption: str, draw, dpi: int) -> ReportFigure:
    """Draw one figure into PNG bytes; a failure becomes a visible note, not a lost report."""
    from tinyscope.interp.plotting import figure_png

    try:
        fig = draw()
        return ReportFigure(name, label, caption, figure_png(fig, dpi=dpi))
    except Exception as exc:  # a broken view must not cost the user the rest of the report
        log.warning("report: %s could not be drawn: %s", name, exc)
        return ReportFigure(name, label, caption, error=f"{type(exc).__name__}: {exc}")


def view_figures(views: Sequence[View], dpi: int = 90, drawn: Mapping[str, ReportFigure] | None = None
                 ) -> list[ReportFigure]:
    """The views as PNGs, in their order; ``drawn`` holds figures already rendered (by `viz`)."""
    drawn = drawn or {}
    return [drawn[v.name] if v.name in drawn else _render(v.name, v.label, v.caption, v.draw, dpi) for v in views]


def image_figures(images: Sequence[tuple[str, str, Path]], max_bytes: int = MAX_EMBED_BYTES) -> list[ReportFigure]:
    """Image files the run directory holds (PNG, GIF, or MP4 shown as a looping video), embedded up
    to ``max_bytes`` each."""
    out = []
    for name, caption, path in images:
        path = Path(path)
        if not path.is_file():
            continue
        size = path.stat().st_size
        mime = {".gif": "image/gif", ".mp4": "video/mp4"}.get(path.suffix.lower(), "image/png")
        if size > max_bytes:
            out.append(ReportFigure(name, name, caption, error=f"{path} is {size / 1e6:.1f} MB, too large to embed; "
                                                               "open the file itself"))
        else:
            out.append(ReportFigure(name, name, caption, path.read_bytes(), mime))
    return out


def analysis_images(run_dir: Path) -> list[tuple[str, str, Path]]:
    """The figures `tinyscope analyze` wrote into RUN/analysis, with the captions its study gave."""
    folder = run_dir / "analysis"
    if not folder.is_dir():
        return []
    record = json.loads((folder / "analysis.json").read_text()) if (folder / "analysis.json").exists() else {}
    captions = record.get("captions", {})
    out = []
    for png in sorted(folder.glob("*.png")):
        caption = captions.get(png.stem, "")
        if png.stem in record:
            caption += f"; numbers: {json.dumps(record[png.stem])[:600]}"
        out.append((png.stem, caption, png))
    return out


def write_run_report(run: "Run", full: bool = True, dpi: int = 90,
                     drawn: Mapping[str, ReportFigure] | None = None) -> Path:
    """Write RUN/report.html for a loaded run and return its path.

    The page holds the run's identity, results and config, its learning curve, the sections its
    experiment declares (``Experiment.report_sections(run, full)``) and the figures of
    `tinyscope analyze` when RUN/analysis holds them. full=False is the quick page of a smoke run;
    drawn: views already rendered (``tinyscope viz``), used instead of drawing them again.
    """
    from tinyscope.models.utils import count_parameters
    from tinyscope.report.learning_curve import learning_curve_figure

    run_dir = Path(run.path)
    t0 = time.perf_counter()
    was_training = run.model.training
    run.model.eval()
    results = run.results
    record = json.loads((run_dir / "config.json").read_text())
    exp = run.experiment
    summary = [("experiment", exp.name), ("paper", str(exp.citation) if exp.citation else "-"),
               ("preset", run.preset), ("seed", run.cfg.seed),
               ("steps", results.get("steps", "-")), ("selected step", results.get("selected_step", run.step)),
               ("stopped", results.get("stopped", "-")), ("wall time (s)", results.get("wall_time", "-")),
               ("parameters", results.get("n_parameters", count_parameters(run.model))),
               ("evaluation fingerprint", results.get("eval_fingerprint", "-")),
               ("figures drawn from step", run.step), ("versions", f"tinyscope {record.get('tinyscope_version')}, "
                                                                   f"torch {record.get('torch_version')}")]
    sections: list[tuple[str, list[ReportFigure]]] = []
    metrics = run.metrics()
    if metrics:
        sections.append(("Learning curve", [_render("learning_curve", "Learning curve", "Losses (left axis) and "
                                                    "error or accuracy metrics (right axis) against the step.",
                                                    lambda: learning_curve_figure(metrics), dpi)]))
    try:
        declared = exp.report_sections(run, full)
    except Exception as exc:  # a broken section must not cost the user the rest of the report
        log.warning("report: %s.report_sections failed: %s", exp.name, exc)
        sections.append((f"{exp.name} figures", [ReportFigure("sections", "Sections", "",
                                                              error=f"{type(exc).__name__}: {exc}")]))
        declared = []
    for section in declared:
        sections.append((section.heading, view_figures(section.views, dpi, drawn) + image_figures(section.images)))
    sections.append(("Analysis (tinyscope analyze)", image_figures(analysis_images(run_dir))))
    note = "" if full else "Quick report: `tinyscope viz RUN` draws every view into this page."
    page = render_html(f"{exp.name} · {run_dir.name}", summary, results.get("metrics", {}),
                       record.get("config", {}), sections, note)
    run.model.train(was_training)
    path = run_dir / "report.html"
    atomic_write_bytes(path, page.encode("utf-8"))
    path.chmod(0o644)
    log.info("wrote %s in %.1f s", path, time.perf_counter() - t0)
    return path
