"""Calibration: the cost model's estimates against published measurements of real TPUs
(docs/insight.md, "Calibration").

Each row is a training step that Google published a measured step time for (MaxText recipes
and MLPerf logs, sources named below). The same model (a Hugging Face config of the same shape)
is run here for one chip's share of the step: the whole model on the chip's own batch (the
published runs shard weights and optimizer state across chips with FSDP, which moves the same
FLOPs per chip), bf16, forward with labels, backward, AdamW, in a dry run (no values, so 70B and
175B models run on this machine). The ratio is estimated / measured step time.

What the estimate leaves out or adds (why the ratio is not 1): collectives (FSDP all-gathers
and reduce-scatters; the published runs overlap most of them), rematerialisation (MaxText
recomputes parts of the forward pass; that adds FLOPs to the measured step), and element-wise
work run as separate eager ops (each through HBM; MaxText fuses it). Attention is torchtpu's
fused kernel (scaled_dot_product_attention's overrideable backend: the score matrix stays in
VMEM, as in MaxText's flash attention). So the estimate is of the same work run as eager
PyTorch ops with fused attention, not of MaxText's compiled program. float32 matmuls (where a
model upcasts) run at one bf16 pass, as JAX runs them on TPUs by default
(torch.set_float32_matmul_precision("medium"); PyTorch's default "highest" would price six).

    python benchmarks/calibration.py [--only NAME] [--layers-scale 1.0]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
# The whole model's step on one chip does not fit any chip's HBM (the published runs shard it):
# the dry run simulates a large HBM so the step completes; only its time is compared.
os.environ.setdefault("TORCHTPU_HBM_BYTES", str(32 * 2**40))

import torch  # noqa: E402

import torchtpu  # noqa: E402
from common import machine, plot, write_json  # noqa: E402

RECIPES = "github.com/AI-Hypercomputer/tpu-recipes"

# name, chip, model, per-chip batch x sequence, measured seconds per step, source.
MEASUREMENTS = [
    dict(name="llama3.1-8b-v6e", chip="v6e", model="llama3.1-8b", batch=3, seq=8192,
         measured_s=3.393,
         source=f"{RECIPES} training/trillium/Llama3.1-8B-MaxText/v6e-16 (16 chips, "
                "per-device batch 3, bf16): 3.393 s/step"),
    dict(name="llama2-70b-v6e", chip="v6e", model="llama2-70b", batch=2, seq=4096,
         measured_s=9.052,
         source=f"{RECIPES} training/trillium/Llama2-70B-MaxText (v6e-256, 2,097,152 tokens "
                "per step = 2 x 4096 per chip, bf16): 9.052 s/step"),
    dict(name="gpt3-175b-v6e", chip="v6e", model="gpt3-175b", batch=3, seq=2048,
         measured_s=17.18,
         source=f"{RECIPES} training/trillium/GPT3-175B-MaxText/bf16 (v6e-256, per-device "
                "batch 3, bf16): 17.18 s/step"),
    dict(name="llama3.1-70b-v7", chip="v7", model="llama3.1-70b", batch=4, seq=8192,
         measured_s=12.20,
         source=f"{RECIPES} training/ironwood (64 chips, global batch 256 x 8192, bf16): "
                "12.20 s/step"),
    dict(name="gpt3-175b-v5p", chip="v5p", model="gpt3-175b", batch=4, seq=2048,
         measured_s=22.20,
         source=f"{RECIPES} training/v5p/GPT3-175B-MaxText (v5p-1024 = 512 chips, 4,194,304 "
                "tokens per step = 4 x 2048 per chip; its MLPerf run used int8): 22.20 s/step"),
    dict(name="llama2-70b-v5p", chip="v5p", model="llama2-70b", batch=1, seq=4096,
         measured_s=4096 / 692,
         source="github.com/AI-Hypercomputer/maxtext docs/reference/models/tiering.md "
                "(v5p-1024, seq 4096, bf16): 692 tokens/s/chip, i.e. 5.92 s per 4096 tokens"),
]


def config_of(model: str):
    from transformers import GPT2Config, LlamaConfig

    if model == "llama3.1-8b":
        return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                           num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                           max_position_embeddings=8192, rope_theta=500000.0,
                           tie_word_embeddings=False)
    if model == "llama3.1-70b":
        return LlamaConfig(vocab_size=128256, hidden_size=8192, intermediate_size=28672,
                           num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                           max_position_embeddings=8192, rope_theta=500000.0,
                           tie_word_embeddings=False)
    if model == "llama2-70b":
        return LlamaConfig(vocab_size=32000, hidden_size=8192, intermediate_size=28672,
                           num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                           max_position_embeddings=4096, tie_word_embeddings=False)
    if model == "gpt3-175b":
        return GPT2Config(vocab_size=50304, n_positions=2048, n_embd=12288, n_layer=96,
                          n_head=96, n_inner=4 * 12288, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0)
    raise ValueError(model)


def step_estimate(m: dict) -> dict:
    from transformers import AutoModelForCausalLM

    config = config_of(m["model"])
    t0 = time.perf_counter()
    with torchtpu.dry_run():
        with torch.device("tpu"):
            model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
        params = sum(p.numel() for p in model.parameters())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, config.vocab_size, (m["batch"], m["seq"]), device="tpu")
        torchtpu.metrics.reset()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        est = torchtpu.metrics.estimate(chip=m["chip"])
        del model, opt, loss, ids
    torch.tpu.empty_cache()
    tokens = m["batch"] * m["seq"]
    return {**m, "parameters": params, "estimated_s": est["device_time_s"],
            "ratio": est["device_time_s"] / m["measured_s"],
            "estimated_mxu_s": est["mxu_time_s"], "flops": est["flops"],
            "six_n_flops": 6.0 * params * tokens, "bottleneck": est["bottleneck"],
            "host_wall_s": time.perf_counter() - t0}


def main() -> None:
    torch.set_float32_matmul_precision("medium")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="run the measurements whose name contains this")
    args = p.parse_args()
    rows = []
    todo = [m for m in MEASUREMENTS if not args.only or args.only in m["name"]]
    for i, m in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] {m['name']}: {m['model']}, batch {m['batch']} x {m['seq']} on "
              f"{m['chip']} (dry run) ...", flush=True)
        r = step_estimate(m)
        rows.append(r)
        print(f"    estimated {r['estimated_s']:.2f} s, measured {r['measured_s']:.2f} s, "
              f"ratio {r['ratio']:.2f} ({r['bottleneck']}-bound; MXU terms alone "
              f"{r['estimated_mxu_s']:.2f} s; host {r['host_wall_s']:.0f} s)", flush=True)
    print(f"\n{'measurement':<18} {'chip':<4} {'params':>7} {'tokens':>7} {'estimated':>10} "
          f"{'measured':>9} {'ratio':>6}")
    for r in rows:
        print(f"{r['name']:<18} {r['chip']:<4} {r['parameters'] / 1e9:>6.1f}B "
              f"{r['batch'] * r['seq']:>7} {r['estimated_s']:>8.2f} s {r['measured_s']:>7.2f} s "
              f"{r['ratio']:>6.2f}")
    write_json("calibration", {"rows": rows})

    def draw(plt):
        fig, ax = plt.subplots(figsize=(8, 4))
        names = [r["name"] for r in rows]
        ax.barh(names, [r["ratio"] for r in rows], color="C0",
                label="whole step (eager ops, estimated / measured)")
        ax.barh(names, [r["estimated_mxu_s"] / r["measured_s"] for r in rows], color="C1",
                height=0.4, label="MXU terms only / measured")
        ax.axvline(1.0, color="k", lw=1)
        ax.set_xlabel("estimated / measured step time")
        ax.set_title("Cost model against published TPU measurements")
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig

    plot("calibration", draw)


if __name__ == "__main__":
    main()
