"""A real TRL SFTTrainer run with a PEFT LoRA adapter on a small decoder (Llama-shaped, built from a
config, random weights; the BPE tokenizer pydvfs trains offline on the shipped GLUE sentences),
in bf16 autocast on the CPU, under pydvfs.integrations.hf.GovernorCallback on a fake board, with
the Trainer's own TensorBoard and MLflow reporters. Run by test_sft.py as a child process:

    python sft_train.py SYSFS_ROOT OUT_JSON STEPS TENSORBOARD_DIR MLFLOW_URI

With WANDB_DIR set (and WANDB_MODE=offline), W&B reports too. It writes OUT_JSON with the callback's report, the Trainer's log history and the board's clock
after every step next to the clock the governor says it set. The callback is given to the
Trainer like any user callback: nothing orders it before the reporters by hand."""
from __future__ import annotations

import json
import os
import sys

import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from transformers import TrainerCallback
from trl import SFTConfig, SFTTrainer

from pydvfs.integrations.hf import GovernorCallback
from pydvfs.workloads import glue, models, sft


class Watch(TrainerCallback):
    def __init__(self, cb: GovernorCallback, out: dict):
        self.cb, self.out = cb, out

    def on_step_end(self, args, state, control, **kwargs):
        gov = self.cb.governor
        self.out["seen"].append([gov.dev.state().max_mhz, gov.current_mhz])


def main() -> int:
    root, path, steps, tb_dir, mlflow_uri = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    os.environ.update(TENSORBOARD_LOGGING_DIR=tb_dir, MLFLOW_TRACKING_URI=mlflow_uri,
                      MLFLOW_EXPERIMENT_NAME="pydvfs-sft")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokenizer = models.build_tokenizer(512)
    model = models.build_causal_lm(models.model_spec("llama-tiny"), tokenizer.vocab_size, tokenizer.pad_token_id,
                                   max_positions=128)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                             task_type="CAUSAL_LM"))
    rows = glue.read_split("sst2", "train")[:512]
    cb = GovernorCallback(sysfs_root=root, start_mhz=1300.5, rate_hz=1000,
                          window={"min_window_s": 0.05, "min_steps": 3, "settle_s": 0.0})
    out = {"seen": []}
    args = SFTConfig(output_dir=os.path.join(os.path.dirname(path), "sft-out"), max_steps=steps,
                     per_device_train_batch_size=8, logging_steps=5, save_strategy="no", max_length=64,
                     report_to=["tensorboard", "mlflow"] + (["wandb"] if os.environ.get("WANDB_DIR") else []), use_cpu=True, bf16=True, disable_tqdm=True,
                     dataloader_num_workers=0)
    trainer = SFTTrainer(model=model, args=args, processing_class=tokenizer, callbacks=[cb],
                         train_dataset=Dataset.from_dict({"text": sft.sft_texts("sst2", rows)}))
    trainer.add_callback(Watch(cb, out))
    trainer.train()
    out.update(report=cb.report, log_history=trainer.state.log_history,
               tokens_seen=trainer.state.num_input_tokens_seen,
               trainable=sum(p.numel() for p in model.parameters() if p.requires_grad))
    with open(path, "w") as fh:
        json.dump(out, fh, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
