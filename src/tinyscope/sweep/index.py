"""The run index: one SQLite table (standard library ``sqlite3``) of every run of a sweep or a
folder of runs, updated by the sweep as runs start and finish, queried by ``tinyscope runs``.

Columns: path (relative to the index's folder), experiment, preset, seed, setting (JSON of the
config keys that differ from the preset), overrides (JSON list as given), status
(pending | running | done | failed | incomplete), error, started, finished (Unix time),
wall_time (s), steps, selected_step, tokens, eval_fingerprint, metrics (JSON), attempts,
cpu_time (CPU seconds of the run's process, sweeps only), pid and host (the process that marked
the run running, and its machine).

A run marked running whose process is gone (a sweep killed with ``kill -9``, a machine that
rebooted) reads as ``incomplete``, with the reason in ``error``: queries check that the recorded
process is alive (on this host; a run recorded on another host is believed).

Queries run on a read-only connection against a view with one column per metric and per
setting key, so ``--where "rule_error < 0.1 AND seed = 42"`` or ``--where '"train.lr" = 0.003'``
work as SQL.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

from tinyscope.errors import ConfigError
from tinyscope.report.records import RunReadError, RunRecord, find_runs, format_value, read_json, read_run

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    path TEXT PRIMARY KEY,
    experiment TEXT NOT NULL,
    preset TEXT NOT NULL,
    seed INTEGER NOT NULL,
    setting TEXT NOT NULL DEFAULT '{}',
    overrides TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL DEFAULT 'pending',
    error TEXT,
    started REAL,
    finished REAL,
    wall_time REAL,
    steps INTEGER,
    selected_step INTEGER,
    tokens INTEGER,
    eval_fingerprint TEXT,
    metrics TEXT NOT NULL DEFAULT '{}',
    attempts INTEGER NOT NULL DEFAULT 0,
    cpu_time REAL,
    pid INTEGER,
    host TEXT
)
"""
# columns newer than the first schema, added to old indexes
ADDED_COLUMNS = {"cpu_time": "REAL", "pid": "INTEGER", "host": "TEXT"}
BASE_COLUMNS = ["path", "experiment", "preset", "seed", "setting", "status", "wall_time", "steps", "tokens"]
INDEX_NAME = "index.sqlite"


def row_from_record(rec: RunRecord) -> dict[str, Any]:
    """The index columns that a run directory determines."""
    return {"experiment": rec.experiment, "preset": rec.preset, "seed": rec.seed,
            "setting": json.dumps(rec.setting, sort_keys=True), "status": rec.status, "error": rec.error,
            "wall_time": rec.wall_time, "steps": rec.steps, "selected_step": rec.selected_step,
            "tokens": rec.tokens, "eval_fingerprint": rec.eval_fingerprint,
            "metrics": json.dumps(rec.metrics, sort_keys=True)}


def run_dir_row(run_dir: Path, exitcode: int | None = None) -> dict[str, Any]:
    """The index row of a finished job, read from its directory; a process that died without
    writing results.json or error.txt is a failure with its exit code, and a run whose files
    cannot be read is a failure that says why."""
    if (run_dir / "config.json").exists():
        try:
            row = row_from_record(read_run(run_dir))
        except (RunReadError, OSError) as exc:
            return {"status": "failed", "error": str(exc)}
    elif (run_dir / "error.txt").exists():  # a failed start leaves no config.json, only its error
        row = {"status": "failed", "error": (run_dir / "error.txt").read_text(errors="replace")}
    else:
        row = {"status": "incomplete"}
    job_file = run_dir / "sweep_job.json"
    if job_file.exists():
        try:
            row["cpu_time"] = read_json(job_file).get("cpu_time")
        except (RunReadError, OSError):
            pass
    if row["status"] == "incomplete":
        cause = f"exit code {exitcode}" if exitcode is not None else "no results"
        if exitcode is not None and exitcode < 0:
            cause = f"killed by signal {-exitcode}"
        row["status"] = "failed"
        row["error"] = f"the run's process ended ({cause}) before writing results.json or error.txt"
    return row


def first_line(error: str | None) -> str:
    """The last non-empty line of a traceback (the exception), for one-line displays."""
    lines = [ln for ln in (error or "").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def process_alive(pid: int, since: float | None = None) -> bool:
    """Whether process ``pid`` of this machine is alive and (when ``since``, a Unix time, is
    given and the start time can be read) started before ``since``: a pid reused by a later
    process is not the one recorded."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    except (OSError, OverflowError, ValueError):
        return False
    if since is None:
        return True
    try:  # Linux: field 22 of /proc/PID/stat is the start time in clock ticks after boot
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        boot = next(float(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                    if ln.startswith("btime "))
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return True
    return started <= since + 2.0  # /proc's clock and time.time() agree to about a second


class RunIndex:
    """The SQLite index at ``folder/index.sqlite``; only one writer (the sweep) at a time.

    readonly: query an existing index without writing to it; memory: build the index in memory
    (nothing is written into ``folder``), for listing a folder that has none."""

    def __init__(self, folder: str | Path, readonly: bool = False, memory: bool = False):
        self.folder = Path(folder)
        self.path = self.folder / INDEX_NAME
        try:
            if readonly:
                if not self.path.exists():
                    raise ConfigError(f"{self.folder} has no run index ({INDEX_NAME}); `tinyscope runs "
                                      f"{self.folder} --scan` builds one from its run directories")
                self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
                self.db.execute("SELECT 1 FROM runs LIMIT 1").fetchall()
            else:
                if not memory:
                    self.folder.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(":memory:" if memory else self.path, timeout=30)
                self.db.execute(SCHEMA)
                have = {d[1] for d in self.db.execute("PRAGMA table_info(runs)")}
                for col, kind in ADDED_COLUMNS.items():
                    if col not in have:
                        self.db.execute(f"ALTER TABLE runs ADD COLUMN {col} {kind}")
                self.db.commit()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path} is not a readable run index ({exc}); delete it and run "
                              f"`tinyscope runs {self.folder} --scan` to rebuild it from the run directories") from None
        self.db.row_factory = sqlite3.Row

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "RunIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ writes
    def register(self, path: str, experiment: str, preset: str, seed: int, overrides: list[str]) -> None:
        """Add a run as pending unless it is already known."""
        self.db.execute("INSERT OR IGNORE INTO runs (path, experiment, preset, seed, overrides) VALUES (?,?,?,?,?)",
                        (path, experiment, preset, seed, json.dumps(overrides)))
        self.db.commit()

    def mark_running(self, path: str, pid: int | None = None) -> None:
        """Mark ``path`` running in process ``pid`` (default: this one, the sweep whose death ends it)."""
        self.db.execute("UPDATE runs SET status='running', started=?, error=NULL, attempts=attempts+1, pid=?, "
                        "host=? WHERE path=?", (time.time(), pid or os.getpid(), socket.gethostname(), path))
        self.db.commit()

    def update(self, path: str, row: dict[str, Any]) -> None:
        """Write the columns in ``row`` for ``path`` (inserting the run if it is new)."""
        cols = [c for c in row if c != "path"]
        exists = self.db.execute("SELECT 1 FROM runs WHERE path=?", (path,)).fetchone()
        if exists:
            self.db.execute(f"UPDATE runs SET {', '.join(f'{c}=?' for c in cols)} WHERE path=?",
                            [row[c] for c in cols] + [path])
        else:
            self.db.execute(f"INSERT INTO runs (path, {', '.join(cols)}) VALUES ({', '.join('?' * (len(cols) + 1))})",
                            [path] + [row[c] for c in cols])
        self.db.commit()

    def record_finish(self, path: str, row: dict[str, Any]) -> None:
        self.update(path, {**row, "finished": time.time()})

    def scan(self, root: str | Path | None = None) -> int:
        """Index (or refresh) every run directory under ``root`` (default: the index's folder)."""
        root = Path(root) if root is not None else self.folder
        stale = self.stale_running()
        n = 0
        for run_dir in find_runs(root):
            rel = _relpath(run_dir, self.folder)
            try:
                row = row_from_record(read_run(run_dir))
            except (RunReadError, OSError) as exc:
                log.warning("skipped run %s: %s", run_dir, exc)
                continue
            current = self.db.execute("SELECT status FROM runs WHERE path=?", (rel,)).fetchone()
            if current is not None and current["status"] == "running" and row["status"] == "incomplete" \
                    and rel not in stale:
                continue  # a live sweep owns it
            self.update(rel, row)
            n += 1
        return n

    # ------------------------------------------------------------------ reads
    def stale_running(self) -> dict[str, int]:
        """Runs marked running whose recorded process (on this host) is gone: path -> pid."""
        host = socket.gethostname()
        rows = self.db.execute("SELECT * FROM runs WHERE status='running'").fetchall()
        out = {}
        for r in rows:
            keys = r.keys() if hasattr(r, "keys") else ()
            pid = r["pid"] if "pid" in keys else None
            if pid and (r["host"] in (None, host)) and not process_alive(int(pid), r["started"]):
                out[r["path"]] = int(pid)
        return out

    def counts(self) -> dict[str, int]:
        return {r["status"]: r["n"] for r in self.db.execute("SELECT status, COUNT(*) AS n FROM runs GROUP BY status")}

    def metric_names(self) -> list[str]:
        names: dict[str, None] = {}
        for (m,) in self.db.execute("SELECT metrics FROM runs"):
            names.update(dict.fromkeys(json.loads(m or "{}")))
        return list(names)

    def setting_keys(self) -> list[str]:
        keys: dict[str, None] = {}
        for (s,) in self.db.execute("SELECT setting FROM runs"):
            keys.update(dict.fromkeys(sorted(json.loads(s or "{}"))))
        return list(keys)

    def query(self, where: str | None = None, order: str = "path") -> tuple[list[str], list[dict]]:
        """Rows matching the SQL expression ``where`` over the base columns, every metric and
        every setting key (quote names with dots or @: ``"train.lr"``, ``"acc@256"``)."""
        taken = {d[1] for d in self.db.execute("PRAGMA table_info(runs)")}
        metrics = [m for m in self.metric_names() if m not in taken]
        settings = [k for k in self.setting_keys() if k not in taken and k not in metrics]
        q = lambda name: '"' + name.replace('"', '""') + '"'  # noqa: E731
        extra = [f"json_extract(metrics, {_json_path(m)}) AS {q(m)}" for m in metrics]
        extra += [f"json_extract(setting, {_json_path(k)}) AS {q(k)}" for k in settings]
        self.db.execute("DROP VIEW IF EXISTS temp.v")
        self.db.execute("DROP TABLE IF EXISTS temp.stale")
        self.db.execute("CREATE TEMP TABLE stale (path TEXT PRIMARY KEY, pid INTEGER)")
        self.db.executemany("INSERT INTO temp.stale VALUES (?, ?)", self.stale_running().items())
        gone = "runs.path IN (SELECT path FROM temp.stale)"
        base = [c if c not in ("status", "error") else
                (f"CASE WHEN {gone} THEN 'incomplete' ELSE runs.status END AS status" if c == "status" else
                 f"CASE WHEN {gone} THEN 'its process ' || runs.pid || ' ended without finishing it (killed?); "
                 f"the same sweep command resumes it' ELSE runs.error END AS error")
                for c in (d[1] for d in self.db.execute("PRAGMA table_info(runs)"))]
        base = [b if b.startswith("CASE") else f"runs.{q(b)}" for b in base]
        self.db.execute(f"CREATE TEMP VIEW v AS SELECT {', '.join(base)}{''.join(', ' + e for e in extra)} FROM runs")
        sql = "SELECT * FROM v" + (f" WHERE {where}" if where else "") + f" ORDER BY {order}"
        try:
            cur = self.db.execute(sql)
        except sqlite3.Error as exc:
            known = ", ".join(BASE_COLUMNS + metrics + settings)
            given = f"--where {where!r} is not a valid SQL condition" if where else ""
            given += (" or " if where else "") + (f"--order {order!r} is not a valid SQL ORDER BY" if order != "path" else "")
            raise ConfigError(f"{given or 'the query failed'} ({exc}); columns: {known}") from None
        cols = [d[0] for d in cur.description]
        return cols, [dict(zip(cols, r)) for r in cur.fetchall()]


def _json_path(key: str) -> str:
    return "'$.\"" + key.replace("'", "''").replace('"', '\\"') + "\"'"


def _relpath(path: Path, folder: Path) -> str:
    try:
        return str(path.resolve().relative_to(folder.resolve()))
    except ValueError:
        return str(path.resolve())


def setting_label(setting_json: str) -> str:
    setting = json.loads(setting_json or "{}")
    return ", ".join(f"{k}={format_value(v)}" for k, v in sorted(setting.items())) or "default"


def rows_for_display(cols: list[str], rows: Iterable[dict], columns: list[str] | None = None) -> tuple[list[str], list[list]]:
    """Columns to show (base columns without JSON blobs, then metrics) and their values."""
    rows = list(rows)
    hidden = {"overrides", "metrics", "started", "finished", "attempts", "eval_fingerprint", "selected_step"}
    if not any(r["error"] for r in rows):
        hidden.add("error")
    show = columns or [c for c in cols if c not in hidden]
    unknown = [c for c in show if c not in cols]
    if unknown:
        raise ConfigError(f"--columns: unknown column {unknown[0]!r}; choose from {', '.join(cols)}")
    out = []
    for r in rows:
        vals = []
        for c in show:
            v = r[c]
            if c == "setting":
                v = setting_label(v)
            elif c == "error":
                v = first_line(v)  # the full traceback: RUN/error.txt or --format json
            vals.append(v)
        out.append(vals)
    return show, out
