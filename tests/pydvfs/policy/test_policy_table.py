"""govcore's one table of policies (policy_table.c's gc_policies): Python's names, help and flags, the
binary's --help and its error words all come from its entries."""
from __future__ import annotations

import subprocess
from pathlib import Path

from pydvfs import _core
from pydvfs.governor.loop import POLICIES, STATIC_POLICIES, needs_workload
from pydvfs.policy.evaluate import POLICIES as EVALUATED

GOVCORE = Path(__file__).resolve().parents[3] / "govcore"


def test_names_help_and_flags_come_from_one_table():
    assert _core.POLICY_NAMES == ("mlg", "ffg", "rules", "maxn", "roofline")
    assert tuple(_core.POLICY_HELP) == tuple(_core.POLICY_FLAGS) == _core.POLICY_NAMES
    assert all(text and "\n" not in text for text in _core.POLICY_HELP.values())
    assert _core.POLICY_FLAGS["maxn"] == {"pins_nothing", "no_workload"}
    assert _core.POLICY_FLAGS["ffg"] == {"no_workload"}  # it reads no workload
    assert _core.POLICY_FLAGS["roofline"] == {"needs_model_dir", "takes_objective"}
    assert not _core.POLICY_FLAGS["mlg"] and not _core.POLICY_FLAGS["rules"]
    # what the front ends derive from the flags
    assert STATIC_POLICIES == _core.POLICY_NAMES and POLICIES == ("online",) + _core.POLICY_NAMES
    assert [p for p in POLICIES if needs_workload(p)] == ["mlg", "ffg", "rules", "roofline"]
    assert "roofline" not in EVALUATED and "maxn" in EVALUATED


def test_govcore_help_and_errors_list_the_table(tmp_path):
    subprocess.run(["make", "-s", "-C", str(GOVCORE), "govcore"], check=True, capture_output=True)
    text = subprocess.run([str(GOVCORE / "govcore"), "--help"], capture_output=True, text=True, check=True).stdout
    for name, help_text in _core.POLICY_HELP.items():
        assert any(line.split() and line.split()[0] == name and line.rstrip().endswith(help_text)
                   for line in text.splitlines()), (name, text)
    bad = subprocess.run([str(GOVCORE / "govcore"), "apply", "--policy", "fast", "--workload",
                          "model=bert,layers=1,hidden=1,seq_len=1"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "govcore: error: unknown policy 'fast': expected mlg, ffg, rules, maxn or roofline"
