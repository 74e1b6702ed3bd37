"""``pydvfs pin MHZ -- CMD`` and ``pydvfs apply ... -- CMD``: hold a clock for one command's life.

CMD keeps stdout and stderr; the verb's own lines and its report go to stderr (``-o FILE``: the
report to FILE), as ``time`` does.

The board is held (one owner per GPU) from the change until CMD has ended; then it is restored,
also when CMD fails, on Ctrl-C and on SIGTERM/SIGHUP. The verb exits with CMD's status. The same
directly and through the govcore daemon, where a pin lasts only as long as this process.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Tuple

from ..command import check_command, exit_status, start_command, stop_command
from ..errors import InvalidValueError
from ..signals import Terminated, terminate_as_exception
from .common import emit


def add_command_argument(p: argparse.ArgumentParser, options: argparse.ArgumentParser) -> None:
    """``-- CMD...`` for a verb whose options ``options`` (a parser with the same options and no
    positionals) parses again where they were given after a positional (see command_of)."""
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...",
                   help="hold the clock while CMD runs, then restore it; exit with CMD's status")
    p.set_defaults(_options=options)


def command_of(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` ([] without one). argparse hands everything after a verb's
    positional (``pin 714 --json -- CMD``) to the command: options before ``--`` are parsed here.
    (Where argparse itself took the ``--`` away, the command is all there is.)"""
    rest = list(args.cmd or [])
    if not rest or rest[0] == "--":
        return rest[1:]
    if not rest[0].startswith("-"):
        return rest
    if args._options is None:  # the verb has no positional: argparse left the options alone
        raise InvalidValueError(f"unexpected {rest[0]!r}: a command to run goes after --")
    split = rest.index("--") if "--" in rest else len(rest)
    args._options.parse_args(rest[:split], namespace=args)  # an unknown word: exit 2, one line
    return rest[split + 1:]


def hold_while(args: argparse.Namespace, dev, verb: str, cmd: list[str],
               change: Callable[[], Tuple[dict, str]]) -> int:
    """Make ``change()`` (it returns its record and its text), run ``cmd``, restore the board
    whatever happens; the verb's record with the command's exit status and the restore's
    outcome. Returns the command's exit status (128+N for a signal N)."""
    if not cmd:
        raise InvalidValueError("no command after --: e.g. -- python train.py")
    check_command(cmd)  # before the change: a command that cannot start never pins
    with terminate_as_exception():
        try:
            with dev.governing():
                try:
                    data, text = change()
                    print(f"pydvfs {verb}: {text.splitlines()[0]}, held while {cmd[0]} runs",
                          file=sys.stderr, flush=True)
                    proc = start_command(cmd)
                    try:
                        proc.wait()
                    except BaseException:
                        stop_command(proc)
                        raise
                finally:
                    restored = dev.restore()
        except (KeyboardInterrupt, Terminated):
            print(f"pydvfs {verb}: stopped; the GPU clock was restored", file=sys.stderr, flush=True)
            raise
    status = exit_status(proc.returncode)
    st = dev.state()
    after = (f"{cmd[0]} exited with status {status}; "
             + (f"restored governor {st.governor}, min {st.min_mhz:g} MHz, max {st.max_mhz:g} MHz"
                if restored else "the board was not changed"))
    emit(args, {**data, "command": cmd, "exit_status": status, "restored": restored}, text + "\n" + after,
         wrapped=True)
    return status


def until_exit_note(verb: str, what: str, example: str) -> str:
    """What a change through the daemon without ``-- CMD`` lasts (it ends with this process)."""
    return (f"pydvfs {verb}: note: {what} until this command exits (the govcore daemon restores the "
            f"board when its client disconnects, so: now); use `{example} -- CMD` to hold it while CMD "
            "runs, or `pydvfs run`")
