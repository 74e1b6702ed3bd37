"""GovernorCallback in a real Lightning Trainer (a small model on CPU) on a fake Orin: clock
changes reach the board, energy_j / j_per_step / gpu_clock_mhz reach the loggers, and the board
is restored after fitting and after an exception."""
from __future__ import annotations

import csv
import time

import pytest

L = pytest.importorskip("lightning")
torch = pytest.importorskip("torch")

from pydvfs.integrations.lightning import GovernorCallback  # noqa: E402

FULL = (306000000, 1300500000)


class Tiny(L.LightningModule):
    def __init__(self, fail_at: int | None = None):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        self.fail_at = fail_at
        self.seen = []

    def training_step(self, batch, batch_idx):
        if self.fail_at is not None and batch_idx == self.fail_at:
            raise RuntimeError("boom in training_step")
        time.sleep(0.002)
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        gov = self.trainer.callbacks[0].governor
        self.seen.append((gov.dev.state().max_mhz, gov.current_mhz))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def loader():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    ds = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    return torch.utils.data.DataLoader(ds, batch_size=4)


@pytest.fixture
def orin(powered_orin):
    return powered_orin


def trainer(tmp_path, cb, steps):
    return L.Trainer(max_steps=steps, accelerator="cpu", devices=1, callbacks=[cb], enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=5,
                     logger=L.pytorch.loggers.CSVLogger(str(tmp_path / "logs"), name="run"),
                     default_root_dir=str(tmp_path))


def test_lightning_fit_is_governed_logged_and_restored(orin, tmp_path):
    cb = GovernorCallback(sysfs_root=orin.root, start_mhz=1300.5, log=None,
                          window={"min_window_s": 0.03, "min_steps": 3, "settle_s": 0.0})
    model = Tiny()
    trainer(tmp_path, cb, 120).fit(model, loader())
    r = cb.report
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL and r["restored"]
    assert r["steps"] == 120 and r["probed"] and r["module_energy_j"] >= r["cpu_gpu_energy_j"] > 0
    # the current loop calls the callbacks' hook before the module's: the clock was on the board
    assert len(model.seen) == 120 and all(abs(b - m) < 0.5 for b, m in model.seen)
    assert len({m for _, m in model.seen}) >= 2
    with open(next((tmp_path / "logs").rglob("metrics.csv"))) as fh:
        rows = list(csv.DictReader(fh))
    logged = [row for row in rows if row.get("energy_j")]
    assert len(logged) >= 10
    assert all(float(row["gpu_clock_mhz"]) in r["search"]["levels_mhz"] for row in logged)
    assert float(logged[-1]["energy_j"]) <= r["module_energy_j"]  # the module's, by default


def test_an_exception_in_training_restores_the_board(orin, tmp_path):
    cb = GovernorCallback(sysfs_root=orin.root, start_mhz=714, log=None)
    with pytest.raises(RuntimeError, match="boom"):
        trainer(tmp_path, cb, 100).fit(Tiny(fail_at=20), loader())
    assert (orin.read_hz("min_freq"), orin.read_hz("max_freq")) == FULL
    assert cb.report["restored"] and cb.report["steps"] == 20
