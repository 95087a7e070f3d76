"""One writer per run directory: an exclusive, non-blocking lock on ``RUN/.lock``.

Every command that writes into a run (``run``, ``run --resume``, ``viz``, ``movie``, ``analyze``)
holds :func:`run_lock` while it writes. A second one finds the lock taken and stops at once
with :class:`RunLockedError`, naming the process that holds it (its pid and command line, which
the holder writes into the lock file). The operating system drops the lock when its holder
exits, killed or not, so a stale ``.lock`` file never blocks anyone.

Within one process the lock is re-entrant: code that holds a run's lock may call code that
takes it again (a run writing its report, say).
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Iterator

from tinyscope.errors import TinyscopeError

LOCK_FILE = ".lock"

_held: dict[Path, int] = {}  # run directories this process holds -> nesting depth


class RunLockedError(TinyscopeError):
    """Another process is writing into the run directory."""


def _command() -> str:
    argv = list(sys.argv)
    if argv:
        argv[0] = os.path.basename(argv[0])
    return shlex.join(argv) or "python"


def holder(run_dir: str | Path) -> dict | None:
    """Who holds ``run_dir``'s lock: ``{"pid", "command", "since"}``, or None when nobody does
    (the file's record is believed only while its lock is really held)."""
    path = Path(run_dir) / LOCK_FILE
    if not path.is_file():
        return None
    try:
        import fcntl
    except ImportError:  # not POSIX: no locks
        return None
    try:
        with open(path) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _record(path)
            fcntl.flock(f, fcntl.LOCK_UN)
    except OSError:
        return None
    return None


def _record(path: Path) -> dict:
    try:
        rec = json.loads(path.read_text())
        return rec if isinstance(rec, dict) else {}
    except (OSError, ValueError):
        return {}  # the holder has not written its record yet


def _who(rec: dict) -> str:
    if not rec:
        return "another process"
    since = f", since {rec['since']}" if rec.get("since") else ""
    return f"process {rec.get('pid', '?')} ({rec.get('command', '?')}{since})"


@contextlib.contextmanager
def run_lock(run_dir: str | Path, command: str | None = None) -> Iterator[Path]:
    """Hold ``run_dir``'s lock for the ``with`` block (the directory is created if missing).

    ``command``: what the holder is doing, shown to a second writer (default: this process's
    command line). Raises :class:`RunLockedError` at once when another process holds it."""
    run_dir = Path(run_dir)
    key = run_dir.resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield run_dir
        finally:
            _held[key] -= 1
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield run_dir
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(f"{run_dir} is in use by {_who(_record(path))}; wait for it to finish "
                                 f"or choose another directory") from None
        record = {"pid": os.getpid(), "command": command or _command(),
                  "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        _held[key] = 1
        try:
            yield run_dir
        finally:
            del _held[key]
            os.ftruncate(fd, 0)  # nobody holds it now
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
