"""What every verb shares: the one-line-error parser, the common options, output (text or
--json) and small argument types."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any, Callable

EXIT_USAGE = 2


MAX_ERROR_CHARS = 600


def one_line(text: str) -> str:
    """An error message made safe to print as one line: control and other unprintable
    characters (a newline, a terminal escape, a byte from a binary file) shown escaped, and cut
    at MAX_ERROR_CHARS. The C side does the same with gc_printable."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return out if len(out) <= MAX_ERROR_CHARS else out[:MAX_ERROR_CHARS - 3] + "..."


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (no usage dump) and exits 2."""

    def error(self, message: str) -> None:  # noqa: D102 - argparse hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")


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


def int_range(lo: int, hi: int):
    """argparse type of a whole number within lo..hi; state the bounds in the option's help.
    Strict: '1e9', '0x10' and '5.0' are refused, as is anything outside the bounds (a count
    that large would run for days, not fail)."""

    def parse(text: str) -> int:
        t = text.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", t):
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
        value = int(t)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be within {lo}..{hi}: {text!r}")
        return value

    parse.__name__ = "whole number"  # argparse names the type in its messages
    return parse


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
