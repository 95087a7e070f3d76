"""Paper figures drawn over the runs of a folder by `tinyscope report DIR` (a figure over runs
and seeds, e.g. every run's validation history, or a metric by length with mean ± SD).

A study registers each with :func:`register_figure` when its experiment module is imported;
``draw(runs)`` receives the finished runs of the figure's ``experiments`` (fnmatch patterns)
and returns a matplotlib Figure; `tinyscope report` saves it as ``DIR/report/figures/NAME.png``.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from tinyscope.report.records import RunRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class FolderFigure:
    name: str
    caption: str
    experiments: tuple[str, ...]
    draw: Callable[[list[RunRecord]], "Figure"]

    def runs(self, records: Sequence[RunRecord]) -> list[RunRecord]:
        return [r for r in records if any(fnmatch.fnmatchcase(r.experiment, p) for p in self.experiments)]


_FIGURES: dict[str, FolderFigure] = {}


def register_figure(figure: FolderFigure) -> FolderFigure:
    """Make ``figure`` part of `tinyscope report DIR` for folders holding runs it reads."""
    if _FIGURES.get(figure.name, figure) is not figure:
        raise ValueError(f"folder figure {figure.name!r} registered twice")
    _FIGURES[figure.name] = figure
    return figure


def figures_for(records: Sequence[RunRecord]) -> list[tuple[FolderFigure, list[RunRecord]]]:
    """Each registered figure that reads some of ``records``, with those runs (name order)."""
    from tinyscope.runs import registry

    registry.experiments()  # importing the studies registers their figures
    return [(f, f.runs(records)) for _, f in sorted(_FIGURES.items()) if f.runs(records)]
