"""JSON-lines files written one record per ``write`` (``metrics.jsonl``), read back whole.

A writer killed midway leaves at most a torn *last* line; that line is dropped with a warning.
A line that does not parse anywhere else is damage, and raises the caller's error class, naming
the file and the line. Blank lines are skipped.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("tinyscope")


def read_records(path: Path, damaged: type[Exception], require_step: bool = False, hint: str = "") -> list[dict]:
    """The objects of the JSON-lines file ``path`` (``[]`` when it does not exist). With
    ``require_step`` every record must be an object with an integer ``step`` (a training log);
    otherwise lines that hold something other than an object are skipped. ``hint`` is appended
    to the error message (what the user can do)."""
    if not path.exists():
        return []
    lines = path.read_text(errors="replace").splitlines()
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if require_step and not (isinstance(rec, dict) and isinstance(rec.get("step"), int)):
                raise ValueError("not a record with a step")
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            if all(not rest.strip() for rest in lines[i + 1:]):
                log.warning("%s: dropped a torn last line (a write was cut off)", path)
                break
            what = "a log record" if require_step else "valid JSON"
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise damaged(f"{path} line {i + 1} is not {what} ({reason}){hint}") from None
        if isinstance(rec, dict):
            records.append(rec)
    return records
