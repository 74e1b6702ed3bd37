"""TRL's SFTTrainer with a PEFT LoRA adapter in bf16 (a small decoder built from a config, on the
CPU) under GovernorCallback on a fake Orin: the board is governed and restored, the report holds
the workload derived from the PeftModel and the Trainer's arguments (LoRA, its rank, bf16), J/token
comes from the real tokens the Trainer counted, and the Trainer's own TensorBoard and MLflow
reporters (and W&B's, offline, where it is installed) hold energy_j, J/token and the clock, read
back from their files (the callback was not put before them by hand)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# found, not imported: the child process imports them (importing trl, peft and mlflow here too
# would cost every test run seconds of collection)
_MISSING = [m for m in ("trl", "peft", "tensorboard", "mlflow") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)} (the finetune extra)")

from pydvfs.device.animate import Waveform, animate  # noqa: E402
from pydvfs.device.fake import build_fake_board  # noqa: E402

SCRIPT = Path(__file__).with_name("sft_train.py")
REPO = Path(__file__).resolve().parents[3]
FULL = (306000000, 1300500000)
WAVES = {"VDD_GPU_SOC": Waveform(voltage_mv=5000, base_ma=2000, sine_ma=300, sine_hz=3.0, step_ma=0),
         "VDD_CPU_CV": Waveform(voltage_mv=5000, base_ma=600, sine_ma=100, sine_hz=1.7, step_ma=0),
         "VIN_SYS_5V0": Waveform(voltage_mv=5000, base_ma=500, sine_ma=0, sine_hz=1.0, step_ma=0),
         "VDDQ_VDD2_1V8AO": Waveform(voltage_mv=5000, base_ma=100, sine_ma=0, sine_hz=1.0, step_ma=0)}
STEPS = 20  # four logging points (logging_steps=5): enough for a growing energy counter


def tensorboard_scalars(folder: Path) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags: dict = {}
    for events in folder.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            tags.setdefault(tag, []).extend(e.value for e in acc.Scalars(tag))
    return tags


def mlflow_metrics(uri: str) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("pydvfs-sft")
    (run,) = client.search_runs([exp.experiment_id])
    return {key: [m.value for m in client.get_metric_history(run.info.run_id, key)] for key in run.data.metrics}


def wandb_history(folder: Path) -> dict:
    """The logged history of the one offline W&B run under ``folder``: its ``run-*.wandb`` file is
    a LevelDB-style log (a 7-byte header, 32 KiB blocks of records, each with a crc32, a length and
    a kind: full, first, middle, last) of W&B's protobuf Records."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = folder.rglob("offline-run-*/run-*.wandb")
    buf, pos, block = path.read_bytes(), 7, 32768
    records, pending = [], b""
    while pos + 7 <= len(buf):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, n, kind = struct.unpack("<IHB", buf[pos:pos + 7])
        data, pos = buf[pos + 7:pos + 7 + n], pos + 7 + n
        if kind in (1, 2):
            pending = data
        elif kind in (3, 4):
            pending += data
        if kind in (1, 4):
            records.append(pending)
        elif kind == 0:
            break
    history: dict = {}
    for data in records:
        rec = pb.Record()
        rec.ParseFromString(data)
        if rec.WhichOneof("record_type") == "history":
            for item in rec.history.item:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                history.setdefault(key, []).append(json.loads(item.value_json))
    return history


def test_sft_lora_bf16_is_governed_and_reaches_tensorboard_mlflow_and_wandb(tmp_path):
    board = build_fake_board(tmp_path / "board", "jp6")
    out, tb = tmp_path / "out.json", tmp_path / "tb"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # MLflow 3 refuses the plain file store
    env = dict(os.environ, PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false")
    try:
        import wandb  # noqa: F401 - W&B in offline mode where it is installed (the finetune extra has it)

        env.update(WANDB_MODE="offline", WANDB_DIR=str(tmp_path / "wandb"), WANDB_PROJECT="pydvfs-sft",
                   WANDB_SILENT="true")
        (tmp_path / "wandb").mkdir()
    except ImportError:
        pass
    anim = animate(board, WAVES, rate_hz=1000, duration_s=900)
    try:
        res = subprocess.run([sys.executable, str(SCRIPT), str(board.root), str(out), str(STEPS), str(tb), uri],
                             capture_output=True, text=True, env=env, timeout=900, check=False, cwd=tmp_path)
    finally:
        anim.stop()
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads(out.read_text())
    r = data["report"]
    assert (board.read_hz("min_freq"), board.read_hz("max_freq")) == FULL and r["restored"]
    assert r["steps"] == STEPS and r["policy"] == "online"
    assert all(abs(b - mhz) < 0.5 for b, mhz in data["seen"])  # the clocks it chose reached the board
    # the workload it derived: the PeftModel's adapter and the Trainer's bf16 and batch size
    w = r["workload"]
    assert (w["model"], w["peft"], w["rank"], w["precision"], w["batch_size"]) == ("llama", "lora", 8, "bf16", 8)
    assert w["trainable_params"] == data["trainable"]
    # J/token from the real tokens the Trainer counted (padding excluded)
    assert r["tokens"] == data["tokens_seen"] > STEPS
    assert r["j_per_token"] == pytest.approx(r["module_energy_j"] / r["tokens"])
    assert r["tokens_per_j"] == pytest.approx(1 / r["j_per_token"])
    # the Trainer's own reporters, which come before user callbacks, got the numbers
    scalars = tensorboard_scalars(tb)
    for key in ("energy_j", "j_per_step", "j_per_token", "tokens_per_j", "power_w", "gpu_clock_mhz"):
        assert scalars.get(f"train/{key}"), (key, sorted(scalars))
    assert scalars["train/energy_j"] == sorted(scalars["train/energy_j"])  # an energy counter grows
    assert set(scalars["train/gpu_clock_mhz"]) <= set(r["search"]["levels_mhz"])
    metrics = mlflow_metrics(uri)
    for key in ("energy_j", "j_per_token", "gpu_clock_mhz", "power_w"):
        assert metrics.get(key), (key, sorted(metrics))
    assert metrics["energy_j"][-1] <= r["module_energy_j"]
    if "WANDB_DIR" in env:
        history = wandb_history(tmp_path / "wandb")
        for key in ("energy_j", "j_per_token", "gpu_clock_mhz"):
            assert history.get(f"train/{key}"), (key, sorted(history))
