"""The ``pydvfs`` command line. Each verb lives in its own module and registers itself here.

Every verb takes ``--json``; bad input ends in one line on stderr and exit status 2.

Imports: any room but ``workloads``.
"""
from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import sys

from .. import eta
from ..errors import PydvfsError
from ..signals import Terminated
from .common import EXIT_USAGE, _Parser, add_common_options, examples, missing_extra_message, one_line

# Modules that add verbs: each has register(subparsers, common) -> None.
COMMAND_MODULES = [
    "pydvfs.cli.board",       # status, pin, restore
    "pydvfs.cli.measure",     # measure
    "pydvfs.cli.sweep",       # sweep
    "pydvfs.cli.run",         # run
    "pydvfs.cli.calibrate",   # calibrate
    "pydvfs.cli.analyse",     # analyse
    "pydvfs.cli.policy",      # train, evaluate, apply
    "pydvfs.cli.roofline",    # roofline fit|predict|simulate|collect
    "pydvfs.cli.demo",        # demo
    "pydvfs.cli.report",      # report
    "pydvfs.cli.fake_board",  # fake-board
    "pydvfs.cli.capture",     # capture-board
    "pydvfs.cli.exporter",    # exporter
    "pydvfs.cli.slurm_energy",  # slurm-energy
]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pydvfs",
        description=(
            "Energy-optimal GPU clock governor for fine-tuning small language models on NVIDIA "
            "Jetson boards. Every verb that touches a board takes --sysfs-root, so the same "
            "commands run on a real board and on a simulated one (`pydvfs fake-board DIR`)."
        ),
        epilog=examples(
            "pydvfs fake-board /tmp/orin --animate bert-base",
            "pydvfs status --sysfs-root /tmp/orin",
            "pydvfs apply --sysfs-root /tmp/orin --workload model=bert,layers=12,hidden=768,seq_len=128",
            "pydvfs restore --sysfs-root /tmp/orin",
            "pydvfs demo --quick"),
    )
    add_common_options(parser, suppress=False)
    parser.add_argument("--version", action="store_true",  # answered by main() before parsing
                        help="print the version, git describe and the built-in policies")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    common = add_common_options(argparse.ArgumentParser(add_help=False), suppress=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    top = list(itertools.takewhile(lambda a: a.startswith("-"), argv))  # the options before the verb
    if "--version" in top:  # with --json as every verb's: one document on stdout
        from ..version import format_version, version_info

        print(json.dumps(version_info(), indent=2) if "--json" in top else format_version("pydvfs", version_info()))
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with eta.reporting():  # long loops (LOOCV, analyse, fits) show a progress line on stderr
            return int(args.func(args) or 0)
    except PydvfsError as e:
        print(f"pydvfs: error: {one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as e:
        # an optional extra that is not installed: say which, in one line
        message = missing_extra_message(e)
        if message is None:
            raise
        print(f"pydvfs {args.verb}: {message}", file=sys.stderr)
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
        print(f"pydvfs: error: {one_line(f'{e.strerror or e}{where}')}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
