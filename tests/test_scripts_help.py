"""Every script in bench/ and tools/ that takes arguments says its --help (a `%` in a help
string once made bench_short_runs.py's --help a traceback)."""
from __future__ import annotations

import pytest
from repo_scripts import REPO, load

SCRIPTS = sorted(str(p.relative_to(REPO)) for d in ("bench", "tools") for p in (REPO / d).glob("*.py")
                 if "def main(argv" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script, capsys):
    with pytest.raises(SystemExit) as done:
        load(script).main(["--help"])
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out
