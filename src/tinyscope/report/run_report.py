"""RUN/report.html: one self-contained page per run.

The page holds the run's identity and results, its full config, the learning curve, every view
of :mod:`tinyscope.studies.minimal.views` that applies to the run in the order of the paper's
walkthrough (Mahajne & Moldwin, Fig. 2-15), the figures the experiment itself declares
(``Experiment.figures(run)``), and the training movies when RUN/movies holds them. Images are
embedded as ``data:`` URIs and the page has no scripts and no external references, so it opens
anywhere, offline, exactly as written.
"""
from __future__ import annotations

import base64
import html
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from tinyscope.train.checkpoint import atomic_write_bytes

log = logging.getLogger(__name__)

STYLE = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;
line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .7em;text-align:left}
th{background:#f5f5f5}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:.85em}
figure{margin:1.5em 0}figure img{max-width:100%;border:1px solid #eee}
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


def view_figures(ctx, only: list[str] | None = None, dpi: int = 90) -> list[ReportFigure]:
    """The walkthrough views that apply to the run, as PNGs, in paper order."""
    from tinyscope.studies.minimal.views import select_views

    out = []
    for view in select_views(only):
        try:
            applies = view.applies(ctx)
        except Exception as exc:
            log.warning("report: cannot tell whether %s applies: %s", view.name, exc)
            applies = False
        if applies:
            out.append(_render(view.name, view.figure, view.caption, lambda v=view: v.render(ctx), dpi))
    return out


def experiment_figures(run, dpi: int = 90) -> list[ReportFigure]:
    """Figures declared by the run's experiment (``Experiment.figures(run) -> {name: Figure}``)."""
    try:
        figs = run.experiment.figures(run) or {}
    except Exception as exc:
        log.warning("report: %s.figures failed: %s", run.experiment.name, exc)
        return [ReportFigure("experiment_figures", "Experiment figures", "", error=f"{type(exc).__name__}: {exc}")]
    return [_render(name, name, f"declared by experiment {run.experiment.name}", lambda f=fig: f, dpi)
            for name, fig in figs.items()]


def analysis_figures(run_dir: Path) -> list[ReportFigure]:
    """Figures that `tinyscope analyze` wrote into RUN/analysis (alignment, ablation, probes, t-SNE, attention)."""
    folder = run_dir / "analysis"
    numbers = json.loads((folder / "analysis.json").read_text()) if (folder / "analysis.json").exists() else {}
    captions = {
        "alignment": "attention mass on the positions the construction predicts (App. I.5)",
        "ablation": "TF cell accuracy with routing cells / matched precedents removed vs random controls (App. I.6)",
        "probes": "linear probes per stage: configuration and k-gram posterior (App. I.7)",
        "tsne": "t-SNE per stage, coloured by configuration and output (App. I.8)",
    }
    out = []
    for png in sorted(folder.glob("*.png")) if folder.is_dir() else []:
        key = png.stem
        caption = captions.get(key, "attention over the grid of one query (Fig. 2)" if key.startswith("attention") else "")
        if key in numbers:
            caption += f"; numbers: {json.dumps(numbers[key])[:600]}"
        out.append(ReportFigure(key, "Analysis", caption, png.read_bytes()))
    return out


def movie_figures(run_dir: Path, max_bytes: int = 8_000_000) -> list[ReportFigure]:
    """Training movies already rendered into RUN/movies (GIFs up to ``max_bytes`` are embedded)."""
    from tinyscope.studies.minimal.movies import MOVIE_NAMES

    out = []
    for name in MOVIE_NAMES:
        gif = run_dir / "movies" / f"{name}.gif"
        if not gif.exists():
            continue
        size = gif.stat().st_size
        if size > max_bytes:
            out.append(ReportFigure(name, "Movie", "", error=f"{gif} is {size / 1e6:.1f} MB, too large to embed; "
                                                          "open the file itself"))
        else:
            out.append(ReportFigure(name, "Movie (Sec. 6)", f"{name}, one frame per checkpoint", gif.read_bytes(),
                                    "image/gif"))
    return out


def write_run_report(run_dir: str | Path, which: str | int = "best", full: bool = True, dpi: int = 90,
                     figures: list[ReportFigure] | None = None, sequence: str | None = None, run=None) -> Path:
    """Write RUN/report.html and return its path.

    full: draw every applicable view (False: only the learning curve, for quick runs);
    figures: already rendered view figures to use instead of drawing them again (``tinyscope viz``);
    run: the run already in memory (``runner.Run``), instead of loading checkpoint ``which``.
    """
    from tinyscope.runs.rundir import load_run
    from tinyscope.studies.minimal.views import ViewContext

    run_dir = Path(run_dir)
    t0 = time.perf_counter()
    run = run if run is not None else load_run(run_dir, which)
    was_training = run.model.training
    run.model.eval()
    ctx = ViewContext(run, sequence=sequence)
    if figures is None:
        figures = view_figures(ctx, None if full else ["03_learning_curve"], dpi=dpi)
    results = run.results
    record = json.loads((run_dir / "config.json").read_text())
    summary = [("experiment", run.experiment.name), ("paper", run.experiment.paper or "-"),
               ("preset", run.preset), ("seed", getattr(run.cfg, "seed", "-")),
               ("steps", results.get("steps", "-")), ("selected step", results.get("selected_step", run.step)),
               ("stopped", results.get("stopped", "-")), ("wall time (s)", results.get("wall_time", "-")),
               ("parameters", results.get("n_parameters", sum(p.numel() for p in run.model.parameters()))),
               ("evaluation fingerprint", results.get("eval_fingerprint", "-")),
               ("figures drawn from step", run.step), ("versions", f"tinyscope {record.get('tinyscope_version')}, "
                                                                   f"torch {record.get('torch_version')}")]
    sections = [("Walkthrough (paper order)", figures), ("Experiment figures", experiment_figures(run, dpi)),
                ("Training movies", movie_figures(run_dir)), ("Analysis (tinyscope analyze)", analysis_figures(run_dir))]
    note = "" if full else "Quick report (smoke preset): `tinyscope viz RUN` draws every view into this page."
    page = render_html(f"{run.experiment.name} · {run_dir.name}", summary, results.get("metrics", {}),
                       record.get("config", {}), sections, note)
    run.model.train(was_training)
    path = run_dir / "report.html"
    atomic_write_bytes(path, page.encode("utf-8"))
    path.chmod(0o644)
    log.info("wrote %s in %.1f s", path, time.perf_counter() - t0)
    return path
