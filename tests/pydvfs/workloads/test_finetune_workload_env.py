"""`python -m pydvfs.workloads.finetune` without --model in a sweep's cell: what it trains comes
from $PYDVFS_WORKLOAD (pydvfs.characterise.sweep.workload_env), and it says so; the command line wins."""
from __future__ import annotations

import pytest

from pydvfs.characterise.sweep import parse_workload, workload_env
from pydvfs.errors import InvalidValueError
from pydvfs.workloads.finetune import build_parser, from_workload_env


def _args(spec: str | None, *argv: str):
    args = build_parser().parse_args(list(argv))
    env = workload_env(parse_workload(spec)) if spec else {}
    return args, from_workload_env(args, env)


def test_the_cells_workload_is_trained():
    args, said = _args("name=bert-mini/SST-2,model=bert,layers=4,hidden=256,seq_len=13.3,task=SST-2,batch_size=8")
    assert (args.model, args.task, args.batch_size, args.trainer) == ("bert-mini", "sst2", 8, "loop")
    assert said.startswith("from $PYDVFS_WORKLOAD (name=bert-mini/SST-2,") and "--model bert-mini" in said


def test_a_decoder_by_its_size_label_with_its_method():
    args, said = _args("name=q,model=qwen2,layers=24,hidden=896,seq_len=64,model_size=qwen2.5-0.5b,peft=lora,"
                       "rank=8,precision=bf16")
    assert (args.model, args.trainer, args.peft, args.rank, args.precision) == \
        ("qwen2.5-0.5b", "sft", "lora", 8, "bf16")


def test_the_command_line_wins_and_without_a_workload_the_defaults():
    args, said = _args("name=w,model=bert,layers=4,hidden=256,seq_len=16,task=rte", "--model", "bert-tiny")
    assert (args.model, args.task, said) == ("bert-tiny", "sst2", None)
    args, said = _args(None)
    assert (args.model, args.task, args.batch_size, said) == ("bert-base", "sst2", 16, None)


def test_a_workload_of_no_catalogue_model_is_one_line():
    with pytest.raises(InvalidValueError, match="names no model of the catalogue"):
        _args("name=w,model=bert,layers=3,hidden=64,seq_len=16")
