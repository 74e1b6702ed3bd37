"""What every verb shares: the one-line-error parser, the common options, output (text or
--json) and small argument types."""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import textwrap
from typing import Any, Callable

from ..progress import MAX_COUNT

EXIT_USAGE = 2

# Optional extras (pyproject.toml) and the top-level modules each brings. A verb that needs one
# that is missing says which extra to install, in one line (cli.main).
EXTRA_OF_MODULE = {
    **dict.fromkeys(("numpy", "scipy", "sklearn", "m2cgen", "pandas", "statsmodels", "tqdm"), "train"),
    **dict.fromkeys(("torch", "transformers", "tokenizers"), "finetune"),
    "matplotlib": "plot",
    "prometheus_client": "metrics",
}


def missing_extra_message(error: ImportError) -> str | None:
    """The one line for an import that failed because an optional extra is not installed (the
    module itself, or one that a module of the extra needs: pandas without numpy), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        top = (getattr(error, "name", None) or "").split(".")[0]
        extra = EXTRA_OF_MODULE.get(top)
        if extra is not None:
            return f"this needs {top}, from the optional extra '{extra}': pip install 'pydvfs[{extra}]'"
        error = error.__cause__ or error.__context__
    return None


class HelpFormatter(argparse.HelpFormatter):
    """Paragraphs are wrapped; indented lines (examples, lists) are kept as written, so a
    command in --help can be copied and pasted whole."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for para in re.split(r"\n\s*\n", text.strip("\n")):
            lines = para.split("\n")
            if any(line.startswith((" ", "\t")) for line in lines):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(para.split()), width, initial_indent=indent,
                                         subsequent_indent=indent, break_on_hyphens=False,
                                         break_long_words=False))
        return "\n\n".join(out)

    def _split_lines(self, text: str, width: int) -> list[str]:
        # an option's help: wrapped at spaces only (never inside --an-option or a-file-name)
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)


MAX_ERROR_CHARS = 600


def undecodable_as_escapes(text: str) -> str:
    """Text that may hold a path's undecodable bytes (os.fsdecode's surrogates, from a
    --sysfs-root that is not UTF-8) with each such byte shown as \\xNN: printable on any
    terminal, never a UnicodeEncodeError."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name made
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def one_line(text: str) -> str:
    """An error message made safe to print as one line: control and other unprintable
    characters (a newline, a terminal escape, a byte from a binary file) shown escaped, and cut
    at MAX_ERROR_CHARS. The C side does the same with gc_printable."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in undecodable_as_escapes(str(text)))
    return out if len(out) <= MAX_ERROR_CHARS else out[:MAX_ERROR_CHARS - 3] + "..."


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (no usage dump) and exits 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # noqa: D102 - argparse hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")


def examples(*commands: str) -> str:
    """An epilog of example commands, one per line, never wrapped."""
    return "examples:\n" + "\n".join(f"  {c}" for c in commands)


def add_common_options(p: argparse.ArgumentParser, suppress: bool) -> argparse.ArgumentParser:
    """Options every verb accepts, before or after the verb. After the verb they are added with
    SUPPRESS defaults so that they do not overwrite a value given before it."""
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS if suppress else False,
                   help="print machine-readable JSON (on stdout; a verb that runs -- CMD: on stderr, "
                        "or to -o FILE)")
    return p


def add_board_options(p: argparse.ArgumentParser, state: bool = True) -> argparse.ArgumentParser:
    """The options of a verb that touches a board: where its files are and (for a verb that
    changes the clock) where the state saved before the first change is kept."""
    g = p.add_argument_group("board")
    g.add_argument("--sysfs-root", metavar="DIR", default=None,
                   help="resolve every board path under DIR (env PYDVFS_SYSFS_ROOT; default /)")
    if state:
        g.add_argument("--state-dir", metavar="DIR", default=None,
                       help="where the clock state saved before the first change is kept "
                            "(env PYDVFS_STATE_DIR)")
    return p


def add_store_options(p: argparse.ArgumentParser, record: bool = False, use: bool = False) -> None:
    """The board's store of run records (docs/store.md): ``--data-dir``; ``record``: also
    ``--no-record``; ``use``: also ``--ignore-runs``."""
    g = p.add_argument_group("the board's run records (docs/store.md)")
    g.add_argument("--data-dir", metavar="DIR", default=None,
                   help="where this board's online runs are recorded (env PYDVFS_DATA_DIR; default "
                        "/var/lib/pydvfs as root, else $XDG_DATA_HOME/pydvfs or ~/.local/share/pydvfs)")
    if record:
        g.add_argument("--no-record", dest="record", action="store_false",
                       help="do not record what this run measured in the board's store")
    if use:
        g.add_argument("--ignore-runs", dest="use_runs", action="store_false",
                       help="decide from the built-in (or --model-dir) policy alone, not from what this "
                            "board measured in earlier runs")


def add_above_power_mode(p: argparse.ArgumentParser) -> None:
    """``--above-power-mode``: the power mode (nvpmodel) is the user's ceiling; this lifts it."""
    p.add_argument("--above-power-mode", action="store_true",
                   help="let the clock go above the power mode's GPU cap (max_freq before the first "
                        "pin, nvpmodel's cap); without it a higher level is lowered to the cap, with a notice")


def policy_help(default: str | None = "mlg") -> str:
    """The static policies and their one line each, from govcore's table of them, with
    "(default)" on ``default`` alone (None: none of them, as for ``run``, whose default is
    online)."""
    from .. import _core

    def line(name, text):
        text = text.replace(" (default)", "")
        return f"{name}: {text}" + (" (default)" if name == default else "")

    return "; ".join(line(name, text) for name, text in _core.POLICY_HELP.items())


def add_objective_options(p: argparse.ArgumentParser) -> None:
    """``--objective`` and ``--max-slowdown`` (pydvfs/policy/objective.py): what a policy
    minimises, under what slowdown bound; ``objective_from_args`` checks them."""
    from .. import _core

    p.add_argument("--objective", default="energy", choices=_core.OBJECTIVE_NAMES,
                   help="minimise energy per step (default), energy x time (edp) or energy x time^2 (ed2p); "
                        "static policies: edp/ed2p with --policy roofline only")
    p.add_argument("--max-slowdown", dest="max_slowdown_pct", type=float, metavar="PCT",
                   help="lowest cost whose step time stays within PCT %% of the fastest clock's (static "
                        "policies: as predicted by --model-dir's roofline.txt)")


def add_energy_option(p: argparse.ArgumentParser, what: str = "minimise") -> None:
    """``--energy module|cpu-gpu`` (pydvfs/measure/energy.py): which energy to {what}: what the module
    draws (default) or the CPU and GPU rails alone (the papers' measure)."""
    from ..measure.energy import DEFAULT_MEASURE, MEASURES

    p.add_argument("--energy", default=DEFAULT_MEASURE, choices=MEASURES,
                   help=f"which energy to {what}: the module's, all it draws (default), or cpu-gpu, the "
                        "CPU and GPU rails alone (the papers' measure); the board table says which rails "
                        "make each (docs/boards.md)")


def objective_from_args(args: argparse.Namespace):
    """The validated Objective of --objective/--max-slowdown (and --energy where the verb has it)."""
    from ..measure.energy import DEFAULT_MEASURE
    from ..policy.objective import Objective

    return Objective(args.objective, args.max_slowdown_pct, getattr(args, "energy", DEFAULT_MEASURE))


def add_workload_argument(p: argparse.ArgumentParser, required: bool, aliases: bool = False,
                          help_extra: str = "") -> None:
    """``--workload model=..,layers=..,hidden=..,seq_len=..[,util_pct=..]``, the one spelling of a
    workload; with ``aliases`` also the separate flags --model/--layers/--hidden/--seq-len/--util
    (:func:`workload_from_args` merges them)."""
    p.add_argument("--workload", metavar="K=V,...", default=None,
                   help="model, layers, hidden, seq_len (avg tokens per sample) [, util_pct]; how it "
                        "trains [, peft=none|lora|qlora, rank=R or trainable_params=N, "
                        "weight_bits=32|16|8|4, precision=fp32|fp16|bf16, batch_size=B, "
                        "tokens_per_step=T] (default: full fine-tuning in fp32)" + help_extra)
    p.set_defaults(_workload_required=required)
    if aliases:
        g = p.add_argument_group("workload as separate flags (aliases of --workload keys)")
        g.add_argument("--model", dest="wl_model", metavar="TYPE", help="model type: bert, pythia, gpt, llama, ...")
        g.add_argument("--layers", dest="wl_layers", metavar="N")
        g.add_argument("--hidden", dest="wl_hidden", metavar="N")
        g.add_argument("--seq-len", dest="wl_seq_len", metavar="TOKENS")
        g.add_argument("--util", dest="wl_util_pct", metavar="PCT", help="GPU utilisation %% if known")


def workload_from_args(args: argparse.Namespace) -> dict | None:
    """The workload of --workload (and its alias flags) as a validated dict, or None if none was
    given and none is required."""
    from ..errors import InvalidValueError
    from ..workload import parse_workload

    spec = [args.workload] if args.workload else []
    for key in ("model", "layers", "hidden", "seq_len", "util_pct"):
        value = getattr(args, f"wl_{key}", None)
        if value is not None:
            spec.append(f"{key}={value}")
    if not spec:
        if getattr(args, "_workload_required", False):
            raise InvalidValueError("give --workload model=..,layers=..,hidden=..,seq_len=..")
        return None
    return parse_workload(",".join(spec))


def name_list(values: list[str] | str | None, option: str = "the list") -> list[str] | None:
    """A list option given as ``a,b``, ``a b`` or both (``--tasks SST-2,QNLI MRPC``); ``option``
    names it in the error for an empty one."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    out = [t.strip() for v in values for t in v.split(",") if t.strip()]
    if not out:  # `--tasks ''` read as every task
        from ..errors import InvalidValueError

        raise InvalidValueError(f"{option}: no names in {' '.join(values)!r}")
    return out


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


def clock_mhz(text: str) -> float:
    """argparse type of a clock: MHz by govcore's one grammar (``_core.parse_mhz``: ASCII
    digits, an optional fraction of at most 6 digits), as ``pin`` and ``govcore`` read it."""
    from ..device import mhz_to_hz
    from ..errors import InvalidValueError

    try:
        return mhz_to_hz(text) / 1e6
    except InvalidValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


clock_mhz.__name__ = "clock"  # argparse names the type in its messages

MAX_SECONDS = 7 * 24 * 3600.0  # a week: a longer interval or timeout is a typo, not a plan


def seconds(text: str) -> float:
    """argparse type of an interval in seconds: a finite number > 0 and at most a week ('inf',
    'nan' and 1e300 are refused in one line, never an OverflowError later)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (0 < value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0 and at most {MAX_SECONDS:g} "
                                         f"(a week): {text!r}")
    return value


seconds.__name__ = "seconds"

count = int_range(1, MAX_COUNT)  # argparse type of a count >= 1, up to a progress file's largest


def seconds_or_zero(text: str) -> float:
    """argparse type of a wait that may be none: 0, or an interval as :func:`seconds`."""
    try:
        return 0.0 if float(text) == 0 else seconds(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0 to {MAX_SECONDS:g} (a week): "
                                         f"{text!r}") from None


seconds_or_zero.__name__ = "seconds"


REPORT_OUT_HELP = ("write the report (text, or JSON with --json) to FILE, a new file, instead of stderr: "
                   "CMD's own output keeps stdout and stderr")


def add_report_output(p: argparse.ArgumentParser) -> None:
    """``-o FILE`` of a verb that wraps ``-- CMD`` (README, "Commands that wrap a command"): its report goes to
    stderr (as ``time``'s and ``perf stat``'s do), or to FILE; CMD's stdout is CMD's."""
    p.add_argument("-o", "--output", dest="report_out", metavar="FILE", default=None, help=REPORT_OUT_HELP)


def check_report_out(args: argparse.Namespace) -> None:
    """Refuse ``-o FILE`` before anything runs when FILE exists (it is not ours to replace) or
    its folder does not: a report is not lost at the end of a long run."""
    from ..errors import InvalidValueError

    out = getattr(args, "report_out", None)
    if out is None:
        return
    if not out.strip():
        raise InvalidValueError("-o takes a file name; it was empty")
    if os.path.lexists(out):
        raise InvalidValueError(f"-o {out}: the file exists; give a new file name")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise InvalidValueError(f"-o {out}: the folder {parent} does not exist")


def _report_stream(args: argparse.Namespace, wrapped: bool):
    """(stream, close?): -o FILE (created new, 0644), stderr for a verb that ran CMD, else stdout."""
    out = getattr(args, "report_out", None)
    if out is not None:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            return os.fdopen(fd, "w", encoding="utf-8"), True
        except OSError as e:
            print(f"pydvfs: warning: cannot create {out} ({e.strerror}): the report goes to stderr",
                  file=sys.stderr, flush=True)
            return sys.stderr, False
    return (sys.stderr if wrapped else sys.stdout), False


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str], wrapped: bool = False,
         line: bool = False) -> None:
    """Print ``data`` as JSON with --json, else the human-readable ``text``: on stdout, or, for
    a verb that ran the user's command (``wrapped``), on stderr, leaving stdout to the command;
    to ``-o FILE`` where given. ``line``: the JSON on one line (one of a stream of documents,
    JSON Lines)."""
    stream, close = _report_stream(args, wrapped)
    try:
        if getattr(args, "json", False):
            json.dump(_finite(data), stream, indent=None if line else 2, sort_keys=False, default=_json_default,
                      allow_nan=False)
            stream.write("\n")
        else:
            stream.write(undecodable_as_escapes((text() if callable(text) else text).rstrip("\n")) + "\n")
        stream.flush()
    finally:
        if close:
            stream.close()


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
