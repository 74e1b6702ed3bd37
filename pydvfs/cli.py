"""The ``pydvfs`` command line. Each verb lives in its own module and registers itself here.

Every verb takes ``--json``; bad input ends in one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from typing import Any, Callable

from .errors import PydvfsError
from .signals import Terminated

# Modules that add verbs: each has register(subparsers, common) -> None.
COMMAND_MODULES = [
    "pydvfs.cli_board",       # status, pin, restore
    "pydvfs.cli_measure",     # measure
    "pydvfs.cli_sweep",       # sweep
    "pydvfs.cli_run",         # run
    "pydvfs.analysis.cli",    # analyse
    "pydvfs.policy.cli",      # train, evaluate, apply
    "pydvfs.roofline.cli",    # roofline fit|predict|simulate|collect
    "pydvfs.demo",            # demo
    "pydvfs.report",          # report
]

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (no usage dump) and exits 2."""

    def error(self, message: str) -> None:  # noqa: D102 - argparse hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_common_options(p: argparse.ArgumentParser, suppress: bool) -> argparse.ArgumentParser:
    """Options every verb accepts, before or after the verb. After the verb they are added with
    SUPPRESS defaults so that they do not overwrite a value given before it."""
    default = argparse.SUPPRESS if suppress else None
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS if suppress else False,
                   help="print machine-readable JSON on stdout")
    p.add_argument("--sysfs-root", metavar="DIR", default=default,
                   help="resolve every board path under DIR (env PYDVFS_SYSFS_ROOT; default /)")
    p.add_argument("--state-dir", metavar="DIR", default=default,
                   help="where the clock state saved before the first change is kept "
                        "(env PYDVFS_STATE_DIR)")
    return p


def seed(text: str) -> int:
    """argparse type of a random seed: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str]) -> None:
    """Print ``data`` as JSON with --json, else the human-readable ``text``."""
    if getattr(args, "json", False):
        json.dump(_finite(data), sys.stdout, indent=2, sort_keys=False, default=_json_default, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write((text() if callable(text) else text).rstrip("\n") + "\n")
    sys.stdout.flush()


def _finite(obj: Any) -> Any:
    """NaN and infinities as null: JSON has no spelling for them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pydvfs",
        description=(
            "Energy-optimal GPU clock governor for fine-tuning small language models on NVIDIA "
            "Jetson boards. Every board path resolves under --sysfs-root, so the same commands "
            "run on a real board and on a simulated one."
        ),
    )
    add_common_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    common = add_common_options(argparse.ArgumentParser(add_help=False), suppress=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PydvfsError as e:
        print(f"pydvfs: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("pydvfs: interrupted", file=sys.stderr)
        return 130
    except Terminated as e:
        print(f"pydvfs: {e}", file=sys.stderr)
        return e.exit_status
    except BrokenPipeError:
        # `pydvfs ... | head`: not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        # A file we were told to read or write cannot be (a folder, a path under a file, a full
        # disk): the user's input, said in one line. Every verb restores the board on its way out.
        where = f": {e.filename}" if e.filename else ""
        print(f"pydvfs: error: {e.strerror or e}{where}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
