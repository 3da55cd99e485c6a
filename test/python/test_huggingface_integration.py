"""Hugging Face code on "tpu" with no settings, as on CUDA: a Trainer places its model and batches
on tpu:0 (Accelerate's device choice) and trains like the CPU; a pipeline keeps its model on tpu.
Whole models: test/models/ (the zoos); diffusers and PEFT: test_diffusers.py, test_peft.py."""
import pytest
import torch

import torchtpu


TRAINER = """
import json, os, sys, torch, torchtpu
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
torchtpu.set_eager_mode(sys.argv[2])
cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64, hidden_dropout_prob=float(sys.argv[4]),
                 attention_probs_dropout_prob=float(sys.argv[4]))
torch.manual_seed(0)
model = BertForSequenceClassification(cfg)
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, 100, (16, 8), generator=g)


class Data(torch.utils.data.Dataset):
    def __len__(self): return 16
    def __getitem__(self, i): return {"input_ids": ids[i], "labels": torch.tensor(i % 2)}
args = TrainingArguments(output_dir=sys.argv[3], per_device_train_batch_size=4, max_steps=3,
                         report_to=[], save_strategy="no", use_cpu=sys.argv[1] == "cpu")
trainer = Trainer(model=model, args=args, train_dataset=Data())
loss = trainer.train().training_loss
print(json.dumps({"args": str(args.device), "accelerator": str(trainer.accelerator.device),
                  "model": str(next(trainer.model.parameters()).device), "loss": loss,
                  "weight": trainer.model.classifier.weight.detach().cpu().sum().item()}))
"""


@pytest.mark.one_tier("Accelerate's choice of device; training in every mode is the zoo smoke's")
def test_a_trainer_trains_on_tpu_with_no_settings(tmp_path):
    # transformers put the model on tpu:0 but Accelerate left the batches on the CPU ("Expected
    # all tensors to be on the same device ... tpu:0 and cpu") unless ACCELERATE_TORCH_DEVICE
    # was set. use_cpu=True must still mean the CPU.
    import json
    import subprocess
    import sys

    def run(where, dropout="0.0"):
        proc = subprocess.run([sys.executable, "-c", TRAINER, where, torchtpu.get_eager_mode(),
                               str(tmp_path / where), dropout], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # Without dropout: with it, the CPU run draws dropout masks and the sampler's seed from one
    # generator and the tpu run from two (the device's and the CPU's), as on CUDA.
    tpu, cpu = run("tpu"), run("cpu")
    assert tpu["args"] == tpu["accelerator"] == tpu["model"] == "tpu:0", tpu
    assert cpu["args"] == cpu["accelerator"] == cpu["model"] == "cpu", cpu
    # the same three steps (float32 matmuls at the default precision: bf16 passes on the MXU)
    assert tpu["loss"] == pytest.approx(cpu["loss"], rel=1e-3)
    assert tpu["weight"] == pytest.approx(cpu["weight"], rel=1e-3, abs=1e-3)


def test_a_pipeline_keeps_its_model_on_tpu(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer, pipeline

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "tpu"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = BertTokenizer(str(tmp_path / "vocab.txt"))
    cfg = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=64)
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg).eval()
    want = pipeline("text-classification", model=model, tokenizer=tok, device="cpu")("hello tpu")
    pipe = pipeline("text-classification", model=model, tokenizer=tok, device="tpu")
    assert next(pipe.model.parameters()).device == torch.device("tpu", 0)
    got = pipe("hello tpu")
    assert got[0]["label"] == want[0]["label"]
    assert got[0]["score"] == pytest.approx(want[0]["score"], rel=1e-3)
    assert next(pipe.model.parameters()).device == torch.device("tpu", 0)  # still there
