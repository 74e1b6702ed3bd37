"""Running the user's training command: start it (no shell), stop it politely, report its status.

Shared by every verb that takes ``-- CMD`` (measure, run, sweep, pin and apply): the command
keeps our stdout and stderr, as under ``time`` or ``perf stat``; the verb's own words (and its
``--json`` report) go to stderr or to ``-o FILE`` (pydvfs/cli/common.py, ``emit``).
"""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
from typing import Mapping, Sequence

from . import signals
from .errors import CommandError


def command_after_dashes(rest: Sequence[str]) -> list[str]:
    """The command that argparse.REMAINDER collected, without the `--` that introduces it."""
    rest = list(rest)
    return rest[1:] if rest[:1] == ["--"] else rest


def check_command(cmd: Sequence[str]) -> None:
    """CommandError, in start_command's words, for a command that cannot be started (not found,
    not an executable file): every verb checks before it changes the board, not after."""
    exe = cmd[0] if cmd else ""
    path = exe if os.sep in exe else shutil.which(exe)
    if not exe or path is None or not os.path.exists(path):
        raise CommandError(f"cannot run {exe!r}: {os.strerror(errno.ENOENT)}")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise CommandError(f"cannot run {exe!r}: {os.strerror(errno.EACCES)}")


def start_command(cmd: Sequence[str], extra_env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start ``cmd`` (a list, no shell) on our stdin, stdout and stderr; CommandError if it
    cannot be started."""
    env = {**os.environ, **(extra_env or {})}
    # A SIGTERM raised in the middle of Popen would leave a started child that no caller knows
    # of: hold it until the child is ours, then stop the child and raise.
    signals.hold()
    try:
        proc = subprocess.Popen(list(cmd), env=env)
    except OSError as e:
        raise CommandError(f"cannot run {cmd[0]!r}: {e.strerror or e}") from None
    finally:
        signum = signals.release()
    if signum is not None:
        stop_command(proc)
        raise signals.Terminated(signum)
    return proc


def exit_status(returncode: int) -> int:
    """Popen's returncode (-N for a signal) as a shell reports it (128+N)."""
    return 128 - returncode if returncode < 0 else returncode


def stop_command(proc: subprocess.Popen, grace_s: float = 5.0) -> int:
    """End ``proc`` if it still runs: give it a moment (a terminal's Ctrl-C reached it too), then
    SIGINT, SIGTERM and SIGKILL, each after ``grace_s``. Returns its exit status."""
    steps = [(None, min(0.5, grace_s)), (signal.SIGINT, grace_s), (signal.SIGTERM, grace_s),
             (signal.SIGKILL, None)]
    for sig, wait_s in steps:
        if proc.poll() is not None:
            break
        if sig is not None:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                break
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    return exit_status(proc.wait())


__all__ = ["command_after_dashes", "check_command", "start_command", "stop_command", "exit_status"]
