"""`tinyscope report DIR`: seed statistics of every setting under DIR, paired differences of
matched variants, run counts, length curves, and registered paper tables.

Writes DIR/report/ (``summary.md|csv|tex``, ``pairs.csv|tex``, ``table-NAME.md|csv|tex``,
``figures/*.png``, with the studies' registered paper figures of
:mod:`tinyscope.report.folder_figures`) and returns the Markdown. Not to be confused with the single-run
RUN/report.html of `tinyscope run`.
"""
from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tinyscope.errors import TinyscopeError
from tinyscope.report.figures import length_families, plot_length_curves
from tinyscope.report.folder_figures import figures_for
from tinyscope.report.records import RunRecord, format_value, load_records
from tinyscope.report.stats import (
    FingerprintMismatch,
    SettingSummary,
    natural,
    paired_differences,
    summarize,
    variants_along,
)
from tinyscope.report.tables import Table, get_table

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    markdown: str
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def varying_keys(summaries: Sequence[SettingSummary]) -> list[str]:
    """Setting keys whose value is not the same in every summary (sorted)."""
    keys = sorted({k for g in summaries for k in g.setting})
    return [k for k in keys if len({format_value(g.setting.get(k)) for g in summaries}) > 1] or keys


def summary_table(summaries: Sequence[SettingSummary], metrics: Sequence[str], caption: str) -> Table:
    """One row per setting (and evaluation set): its keys, n seeds, and mean ± SD per metric."""
    keys = varying_keys(summaries)
    split_fp = len({g.eval_fingerprint for g in summaries}) > 1
    headers = keys + (["eval set"] if split_fp else []) + ["n"] + list(metrics)
    rows = []
    for g in sorted(summaries, key=lambda g: [natural(g.runs[0].config.get(k)) for k in keys]):
        row = [format_value(g.runs[0].config.get(k)) for k in keys]
        row += [g.eval_fingerprint or "–"] if split_fp else []
        row.append(len(g.runs))
        row += [g.stat(m) for m in metrics]
        rows.append(row)
    return Table(headers, rows, caption)


def status_table(records: Sequence[RunRecord]) -> Table:
    """Runs per setting and status (done / failed / incomplete), and the failures' seeds."""
    counts: dict[tuple, Counter] = defaultdict(Counter)
    failed: dict[tuple, list[int]] = defaultdict(list)
    for r in records:
        key = (r.experiment, r.preset, r.label())
        counts[key][r.status] += 1
        if r.status == "failed":
            failed[key].append(r.seed)
    rows = [[exp, preset, label, c["done"], c["failed"], c["incomplete"], " ".join(map(str, sorted(failed[(exp, preset, label)])))]
            for (exp, preset, label), c in sorted(counts.items())]
    return Table(["experiment", "preset", "setting", "done", "failed", "incomplete", "failed seeds"], rows,
                 "Runs per setting (see RUN/error.txt of a failed run)")


def canonical(text: str) -> str:
    """A grid value as the config stores it (``3e-3`` -> ``0.003``), to match config values."""
    try:
        return format_value(json.loads(text))
    except ValueError:
        return text


def pairs_table(records: Sequence[RunRecord], key: str, order: Sequence[str] | None, metrics: Sequence[str],
                strict: bool, notes: list[str]) -> Table | None:
    """Paired differences ``variant - baseline`` along ``key`` (baseline: first value in ``order``)."""
    rows = []
    families = variants_along(records, key)
    seen: dict[str, set] = defaultdict(set)
    for _, _, others in families:
        for k, v in others:
            seen[k].add(v)
    shared = {k for k, vals in seen.items() if len(vals) == 1 and all(k in dict(o) for _, _, o in families)}
    for (exp, _preset, others), by_value in families.items():
        if len(by_value) < 2:
            continue
        others = tuple((k, v) for k, v in others if k not in shared)  # show what tells families apart
        values = [v for v in (order or []) if v in by_value] + sorted(v for v in by_value if v not in (order or []))
        base = values[0]
        for v in values[1:]:
            try:
                diffs = paired_differences(by_value[v], by_value[base], metrics)
            except FingerprintMismatch as exc:
                if strict:
                    raise
                notes.append(f"not paired ({key}={v} vs {base}): {exc}")
                continue
            if not diffs or diffs[0].stat.n == 0:
                continue
            label = ", ".join(f"{k}={val}" for k, val in others) or "all else equal"
            rows.append([exp, label, f"{v} − {base}", diffs[0].stat.n] + [d.stat for d in diffs])
    if not rows:
        return None
    return Table(["experiment", "matched on", key, "pairs"] + list(metrics), rows,
                 f"Paired differences along {key} (same seed, same evaluation set), mean ± sample SD")


def _write(folder: Path, stem: str, table: Table, files: list[Path]) -> None:
    for ext, fmt in (("md", "markdown"), ("csv", "csv"), ("tex", "latex")):
        p = folder / f"{stem}.{ext}"
        p.write_text(table.render(fmt))
        files.append(p)


def _ood_above(records: Sequence[RunRecord]) -> float | None:
    """The longest in-distribution length over the runs: the smallest of their experiments'
    ``id_max_length(cfg)`` (None when no run is length-indexed)."""
    from tinyscope.runs.rundir import read_config

    bounds = set()
    for r in records:
        try:
            exp, _, cfg = read_config(r.path)
        except TinyscopeError:
            continue
        edge = exp.id_max_length(cfg)
        if edge is not None:
            bounds.add(float(edge))
    return min(bounds) if bounds else None


def build_report(folder: str | Path, table: str | None = None, pair: str | None = None,
                 ood_above: float | None = None, metrics: Sequence[str] | None = None,
                 write: bool = True) -> SweepReport:
    folder = Path(folder)
    if not folder.is_dir():
        raise TinyscopeError(f"{folder} is not a folder of runs")
    layout = get_table(table) if table else None  # a misspelt name fails before the folder is read
    everything = load_records(folder, status=None)
    records = [r for r in everything if r.status == "done"]
    if not records:
        raise TinyscopeError(f"no finished runs (results.json) under {folder}")
    out = folder / "report"
    files: list[Path] = []
    if write:
        (out / "figures").mkdir(parents=True, exist_ok=True)
    if layout is not None:
        t = layout.build(records)
        if write:
            _write(out, f"table-{table}", t, files)
        return SweepReport(t.to_markdown(), files)

    sweep = json.loads((folder / "sweep.json").read_text()) if (folder / "sweep.json").exists() else {}
    grid_order: dict[str, list[str]] = sweep.get("grid", {})
    notes: list[str] = []
    sections, summary_tables = [], []
    by_exp: dict[tuple, list[RunRecord]] = defaultdict(list)
    for r in records:
        by_exp[(r.experiment, r.preset)].append(r)
    for (exp, preset), recs in sorted(by_exp.items()):
        summaries = summarize(recs)
        names = list(metrics) if metrics else list(dict.fromkeys(m for g in summaries for m in g.metrics()))
        t = summary_table(summaries, names, f"{exp} ({preset}): mean ± sample SD over seeds")
        summary_tables.append(t)
        sections.append(t.to_markdown())
        pair_keys = [pair] if pair else [k for k in (grid_order or varying_keys(summaries))
                                         if any(k in g.setting for g in summaries)]
        for key in pair_keys:
            pt = pairs_table(recs, key, [canonical(str(v)) for v in grid_order.get(key, [])], names, strict=bool(pair), notes=notes)
            if pt is not None:
                sections.append(pt.to_markdown())
                if write:
                    _write(out, f"pairs-{exp}-{key}", pt, files)
        bound = ood_above if ood_above is not None else _ood_above(recs)
        labels = [", ".join(f"{k}={format_value(g.setting.get(k))}" for k in varying_keys(summaries)) or "default"
                  for g in summaries]
        for family in length_families(summaries):
            fig = plot_length_curves(summaries, family, labels, ood_above=bound)
            if write:
                p = out / "figures" / f"{exp}-{family.replace('/', '_')}.png"
                fig.savefig(p, dpi=120)
                files.append(p)
            from tinyscope.interp.mpl import plt

            plt.close(fig)
    for spec, runs in figures_for(records):  # the studies' paper figures over runs and seeds
        from tinyscope.interp.mpl import plt

        try:
            fig = spec.draw(runs)
        except Exception as exc:  # a study figure that cannot be drawn from these runs leaves the report intact
            notes.append(f"figure {spec.name} not drawn: {type(exc).__name__}: {exc}")
            continue
        if write:
            p = out / "figures" / f"{spec.name}.png"
            fig.savefig(p, dpi=120)
            files.append(p)
        sections.append(f"![{spec.caption}](figures/{spec.name}.png)\n\n{spec.caption}\n")
        plt.close(fig)
    n_failed = sum(1 for r in everything if r.status == "failed")
    n_incomplete = sum(1 for r in everything if r.status == "incomplete")
    head = f"# Runs under {folder}\n\n{len(records)} finished, {n_failed} failed, {n_incomplete} incomplete.\n"
    if n_failed or n_incomplete:
        st = status_table(everything)
        sections.append(st.to_markdown())
        if write:
            _write(out, "status", st, files)
    if notes:
        sections.append("\n".join(f"- {n}" for n in notes) + "\n")
    markdown = "\n".join([head] + sections)
    if write:
        (out / "summary.md").write_text(markdown)
        (out / "summary.csv").write_text("".join(t.to_csv() for t in summary_tables))
        (out / "summary.tex").write_text("".join(t.to_latex() for t in summary_tables))
        files += [out / "summary.md", out / "summary.csv", out / "summary.tex"]
    return SweepReport(markdown, files, notes)
