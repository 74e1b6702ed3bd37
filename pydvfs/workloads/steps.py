"""The progress file of the fine-tuning workloads: one writer for the plain loop
(:mod:`pydvfs.workloads.finetune`) and the SFT trainer (:mod:`pydvfs.workloads.sft`)."""
from __future__ import annotations

import argparse

from ..errors import InvalidValueError
from ..progress import write_progress


def write_steps(args: argparse.Namespace, steps: int, tokens: int) -> None:
    """Write --progress-file (if any): the loop's and the SFT trainer's one writer; a file that
    cannot be written (a folder, /proc) is a one-line InvalidValueError."""
    if args.progress_file is None:
        return
    try:
        write_progress(args.progress_file, steps, tokens)
    except OSError as e:
        raise InvalidValueError(f"--progress-file {args.progress_file}: cannot write it: "
                                f"{e.strerror or e}") from None
