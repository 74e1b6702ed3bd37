import pytest


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """Run ``pydvfs ARGS...`` in-process with only the roofline verbs registered.

    Returns (exit code, stdout, stderr). Other verbs live on other branches; registering only
    ours keeps these tests independent of them.
    """
    import pydvfs.cli as cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", ["pydvfs.cli.roofline"])

    def run(*argv):
        try:
            rc = cli.main([str(a) for a in argv])
        except SystemExit as e:  # argparse usage errors
            rc = e.code
        out, err = capsys.readouterr()
        return rc, out, err

    return run
