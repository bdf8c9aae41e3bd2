"""A Hugging Face Trainer job with disable_tqdm=True (as on clusters, to keep logs clean) and
no Overtime call: a tiny GPT-2 made from a config, random tokens served 10 ms an example (a
slow collate), trained until JOB_UNTIL (a Unix time), then evaluated. Nothing is
downloaded."""

import os
import sys
import tempfile
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

until = float(os.environ["JOB_UNTIL"])


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        time.sleep(0.01)
        ids = torch.randint(0, 64, (16,))
        return {"input_ids": ids, "labels": ids}


class StopAt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if time.time() >= until:
            control.should_training_stop = True


model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))
with tempfile.TemporaryDirectory() as output:
    arguments = TrainingArguments(output_dir=output, disable_tqdm=True, max_steps=100000, per_device_train_batch_size=4,
                                  per_device_eval_batch_size=4, logging_steps=10, save_strategy="no", report_to=[],
                                  use_cpu=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=arguments, train_dataset=RandomTokens(100000), eval_dataset=RandomTokens(40),
                      callbacks=[StopAt()])
    trainer.train()
    print(trainer.evaluate(), flush=True)
print("job done", flush=True)
