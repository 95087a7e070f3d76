"""``tinyscope``: list · run · eval, and every command that a module of
``tinyscope.commands`` registers (each module defines ``register(subparsers)``), plus the
commands a study adds in its own ``tinyscope/studies/<study>/cli.py`` (found by the registry's
discovery, never imported by name).

Every error a user can cause (an unknown experiment, preset, ``--set`` key or value, a missing or
damaged run directory, a path that cannot be written, a run too large for the machine) prints
one line, ``tinyscope: error: ...``, and exits 2. Anything else is a bug in tinyscope: it
prints one line naming the exception and the log file that holds the full traceback (in the
run directory the command works on, else under the temporary directory), and exits 1.
``tinyscope -v`` prints the traceback too; ``tinyscope --version`` the version.

Parsing stays light: ``tinyscope --help``, ``tinyscope list`` and argument errors import neither
torch nor an experiment module (each command imports what it needs when it runs).
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import pkgutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tinyscope.errors import TinyscopeError

ERROR_LOG = "cli-errors.log"  # in the run directory a failed command worked on


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + message
        sys.stderr.write(f"tinyscope: error: {message}\n")
        raise SystemExit(2)


def build_parser(command: str | None = None, full: bool = False) -> argparse.ArgumentParser:
    """The parser of every command. A study's own commands are read from its catalog (their
    help, nothing imported) unless ``command`` is one of them, is no command any catalog names,
    or ``full``: then the study's cli module is imported and registers them for real."""
    parser = _Parser(prog="tinyscope", description="Small sequence models on synthetic algorithmic tasks.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress messages")
    parser.add_argument("--version", action="version", version=f"tinyscope {version()}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    from tinyscope import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):  # helpers of the commands, not commands
            continue
        importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    from tinyscope.runs.registry import study_cli, study_commands

    declared_all = study_commands()
    known = set(sub.choices) | {name for d in declared_all.values() if d for name, _ in d}
    full = full or (command is not None and command not in known)  # a catalog that lags its cli module
    for study, declared in declared_all.items():
        if full or declared is None or command in {name for name, _ in declared}:
            importlib.import_module(study_cli(study)).register(sub)
        else:  # listed with its help; parsed only when it is the command given (then imported above)
            for name, help_ in declared:
                sub.add_parser(name, help=help_, add_help=False)
    return parser


def command_of(argv: list[str]) -> str | None:
    """The command named in ``argv``: its first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def version() -> str:
    """The installed package's version (its metadata), else ``tinyscope.__version__``."""
    from importlib import metadata

    import tinyscope

    try:
        return metadata.version("tinyscope")
    except metadata.PackageNotFoundError:
        return tinyscope.__version__


def one_line(text: str) -> str:
    """``text`` on one line (a message's own line breaks become spaces)."""
    return " ".join(str(text).split())


def user_error(exc: BaseException) -> str | None:
    """The one-line message of an exception a user or the machine caused, not tinyscope: a file
    that cannot be read or written, memory that ran out, a damaged checkpoint; None otherwise."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        what = exc.strerror or one_line(exc) or type(exc).__name__
        return f"{where}{what}"
    text = one_line(exc)
    if isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and any(
            s in text for s in ("out of memory", "can't allocate memory", "Cannot allocate memory"))):
        return (f"out of memory ({text or type(exc).__name__}); lower train.batch_size, the model's size "
                f"or the evaluation's size")
    if type(exc).__name__ == "SafetensorError":
        return f"a checkpoint file is damaged or not a safetensors file ({text})"
    return None


def log_traceback(args: argparse.Namespace, exc: BaseException) -> Path | None:
    """Append the traceback of ``exc`` to ``cli-errors.log`` in the run directory the command
    worked on (``RUN``, ``--out`` or ``FOLDER`` when it is a writable directory), else under
    the temporary directory; returns the file (None: nowhere could be written)."""
    candidates = []
    for name in ("run", "out", "folder"):
        value = getattr(args, name, None)
        if isinstance(value, str) and value and not value.startswith("zoo:"):
            candidates.append(Path(value))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fallback = Path(tempfile.gettempdir()) / "tinyscope-logs" / f"error-{stamp}-{os.getpid()}.log"
    text = (f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: tinyscope "
            f"{' '.join(sys.argv[1:])}\n{''.join(traceback.format_exception(exc))}")
    for path in [d / ERROR_LOG for d in candidates if d.is_dir()] + [fallback]:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(text)
            return path
        except OSError:
            continue
    return None


class _Formatter(logging.Formatter):
    """Log lines as the CLI's own: ``tinyscope: warning: ...`` (info lines: ``tinyscope: ...``)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"tinyscope: {record.levelname.lower()}: {message}"
        return message


class _Once(logging.Filter):
    """Say each warning once: a file read twice in one command warns once."""

    def __init__(self):
        super().__init__()
        self.seen: set[tuple[int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def _fail(message: str) -> int:
    sys.stderr.write(f"tinyscope: error: {one_line(message)}\n")
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_of(argv))
    args = parser.parse_args(argv)
    handler = logging.StreamHandler()
    handler.setFormatter(_Formatter())
    handler.addFilter(_Once())
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[handler])
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except TinyscopeError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        sys.stderr.write("tinyscope: interrupted; `tinyscope run ... --resume` continues from the last checkpoint\n")
        return 130
    except BrokenPipeError:  # `tinyscope runs | head`: the reader left; nothing to say
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place every error becomes one line
        message = user_error(exc)
        if message is not None:
            return _fail(message)
        if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):  # a damaged file, read without a check
            path = log_traceback(args, exc)
            where = f"; the traceback in {path} shows which file" if path else ""
            return _fail(f"a file this command read is damaged or not what it should be "
                         f"({type(exc).__name__}: {one_line(exc)[:200]}){where}")
        if args.verbose:
            traceback.print_exc()
        path = log_traceback(args, exc)
        where = f"; the full traceback is in {path}" if path else ""
        sys.stderr.write(f"tinyscope: error: internal error, {type(exc).__name__}: "
                         f"{one_line(exc)[:300]}{where} (a bug in tinyscope: please report it)\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
