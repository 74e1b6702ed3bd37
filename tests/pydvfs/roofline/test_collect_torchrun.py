"""Real 2-process runs under torchrun on CPU (gloo): FSDP2 and DTensor tensor parallelism.

One `pydvfs roofline collect` call launches three runs (single, tp x2, fsdp x2) of a tiny BERT;
each launch costs ~10 s of interpreter and import start-up on a 2-core box.
"""
import math
import sys

import background
import pytest

from pydvfs.roofline import sweep_csv as dataset

CONFIG = "L=2,d=64,h=4,ff=128,S=32,B=8"


def _collect():
    out = background.new_dir("collect") / "runs.csv"
    res = background.run([sys.executable, "-m", "pydvfs", "roofline", "collect", "--out", out, "--configs", CONFIG,
                          "--strategies", "tp,fsdp", "--devices", "2", "--steps", "2", "--warmup", "2", "--json"],
                         1200)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


def collect_job():
    return background.start("roofline collect under torchrun", _collect)


# The three launches run in the background from the start of the session (tests/background.py).
BACKGROUND = [collect_job]


@pytest.fixture(scope="module")
def collected():
    import pandas as pd

    out = collect_job().result()
    return out, pd.read_csv(out)


def _row(df, strategy):
    sub = df[df["strategy"] == strategy]
    assert len(sub) == 1
    return sub.iloc[0]


def test_fsdp2_two_processes_gloo(collected):
    _, df = collected
    single, fsdp = _row(df, "single"), _row(df, "fsdp")
    assert fsdp["n_devices"] == 2 and fsdp["backend"] == "gloo" and fsdp["hardware"] == "cpu-gloo"
    # sharding parameters and splitting the batch must not change the maths of the first step
    assert fsdp["first_loss"] == pytest.approx(single["first_loss"], abs=1e-5)
    assert fsdp["time_s"] > 0
    assert fsdp["speedup"] == pytest.approx(single["time_s"] / fsdp["time_s"])
    assert math.isnan(fsdp["energy_j"])   # no sensor on CPU: left empty, never invented


def test_tensor_parallel_two_processes_gloo(collected):
    _, df = collected
    single, tp = _row(df, "single"), _row(df, "tp")
    assert tp["n_devices"] == 2 and tp["backend"] == "gloo"
    assert tp["first_loss"] == pytest.approx(single["first_loss"], abs=1e-5)
    assert tp["time_s"] > 0 and math.isnan(tp["energy_j"])


def test_collected_csv_is_in_the_schema_and_fit_refuses_it(collected, run_cli):
    path, df = collected
    assert list(df.columns[: len(dataset.SCHEMA_COLUMNS)]) == dataset.SCHEMA_COLUMNS
    loaded, fmt = dataset.load(str(path))
    assert fmt == "pydvfs"
    assert (loaded.loc[loaded["strategy"] != "single", "eta"] > 0).all()
    rc, out, err = run_cli("roofline", "fit", "--data", path)
    assert rc == 2 and "no energy measurements" in err
