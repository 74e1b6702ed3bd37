from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic  # noqa: E402


@pytest.fixture(scope="session")
def syn_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("syn") / "syn.csv"
    synthetic.write(path)
    return path


@pytest.fixture(scope="session")
def trained(syn_csv, tmp_path_factory):
    """A model folder trained by `pydvfs train` on the synthetic data's first three tasks."""
    from pydvfs.policy.curves import curves_from_frame, read_dataset
    from pydvfs.policy.train import train

    out = tmp_path_factory.mktemp("model")
    curves = curves_from_frame(read_dataset(syn_csv), tasks=["sst2", "qnli", "mrpc"])
    metrics = train(curves, out, source="synthetic")
    return out, metrics


@pytest.fixture(scope="session")
def govcore_bin():
    """The govcore binary, built from this tree."""
    repo = Path(__file__).resolve().parents[3]
    subprocess.run(["make", "-s", "-C", str(repo / "govcore"), "govcore"], check=True, capture_output=True)
    return str(repo / "govcore" / "govcore")
