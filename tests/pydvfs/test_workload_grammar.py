"""One grammar of a workload in every front end (issue 37, items 4, 5 and 20): every case of
tests/data/workload_grammar.json through pydvfs's API and CLI (`apply --workload`) and the
govcore binary, with one answer each; tests/govcore/test_serve.py runs the same cases through
the daemon."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from workload_cases import CASES, reason

from pydvfs import Workload
from pydvfs.cli import main
from pydvfs.errors import InvalidValueError
from pydvfs.workload import parse_workload

IDS = [ascii(c["spec"][:60]) for c in CASES]


def _strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_api(case):
    if "refused" in case:
        with pytest.raises(InvalidValueError) as e:
            Workload.from_any(parse_workload(case["spec"]))
        assert case["refused"] in str(e.value) and "\n" not in str(e.value)
    else:
        w = Workload.from_any(parse_workload(case["spec"]))
        again = Workload.from_any(parse_workload(w.spec()))  # its spelling reads back (without the name)
        assert again.to_dict() == {**w.to_dict(), "name": again.name}


def test_numbers_given_as_numbers_have_the_same_bounds():
    """A Workload built in Python meets the bounds a spec meets (one check, govcore's)."""
    base = {"model": "bert", "layers": 12, "hidden": 768, "seq_len": 40}
    for bad in ({"layers": 1e308}, {"layers": 10 ** 400}, {"seq_len": float("nan")}, {"hidden": 10 ** 9},
                {"seq_len": 0.0001}, {"trainable_params": 999_999_999_999},
                {"peft": "lora", "rank": 8, "trainable_params": 1000}):
        with pytest.raises(InvalidValueError):
            Workload.from_any({**base, **bad})


def test_pydvfs_and_govcore_give_one_answer(capsys, board, govcore_bin, tmp_path):
    where = ["--sysfs-root", str(board.root)]

    def pydvfs(spec):
        try:
            rc = main(["apply", "--workload", spec, "--dry-run", "--json", "--ignore-runs",
                       "--data-dir", str(tmp_path / "runs"), *where])
        except SystemExit as e:
            rc = e.code
        out = capsys.readouterr()
        return rc, out.out, out.err

    def govcore(spec):
        out = subprocess.run([govcore_bin, "apply", "--workload", spec, "--dry-run", "--json", *where],
                             capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        return out.returncode, out.stdout, out.stderr

    for case in CASES:
        answers = {name: front(case["spec"]) for name, front in (("pydvfs", pydvfs), ("govcore", govcore))}
        for name, (rc, out, err) in answers.items():
            if "refused" in case:
                assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, (name, case, err)
                assert case["refused"] in err, (name, case, err)
            else:
                assert rc == 0, (name, case, err)
                d = _strict_json(out)  # never inf or nan
                outside = case.get("outside", [])
                assert all(f"{key} " in (d["outside_training"] or "") for key in outside), (name, case, d)
                assert (d["outside_training"] is None) == (not outside), (name, case, d)
                assert ("outside the built-in policy's training workloads" in err) == bool(outside), (name, err)
        if "refused" in case:
            assert reason(answers["pydvfs"][2]) == reason(answers["govcore"][2]), case
        else:
            assert _strict_json(answers["pydvfs"][1])["freq_mhz"] == _strict_json(answers["govcore"][1])["freq_mhz"]


def test_the_trained_range_is_the_built_in_policies_training_workloads():
    """GC_TRAINED_* (govcore/policy.h) are the range of what tools/gen_policies.py trains the
    built-in policies on: the models and tasks docs/policy-builtin.json lists."""
    from pydvfs.sim.catalogue import get_architecture, get_task

    manifest = json.loads((Path(__file__).resolve().parents[2] / "docs" / "policy-builtin.json").read_text())
    data = next(iter(manifest.values()))["data"]
    archs = [get_architecture(m) for m in data["models"] + [m for m, _ in data["sft_pairs"]]]
    seq = [get_task(t).avg_tokens for t in data["tasks"]]
    header = (Path(__file__).resolve().parents[2] / "govcore" / "policy.h").read_text()

    def const(name):
        line = next(ln for ln in header.splitlines() if ln.startswith(f"#define GC_TRAINED_{name} "))
        return float(line.split()[2])

    assert (const("LAYERS_MIN"), const("LAYERS_MAX")) == (min(a.layers for a in archs), max(a.layers for a in archs))
    assert (const("HIDDEN_MIN"), const("HIDDEN_MAX")) == (min(a.hidden for a in archs), max(a.hidden for a in archs))
    assert (const("SEQ_LEN_MIN"), const("SEQ_LEN_MAX")) == (min(seq), max(seq))
    assert all(m["data"]["models"] == data["models"] and m["data"]["tasks"] == data["tasks"]
               for m in manifest.values())


def test_run_says_so_too(capsys, board, tmp_path):
    """`run --policy mlg` decides as apply does, and says a workload is outside the training
    range in the same words."""
    rc = main(["run", "--policy", "mlg", "--workload", "model=bert,layers=12,hidden=768,seq_len=512",
               "--sysfs-root", str(board.root), "--data-dir", str(tmp_path / "runs"), "--no-record", "--", "true"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "pydvfs run: note: the workload's seq_len 512 is outside the built-in policy's training workloads" in err
