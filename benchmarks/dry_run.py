"""Dry run of a Llama-style training step larger than this machine would hold with values
(docs/insight.md, "Dry runs").

A 1.1B-parameter Llama (TinyLlama's shape: 22 layers, hidden 2048, MLP 5632, 32 heads with 4
key/value heads, vocabulary 32000), bf16 weights, one training step (forward with labels,
backward, AdamW) on sequences of 2048 tokens, run in ``torchtpu.dry_run()``: tensors without
values, every op charged to the cost model, with the simulated HBM set to 192 GiB (v7's) so the
step completes whatever chip is compared. Prints, for each chip, the estimated step time, the
bottleneck and whether the HBM peak fits; and what the dry run cost this host (wall time, host
memory growth). Writes results/dry_run.json and results/dry_run.png.

    python benchmarks/dry_run.py [--layers 22] [--batch 1] [--seq 2048] [--chips v5e,v6e,v7]

Its estimates alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py dry_run: the step dry-run again, its host figures kept).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

# The run itself simulates the largest HBM of the chips compared (v7's 192 GiB) unless told
# otherwise, so that the step completes and its peak can be compared with each chip's HBM.
os.environ.setdefault("TORCHTPU_HBM_BYTES", str(192 * 2**30))

import torch  # noqa: E402

import torchtpu  # noqa: E402
from common import machine, plot, write_json  # noqa: E402


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def llama_config(layers: int, seq: int):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                       num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=4,
                       max_position_embeddings=seq, rms_norm_eps=1e-5, tie_word_embeddings=False)


def training_step(config, batch: int, seq: int) -> dict:
    """One bf16 training step in a dry run; returns what the run measured on this host."""
    from transformers import LlamaForCausalLM

    rss0, t0 = rss_bytes(), time.perf_counter()
    with torchtpu.dry_run():
        with torch.device("tpu"):
            model = LlamaForCausalLM(config).to(torch.bfloat16)
        params = sum(p.numel() for p in model.parameters())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, config.vocab_size, (batch, seq), device="tpu")
        torch.tpu.reset_peak_memory_stats()
        torchtpu.metrics.reset()
        t1 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_wall = time.perf_counter() - t1
        peak = torch.tpu.max_memory_allocated()
    return {"parameters": params, "host_wall_s": time.perf_counter() - t0,
            "host_wall_step_s": step_wall, "host_rss_growth_bytes": rss_bytes() - rss0,
            "hbm_peak_bytes": peak, "tokens": batch * seq,
            "dry_run_ops": torchtpu.metrics.counters().get("dry_run.ops", 0)}


def reprice(payload: dict) -> dict:
    """The estimates per chip recomputed for the recorded configuration (the step dry-run again);
    what the first run cost this host (wall time, memory growth) kept."""
    from torchtpu.__main__ import PRICES_PER_CHIP_HOUR, estimate_run

    cfg = payload["config"]
    run = training_step(llama_config(cfg["layers"], cfg["seq"]), cfg["batch"], cfg["seq"])
    payload["run"]["hbm_peak_bytes"] = run["hbm_peak_bytes"]
    chips = [c for c in cfg["chips"].split(",") if c]
    payload["chips"] = estimate_run(chips, PRICES_PER_CHIP_HOUR, run["tokens"], "tokens")
    return payload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=22)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--chips", default="v5e,v6e,v7")
    args = p.parse_args()
    from torchtpu.__main__ import PRICES_PER_CHIP_HOUR, estimate_run

    config = llama_config(args.layers, args.seq)
    print(f"dry run: Llama training step, {args.layers} layers, batch {args.batch} x "
          f"{args.seq} tokens, bf16, AdamW, on the simulated {torchtpu._C.chip()['name']} ...",
          flush=True)
    run = training_step(config, args.batch, args.seq)
    chips = [c for c in args.chips.split(",") if c]
    rows = estimate_run(chips, PRICES_PER_CHIP_HOUR, run["tokens"], "tokens")
    print(f"{run['parameters'] / 1e9:.2f}B parameters, {run['dry_run_ops']} ops; this host: "
          f"{run['host_wall_s']:.1f} s (the step {run['host_wall_step_s']:.1f} s), "
          f"host memory growth {run['host_rss_growth_bytes'] / 2**30:.2f} GiB")
    print(f"{'chip':<5} {'step (est.)':>12} {'MXU util':>8} {'bound':>6} {'HBM peak':>10} "
          f"{'HBM':>8} {'fits':>5} {'tokens/s':>9}")
    for r in rows:
        print(f"{r['chip']:<5} {r['device_time_s'] * 1e3:>9.1f} ms {r['mxu_utilisation']:>8.1%} "
              f"{r['bottleneck']:>6} {r['peak_memory_bytes'] / 2**30:>6.2f} GiB "
              f"{r['hbm_capacity_bytes'] / 2**30:>4.0f} GiB {'yes' if r['fits_in_hbm'] else 'NO':>5} "
              f"{r['tokens_per_s']:>9.0f}")
    payload = {"machine": machine(), "config": vars(args), "run": run, "chips": rows}
    write_json("dry_run", payload)

    def draw(plt):
        fig, ax = plt.subplots(figsize=(7, 4))
        names = [r["chip"] for r in rows]
        terms = ["mxu", "vpu", "hbm", "launch"]
        bottom = [0.0] * len(rows)
        for t in terms:
            vals = [r["terms_s"][t] * 1e3 for r in rows]
            ax.bar(names, vals, bottom=bottom, label=f"{t} time (sum over launches)")
            bottom = [b + v for b, v in zip(bottom, vals)]
        for i, r in enumerate(rows):
            ax.text(i, bottom[i], f"step {r['device_time_s'] * 1e3:.0f} ms\n"
                    f"peak {r['peak_memory_bytes'] / 2**30:.1f}/{r['hbm_capacity_bytes'] / 2**30:.0f} GiB",
                    ha="center", va="bottom", fontsize=8)
        ax.set_ylabel("estimated ms")
        ax.set_title(f"{run['parameters'] / 1e9:.1f}B Llama training step (seq {args.seq}), dry run")
        ax.set_ylim(0, max(bottom) * 1.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig

    plot("dry_run", draw)


if __name__ == "__main__":
    main()
