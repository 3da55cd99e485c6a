"""A tiny GRPO run of TRL (GRPOTrainer) on one device, in a process of its own; prints one JSON
line: the completions of every step, the logged metrics, a checksum of the trained weights, the
fallbacks and native ops torchtpu counted.

    python run_grpo.py MODEL_DIR --device tpu|cpu [--steps N] [--beta B]

On "tpu", TORCHTPU_FALLBACK=error (set by the caller) makes any CPU fallback an error. The
eager mode is TORCHTPU_EAGER_MODE. Both generators are seeded again at the start of each step
(Reseed): PyTorch's DataLoader draws its base seed from the CPU generator when an epoch's
iterator is made, which on the CPU moves the stream the samples are drawn from and on tpu does
not (as on CUDA); seeded at each step, both devices sample from the same state.
"""
import argparse
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
p = argparse.ArgumentParser()
p.add_argument("model")
p.add_argument("--device", default="tpu")
p.add_argument("--steps", type=int, default=3)
p.add_argument("--beta", type=float, default=0.04)
p.add_argument("--out", default=None)
a = p.parse_args()

import torch  # noqa: E402

import torchtpu  # noqa: E402,F401
import torchtpu.metrics  # noqa: E402

torch.set_float32_matmul_precision("highest")  # compared with the CPU's float32
import datasets  # noqa: E402
import transformers  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_models import PROMPTS  # noqa: E402

transformers.logging.set_verbosity_error()
tok = transformers.AutoTokenizer.from_pretrained(a.model)
model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
completions = []


def reward_length(completions_text=None, completions=None, **kw):
    """Prefers completions of 12 characters: a reward with spread, computed on the host."""
    texts = completions if completions is not None else completions_text
    return [-abs(12 - len(t)) / 12.0 for t in texts]


def reward_ids(completion_ids=None, **kw):
    """Records the sampled token ids (and rewards an even first token)."""
    completions.append([list(map(int, c)) for c in completion_ids])
    return [1.0 if c and c[0] % 2 == 0 else 0.0 for c in completion_ids]


class Reseed(transformers.TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        torch.manual_seed(1000 + state.global_step)  # (seeds the CPU's and the tpu generators)


args = GRPOConfig(
    output_dir=os.path.join(a.out or "/tmp", f"grpo-{a.device}"), per_device_train_batch_size=4,
    num_generations=4, max_completion_length=10, max_steps=a.steps, logging_steps=1,
    report_to="none", use_cpu=a.device == "cpu", seed=0, learning_rate=5e-3,
    save_strategy="no", dataloader_num_workers=0, bf16=False, disable_tqdm=True,
    beta=a.beta, temperature=0.9, top_k=50, top_p=0.95)
ds = datasets.Dataset.from_dict({"prompt": PROMPTS * 4})
trainer = GRPOTrainer(model=model, reward_funcs=[reward_length, reward_ids], args=args,
                      train_dataset=ds, processing_class=tok, callbacks=[Reseed()])
torchtpu.metrics.reset()
trainer.train()
params = {n: p.detach().cpu() for n, p in trainer.model.named_parameters()}
logs = [{k: v for k, v in h.items() if isinstance(v, (int, float)) and "time" not in k
         and "per_second" not in k} for h in trainer.state.log_history]
print("RESULT " + json.dumps({
    "device": str(next(trainer.model.parameters()).device),
    "completions": completions,
    "logs": logs,
    "param_sums": {n: float(t.double().sum()) for n, t in params.items()},
    "param_abs_sums": {n: float(t.double().abs().sum()) for n, t in params.items()},
    "param_numel": {n: t.numel() for n, t in params.items()},
    "fallbacks": torchtpu.metrics.fallbacks(),
    "native_multinomial": sum(v for k, v in torchtpu.metrics.native_ops().items()
                              if k.startswith("aten::multinomial")),
    "eager_mode": torchtpu.get_eager_mode(),
}), flush=True)
