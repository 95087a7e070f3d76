"""The layouts of TraceRelay's paper Tables 1, 3, 4 and 5, registered as ``tracerelay-table1`` ...
``tracerelay-table5``: ``tinyscope report DIR --table tracerelay-table1`` prints one (mean ± sample
SD over seeds) from the runs under DIR.

Table 1: best-checkpoint ID (T = 256) and OOD (T = 1024) accuracy by task, phase inheritance,
middle width d_c and preset (the cpu preset's rows stand beside the paper preset's); Table 3: Dyck close accuracy at T = 4096 by matching distance and depth;
Table 4: Most-Freq diagnostics and shortcut baselines at T = 1024; Table 5: training exposure
and teacher-forced / greedy disagreements, one row per run.
"""
from __future__ import annotations

import json

from tinyscope.report.records import RunRecord
from tinyscope.report.tables import FunctionTable, Key, Metric, Table, TableLayout, register_table
from tinyscope.studies.tracerelay.task import DISTANCE_BINS, distance_bin_label

TASK_NAMES = {"tracerelay-equal-repeats": "Equal Repeats", "tracerelay-equal-repeats-no-inheritance": "Equal Repeats",
              "tracerelay-dyck": "Dyck", "tracerelay-most-freq": "Most-Freq"}
TASK_SHORT = {"Equal Repeats": "ER", "Dyck": "Dyck", "Most-Freq": "MF"}
PAPER_WIDTHS = (64, 32, 16)


def middle_width(run: RunRecord) -> int:
    """d_c: the trace width of the middle layer (Sec. 3: widths [64, d_c, 64])."""
    widths = run.value("model.d_trace")
    return int(widths[len(widths) // 2])


_TASK = Key("Task", "experiment", labels=TASK_NAMES, order=("Equal Repeats", "Dyck", "Most-Freq"))
_INHERIT = Key("Phase inheritance", "model.inherit", labels={True: "On", False: "Off"}, order=("On", "Off"))
_WIDTH = Key("d_c", middle_width, descending=True)
_PRESET = Key("Preset", "preset", order=("paper", "cpu", "smoke"))  # a cpu-preset row is never pooled with the paper's
_WIDTH_COLUMN = Key("d_c", lambda r: f"d_c={middle_width(r)}", order=tuple(f"d_c={w}" for w in PAPER_WIDTHS))


def _percent(label: str, name: str, count: str | None = None) -> Metric:
    return Metric(label, name, scale=100, digits=2, count=count)


TABLE1 = register_table(TableLayout(
    name="tracerelay-table1", experiments=("tracerelay-*",), rows=(_TASK, _INHERIT, _WIDTH, _PRESET),
    caption="Best-checkpoint test results, mean ± sample SD over seeds (percent). ID is T = 256 and OOD is "
            "T = 1024 for every task: accuracy (Equal Repeats), close accuracy (Dyck), greedy exact (Most-Freq).",
    metrics=(_percent("ID: 256", "acc@256"), _percent("OOD: 1024", "acc@1024"))))

TABLE3 = register_table(TableLayout(
    name="tracerelay-table3", experiments=("tracerelay-dyck",), rows=(_WIDTH_COLUMN,), transpose=True,
    caption="Dyck diagnostics at T = 4096: percent close accuracy by matching distance and pre-close depth, "
            "mean ± sample SD; Closes counts the targets of the common evaluation set. Empty bins show –.",
    metrics=tuple(_percent(distance_bin_label(lo, hi).replace("-", "–"), f"dist{distance_bin_label(lo, hi)}_acc@4096",
                           count=f"dist{distance_bin_label(lo, hi)}_n@4096") for lo, hi in DISTANCE_BINS)
    + tuple(_percent(f"Depth {d}", f"depth{d}_acc@4096", count=f"depth{d}_n@4096") for d in range(1, 11)),
    count_header="Closes", metric_header="Slice"))

TABLE4 = register_table(TableLayout(
    name="tracerelay-table4", experiments=("tracerelay-most-freq",), rows=(_WIDTH_COLUMN,), transpose=True,
    caption="Most-Freq diagnostics at T = 1024 (percent, mean ± sample SD), with the three shortcut baselines "
            "(exact ranking + EOS).",
    metrics=(_percent("Full exact", "acc@1024"), _percent("Top-1", "top1@1024"),
             _percent("Top-2 prefix", "top2@1024"), _percent("Set exact", "set_exact@1024"),
             _percent("Termination", "termination@1024"),
             _percent("Suffix frequency (32)", "base_suffix32_exact@1024"),
             _percent("First appearance", "base_first_exact@1024"), _percent("Fixed order", "base_fixed_exact@1024"))))


def exposure_table(runs: list[RunRecord]) -> Table:
    """One row per run: preset, selected and final update (dagger: the cap was reached without
    the stopping rule), training tokens, training-loop minutes (validation included), parameters
    and, for Most-Freq, the final evaluation's teacher-forced / greedy exactness disagreements
    over the examples evaluated (App. A: 18 of 46,080)."""
    rows = []
    for r in sorted(runs, key=lambda r: (_TASK.sort_key(_TASK.of(r)), _INHERIT.sort_key(_INHERIT.of(r)),
                                         -middle_width(r), r.seed)):
        results = json.loads((r.path / "results.json").read_text())
        dagger = "†" if results.get("stopped") == "max_steps" else ""
        best = f"{r.selected_step:,}" if r.selected_step is not None else "–"
        m = results.get("metrics", {})
        disagree = (f"{int(m['tf_greedy_disagree'])} / {int(m['tf_greedy_n']):,}"
                    if "tf_greedy_disagree" in m and "tf_greedy_n" in m else "–")
        rows.append([f"{TASK_SHORT[_TASK.of(r)]} / {_INHERIT.of(r)}", middle_width(r), r.preset, r.seed, best,
                     f"{r.steps:,}{dagger}", f"{(r.tokens or 0) / 1e6:.2f}", f"{(r.wall_time or 0) / 60:.1f}",
                     f"{results.get('n_parameters', 0):,}", disagree])
    return Table(["Task / inheritance", "d_c", "Preset", "Seed", "Best", "Final", "Tokens (M)", "Min.", "Params",
                  "TF≠greedy"], rows)


TABLE5 = register_table(FunctionTable(
    name="tracerelay-table5", experiments=("tracerelay-*",), build_fn=exposure_table,
    caption="Training exposure per run: selected (Best) and stopping (Final) update, † = update cap reached, "
            "training tokens, training-loop minutes including validation, parameters, Most-Freq "
            "teacher-forced / greedy disagreements over the examples evaluated."))

TABLES = (TABLE1, TABLE3, TABLE4, TABLE5)
