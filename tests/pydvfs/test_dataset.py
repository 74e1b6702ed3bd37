import pytest

from pydvfs.characterise import dataset as ds
from pydvfs.errors import InvalidValueError
from pydvfs.sim.sweep import sweep_rows


def _rows():
    return list(sweep_rows(models=["bert-mini"], tasks=["RTE"], repeats=1, seed=0))


def test_roundtrip_and_pandas(tmp_path):
    path = tmp_path / "d.csv"
    rows = _rows()
    assert ds.write_rows(path, rows[:5]) == 5
    assert ds.write_rows(path, rows[5:]) == len(rows) - 5  # appends, one header
    back = ds.read_rows(path)
    assert len(back) == len(rows)
    assert back[0]["layers"] == 4 and back[0]["setting"] == "fixed"
    maxn = [r for r in back if r["setting"] == "maxn"][0]
    assert maxn["freq_mhz"] is None
    df = ds.read_dataframe(path)
    assert tuple(df.columns) == ds.COLUMN_NAMES
    assert df["energy_cpu_gpu_j"].sum() == pytest.approx(sum(r["energy_cpu_gpu_j"] for r in rows), rel=1e-6)
    assert (df["energy_cpu_gpu_j"] - df["energy_j_VDD_CPU_CV"] - df["energy_j_VDD_GPU_SOC"]).abs().max() < 1e-3


def test_validation(tmp_path):
    row = _rows()[0]
    with pytest.raises(InvalidValueError):
        ds.validate_row({**row, "setting": "pinned"})
    with pytest.raises(InvalidValueError):
        ds.validate_row({**row, "duration_s": None})
    with pytest.raises(InvalidValueError):
        ds.validate_row({**row, "freq_mhz": None})  # fixed needs a clock
    with pytest.raises(InvalidValueError):
        ds.validate_row({**row, "colour": "red"})
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(InvalidValueError):
        ds.DatasetWriter(other)


def test_doc_lists_every_column():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "dataset.md").read_text()
    assert ds.schema_markdown() in doc
