"""A real transformers.Trainer fine-tuning a tiny BERT (built from a config, random weights, CPU)
under pydvfs.integrations.hf.GovernorCallback on a fake board. Run by test_hf.py as a child
process: python hf_train.py SYSFS_ROOT OUT_JSON MODE STEPS (MODE: normal | raise | sigterm).

It writes OUT_JSON with the callback's report, the Trainer's log history and, after every step,
the board's max_freq next to the clock the governor says it set."""
from __future__ import annotations

import json
import os
import signal
import sys
import time

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from pydvfs.integrations.hf import GovernorCallback


class Rows(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int = 24, vocab: int = 512):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, vocab, (n, seq), generator=g)
        self.lengths = torch.randint(8, seq + 1, (n,), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        mask = (torch.arange(self.ids.shape[1]) < self.lengths[i]).long()
        return {"input_ids": self.ids[i] * mask, "attention_mask": mask, "labels": self.labels[i]}


class Watch(TrainerCallback):
    """After the governor's own on_step_end: what the board holds."""

    def __init__(self, gov_cb: GovernorCallback, root: str, mode: str, out: dict, path: str):
        self.cb, self.mode, self.out, self.path = gov_cb, mode, out, path

    def on_step_end(self, args, state, control, **kwargs):
        gov = self.cb.governor
        self.out["seen"].append([gov.dev.state().max_mhz, gov.current_mhz])
        if state.global_step == 30 and self.mode != "normal":
            write(self.path, self.out)
            if self.mode == "raise":
                raise RuntimeError("boom in the training loop")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)


def write(path: str, out: dict) -> None:
    with open(path + ".tmp", "w") as fh:
        json.dump(out, fh, default=str)
    os.replace(path + ".tmp", path)


def main() -> int:
    root, path, mode, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    torch.manual_seed(0)
    config = BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=64, num_labels=2)
    model = BertForSequenceClassification(config)
    cb = GovernorCallback(sysfs_root=root, start_mhz=1300.5, rate_hz=1000,
                          window={"min_window_s": 0.05, "min_steps": 3, "settle_s": 0.0})
    out = {"seen": []}
    args = TrainingArguments(output_dir=os.path.join(os.path.dirname(path), "hf-out"), max_steps=steps,
                             per_device_train_batch_size=8, logging_steps=10, save_strategy="no",
                             report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=Rows(256), callbacks=[cb])
    trainer.add_callback(Watch(cb, root, mode, out, path))
    t0 = time.monotonic_ns()
    trainer.train()
    out.update(report=cb.report, log_history=trainer.state.log_history, t_ns=[t0, time.monotonic_ns()])
    write(path, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
