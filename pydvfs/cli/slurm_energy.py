"""``pydvfs slurm-energy JOB``: a Slurm job's energy per node and in total, from the job's record or
the SPANK plugin's files (pydvfs/integrations/slurm_energy.py, docs/slurm.md)."""
from __future__ import annotations

import argparse

from ..errors import InvalidValueError
from .common import emit, examples


def register(sub, common) -> None:
    p = sub.add_parser(
        "slurm-energy", parents=[common],
        help="a Slurm job's energy per node and in total (the SPANK plugin's --dvfs jobs)",
        description=(
            "Print a Slurm job's energy per node and in total (module and CPU+GPU, J; the steps "
            "counted, their time, the modes, policies and clocks): from the job's record (its "
            "AdminComment, which the plugin's record= writes at the batch step's end) where it "
            "holds one, else from the plugin's energy files (slurm-JOB.STEP.NODE.dvfs.json) in "
            "the job's folder (its WorkDir as `scontrol show job` gives it), or in --dir. A step "
            "inside a governed step on the same node (srun in a governed batch script) is not "
            "counted twice."),
        epilog=examples("pydvfs slurm-energy 4242",
                        "pydvfs slurm-energy 4242 --json",
                        "pydvfs slurm-energy 4242 --dir /shared/runs   # the files only, no Slurm needed"))
    p.add_argument("job", metavar="JOB", help="the job's id")
    p.add_argument("--dir", metavar="DIR", default=None,
                   help="read the energy files in DIR (the job's submit folder; a job Slurm no longer knows)")
    p.add_argument("--record", action="store_true",
                   help="write the summary of the files in --dir into the job's AdminComment (root or "
                        "SlurmUser, while the job runs: what the plugin's record= runs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..integrations.slurm_energy import job_energy, record, table

    if args.record:
        if not args.dir:
            raise InvalidValueError("--record needs --dir DIR: the folder of the job's energy files")
        s = record(args.job, args.dir)
        emit(args, s, lambda: f"pydvfs slurm-energy: job {args.job}: recorded in its AdminComment")
        return 0
    if args.dir is not None and not args.dir:
        raise InvalidValueError("--dir needs a folder")
    s, where = job_energy(args.job, args.dir)
    emit(args, {**s, "source": where}, lambda: table(s, where))
    return 0
