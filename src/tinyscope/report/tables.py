"""Tables as Markdown, CSV and LaTeX, and the registry of the papers' table layouts.

A :class:`Table` holds headers and rows of cells; a cell is text, a number or a
:class:`~tinyscope.report.stats.Stat` (rendered ``mean ± sd``; CSV gives it two columns,
``<header> mean`` and ``<header> sd``, so that it stays machine-readable).

A :class:`TableLayout` describes a paper table: which runs it reads, what its rows and its
columns are (setting keys such as ``model.d_c`` or the list of metrics), and how numbers
are scaled and rounded. Experiment modules register theirs at import time::

    register_table(TableLayout(
        name="tracerelay-table1", caption="Best-checkpoint test results (percent)",
        experiments=("tracerelay-*",),
        rows=(Key("Task", "experiment", labels=TASK_NAMES), Key("$d_c$", "model.widths.1")),
        metrics=(Metric("ID: 256", "accuracy@256", scale=100, digits=2),
                 Metric("OOD: 1024", "accuracy@1024", scale=100, digits=2))))

and ``tinyscope report DIR --table tracerelay-table1`` prints it from the runs under DIR.
"""
from __future__ import annotations

import csv
import fnmatch
import io
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tinyscope.errors import ConfigError, TinyscopeError
from tinyscope.report.records import RunRecord, format_value
from tinyscope.report.stats import FingerprintMismatch, Stat, mean_sd

Cell = Any  # str | int | float | Stat | None


@dataclass
class Table:
    headers: list[str]
    rows: list[list[Cell]]
    caption: str = ""
    digits: list[int | None] | None = None    # per column; None = from the SD
    scale: list[float] | None = None          # per column multiplier for Stat / float cells
    row_digits: list[int | None] | None = None  # per row, for Stat cells (tables whose rows are metrics)

    def _text(self, i: int, cell: Cell, r: int | None = None) -> str:
        digits = self.digits[i] if self.digits else None
        if self.row_digits and r is not None and isinstance(cell, Stat) and self.row_digits[r] is not None:
            digits = self.row_digits[r]
        scale = self.scale[i] if self.scale else 1.0
        if cell is None:
            return "–"
        if isinstance(cell, Stat):
            return cell.format(digits, scale)
        if isinstance(cell, float):
            if math.isnan(cell):
                return "–"
            return f"{cell * scale:.{digits if digits is not None else 4}f}"
        return str(cell)

    def to_markdown(self) -> str:
        esc = lambda s: s.replace("|", r"\|")  # noqa: E731
        lines = ["| " + " | ".join(esc(h) for h in self.headers) + " |",
                 "|" + "|".join("---" for _ in self.headers) + "|"]
        lines += ["| " + " | ".join(esc(self._text(i, c, r=r)) for i, c in enumerate(row)) + " |"
                  for r, row in enumerate(self.rows)]
        if self.caption:
            lines = [f"**{self.caption}**", ""] + lines
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        stat_cols = {i for row in self.rows for i, c in enumerate(row) if isinstance(c, Stat)}
        header = []
        for i, h in enumerate(self.headers):
            header += [f"{h} mean", f"{h} sd"] if i in stat_cols else [h]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        for row in self.rows:
            out = []
            for i, c in enumerate(row):
                scale = self.scale[i] if self.scale else 1.0
                if i in stat_cols:
                    out += [c.mean * scale, c.sd * scale] if isinstance(c, Stat) else ["", ""]
                elif isinstance(c, float):
                    out.append(c * scale)
                else:
                    out.append("" if c is None else c)
            w.writerow(out)
        return buf.getvalue()

    def to_latex(self) -> str:
        def esc(s: str) -> str:
            if s.startswith("$") and s.endswith("$"):
                return s
            for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"),
                         ("#", r"\#"), ("{", r"\{"), ("}", r"\}")):
                s = s.replace(a, b)
            return s.replace("±", r"$\pm$").replace("–", "--").replace("−", "$-$")

        cols = "l" * len(self.headers)
        lines = [r"\begin{table}[t]", r"\centering"]
        if self.caption:
            lines.append(rf"\caption{{{esc(self.caption)}}}")
        lines += [rf"\begin{{tabular}}{{{cols}}}", r"\toprule", " & ".join(esc(h) for h in self.headers) + r" \\",
                  r"\midrule"]
        lines += [" & ".join(esc(self._text(i, c, r=r)) for i, c in enumerate(row)) + r" \\"
                  for r, row in enumerate(self.rows)]
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines) + "\n"

    def render(self, fmt: str) -> str:
        renderers = {"markdown": self.to_markdown, "md": self.to_markdown, "csv": self.to_csv,
                     "latex": self.to_latex, "tex": self.to_latex}
        if fmt not in renderers:
            raise ConfigError(f"table format {fmt!r} is not known; choose markdown, csv or latex")
        return renderers[fmt]()


# ---------------------------------------------------------------------------- layouts
@dataclass(frozen=True)
class Key:
    """A row or column label derived from a run: ``get`` is a field name (experiment, preset,
    seed), a flattened config key (``model.d_model``; list items as ``model.widths.1``) or a
    function of the :class:`RunRecord`; ``labels`` renames values (``{True: "On"}``)."""

    header: str
    get: str | Callable[[RunRecord], Any]
    labels: dict | None = None
    default: Any = None              # label of a value that ``labels`` does not name (None: the value)
    order: tuple | None = None       # row order of the (labelled) values; others follow, sorted
    descending: bool = False         # sort values from high to low (e.g. widths 64, 32, 16)

    def sort_key(self, label: Any) -> tuple:
        if self.order is not None and label in self.order:
            return (0, self.order.index(label), 0.0, "")
        num = isinstance(label, (int, float)) and not isinstance(label, bool)
        value = (-label if self.descending else label) if num else 0.0
        text = "" if num else format_value(label)
        return (1, 0, value, text)

    def of(self, run: RunRecord) -> Any:
        if callable(self.get):
            value = self.get(run)
        else:
            value = run.value(self.get)
            if value is None and "." in self.get:  # an item of a list-valued field
                head, _, idx = self.get.rpartition(".")
                seq = run.value(head)
                if isinstance(seq, (list, tuple)) and idx.lstrip("-").isdigit():
                    value = seq[int(idx)]
        if self.labels is not None:
            for k, v in self.labels.items():
                if k == value or format_value(k) == format_value(value):
                    return v
            if self.default is not None:
                return self.default
        return value


@dataclass(frozen=True)
class Metric:
    """A metric shown as mean ± sample SD over seeds: ``name`` in results.json's metrics
    (flattened), multiplied by ``scale`` (100 for percent) and shown with ``digits`` decimals.
    ``count`` names a metric holding the number of evaluated items of this slice (the same
    for every run); transposed tables show it in a ``count_header`` column."""

    label: str
    name: str
    scale: float = 1.0
    digits: int | None = None
    count: str | None = None


@dataclass(frozen=True)
class TableLayout:
    """A paper table. ``rows`` are keys and the columns are ``metrics`` (one row per distinct
    combination of key values), or, with ``transpose=True``, the rows are ``metrics`` and the
    columns are the distinct combinations of ``rows`` keys (TraceRelay Tables 3 and 4).
    ``experiments`` are fnmatch patterns of experiment names; ``where`` filters runs further.
    Rows are sorted by each key's ``order`` / value (see :class:`Key`)."""

    name: str
    caption: str
    experiments: tuple[str, ...]
    rows: tuple[Key, ...]
    metrics: tuple[Metric, ...]
    transpose: bool = False
    where: Callable[[RunRecord], bool] | None = None
    show_n: bool = True
    count_header: str = "n"
    metric_header: str = "Metric"
    description: str = ""

    def select(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        return [r for r in runs if any(fnmatch.fnmatchcase(r.experiment, p) for p in self.experiments)
                and (self.where is None or self.where(r))]

    def _cells(self, runs: Sequence[RunRecord]) -> dict[tuple, list[RunRecord]]:
        """Runs grouped by their row labels, in row order (each Key's ``order``, then by value)."""
        groups: dict[tuple, list[RunRecord]] = {}
        sort_keys: dict[tuple, tuple] = {}
        for r in sorted(runs, key=lambda r: (r.experiment, r.label(), r.seed)):
            values = [k.of(r) for k in self.rows]
            key = tuple(format_value(v) for v in values)
            groups.setdefault(key, []).append(r)
            sort_keys[key] = tuple(k.sort_key(v) for k, v in zip(self.rows, values))
        cells = {key: groups[key] for key in sorted(groups, key=lambda key: sort_keys[key])}
        for key, group in cells.items():
            seeds = [r.seed for r in group]
            if len(set(seeds)) != len(seeds):
                raise TinyscopeError(f"table {self.name}: the cell {dict(zip([k.header for k in self.rows], key))} "
                                     f"holds two runs with one seed (different settings the layout does not "
                                     f"separate); narrow the runs with its `where`, or add a row key")
            fps = {r.eval_fingerprint for r in group}
            if len(fps) > 1:
                raise FingerprintMismatch(f"table {self.name}: the cell {key} mixes evaluation sets {sorted(map(str, fps))}")
        return cells

    def build(self, runs: Sequence[RunRecord]) -> Table:
        runs = self.select(runs)
        if not runs:
            raise TinyscopeError(f"table {self.name} reads runs of {', '.join(self.experiments)}; none found")
        cells = self._cells(runs)
        if not self.transpose:
            headers = [k.header for k in self.rows] + (["n"] if self.show_n else []) + [m.label for m in self.metrics]
            body = []
            for key, group in cells.items():
                stats = [mean_sd([r.metrics.get(m.name, math.nan) for r in group]) for m in self.metrics]
                body.append(list(key) + ([len(group)] if self.show_n else []) + stats)
            pad = len(self.rows) + (1 if self.show_n else 0)
            return Table(headers, body, self.caption, digits=[None] * pad + [m.digits for m in self.metrics],
                         scale=[1.0] * pad + [m.scale for m in self.metrics])
        with_counts = any(m.count for m in self.metrics)
        col_names = [", ".join(k) for k in cells]
        headers = [self.metric_header] + ([self.count_header] if with_counts else []) + col_names
        body = []
        for m in self.metrics:
            row: list[Cell] = [m.label]
            if with_counts:
                counts = {r.metrics.get(m.count) for g in cells.values() for r in g} if m.count else set()
                counts.discard(None)
                row.append(f"{int(next(iter(counts))):,}" if len(counts) == 1 and not math.isnan(next(iter(counts)))
                           else ("–" if not counts else "varies"))
            stats = [mean_sd([r.metrics.get(m.name, math.nan) for r in g]) for g in cells.values()]
            row += [Stat(st.mean * m.scale, st.sd * m.scale, st.n) for st in stats]
            body.append(row)
        return Table(headers, body, self.caption, row_digits=[m.digits for m in self.metrics])


@dataclass(frozen=True)
class FunctionTable:
    """A table built by the experiment's own function of the selected runs, for layouts that
    :class:`TableLayout` cannot express (e.g. one row per run, or computed columns).
    ``build_fn(runs)`` returns a :class:`Table`."""

    name: str
    caption: str
    experiments: tuple[str, ...]
    build_fn: Callable[[list[RunRecord]], Table]
    description: str = ""

    def build(self, runs: Sequence[RunRecord]) -> Table:
        selected = [r for r in runs if any(fnmatch.fnmatchcase(r.experiment, p) for p in self.experiments)]
        if not selected:
            raise TinyscopeError(f"table {self.name} reads runs of {', '.join(self.experiments)}; none found")
        table = self.build_fn(selected)
        if not table.caption:
            table.caption = self.caption
        return table


_TABLES: dict[str, TableLayout | FunctionTable] = {}


def register_table(layout: TableLayout | FunctionTable) -> TableLayout | FunctionTable:
    """Make ``layout`` available to ``tinyscope report DIR --table NAME``."""
    if layout.name in _TABLES and _TABLES[layout.name] != layout:
        raise ValueError(f"table layout {layout.name!r} registered twice")
    _TABLES[layout.name] = layout
    return layout


def table_names() -> list[str]:
    """Every table layout the registered experiments declare (``Experiment.tables()``) and any
    registered directly."""
    from tinyscope.runs import registry

    for exp in registry.experiments():
        for layout in exp.tables():
            if _TABLES.get(layout.name) is not layout:
                register_table(layout)
    return sorted(_TABLES)


def get_table(name: str) -> TableLayout | FunctionTable:
    names = table_names()
    if name not in _TABLES:
        import difflib

        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        known = ", ".join(names) if names else "none are registered yet"
        raise ConfigError(f"unknown table {name!r}{hint}; known tables: {known}")
    return _TABLES[name]
