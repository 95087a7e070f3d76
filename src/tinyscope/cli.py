"""``tinyscope``: list · run · eval, and every command that a module of
``tinyscope.commands`` registers (each module defines ``register(subparsers)``), plus the
commands a study adds in its own ``tinyscope/studies/<study>/cli.py`` (found by the registry's
discovery, never imported by name).

Bad input (an unknown experiment, preset, ``--set`` key or value, a missing run directory)
prints one line, ``tinyscope: error: ...``, and exits 2.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import pkgutil
import sys

from tinyscope.errors import TinyscopeError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + message
        sys.stderr.write(f"tinyscope: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tinyscope", description="Small sequence models on synthetic algorithmic tasks.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    from tinyscope import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    for module in study_cli_modules():
        importlib.import_module(module).register(sub)
    return parser


def study_cli_modules() -> list[str]:
    """``tinyscope.studies.<study>.cli`` for every study that has one."""
    from tinyscope.runs.registry import STUDIES_PACKAGE, study_names

    return [f"{STUDIES_PACKAGE}.{s}.cli" for s in study_names()
            if importlib.util.find_spec(f"{STUDIES_PACKAGE}.{s}.cli") is not None]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except TinyscopeError as exc:
        sys.stderr.write(f"tinyscope: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("tinyscope: interrupted; `tinyscope run ... --resume` continues from the last checkpoint\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
