"""Where the time goes on a TPU, from a CPU (docs/insight.md).

1. trains a small transformer a few steps on "tpu" under torch.profiler with the TPU activity:
   the device timeline (one event per launch, its estimated duration) and the ops that take the
   most device time; the trace goes to a file Perfetto opens;
2. prices the same run for several TPU generations, after the fact;
3. dry-runs a model 100 times larger (no values, no host memory) and says, per chip, how long its
   training step would take and whether it fits in HBM.

    python examples/estimate_chips.py [--trace trace.json] [--chips v5e,v6e,v7]
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torchtpu


def encoder(d_model: int, layers: int, ff: int) -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(d_model, nhead=max(1, d_model // 64),
                                             dim_feedforward=ff, batch_first=True)
    return torch.nn.Sequential(torch.nn.TransformerEncoder(layer, layers),
                               torch.nn.Linear(d_model, 1000))


def train_steps(model, batch, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dtype = next(model.parameters()).dtype
    x = torch.randn(batch, 128, model[1].in_features, device="tpu", dtype=dtype)
    y = torch.randint(0, 1000, (batch * 128,), device="tpu")
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default="tpu_trace.json", help="Chrome/Perfetto trace to write")
    p.add_argument("--chips", default="v5e,v6e,v7")
    args = p.parse_args()
    chips = args.chips.split(",")
    torch.manual_seed(0)

    print("1. profiling 3 training steps of a small encoder (d 256, 2 layers) on tpu ...")
    model = encoder(256, 2, 1024).to("tpu")
    train_steps(model, 8, 1)  # warm up
    torch.tpu.synchronize()
    torchtpu.metrics.reset()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.TPU],
                 profile_memory=True) as prof:
        loss = train_steps(model, 8, 3)
        torch.tpu.synchronize()
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=8))
    prof.export_chrome_trace(args.trace)
    print(f"   device timeline written to {args.trace} (open it at ui.perfetto.dev); "
          f"loss {loss.item():.3f}")

    print("\n2. the same launches priced for each chip, after the fact:")
    for chip in chips:
        e = torchtpu.metrics.estimate(chip=chip)
        print(f"   {chip:<4} {e['device_time_s'] * 1e3:8.3f} ms over {e['launches']} launches, "
              f"{e['fraction_of_peak']:.1%} of peak, bottleneck {e['bottleneck']}")

    print("\n3. dry run: the same step for an encoder of d 2048, 24 layers (1.2B parameters, "
          "bf16) ...")
    t0 = time.perf_counter()
    with torchtpu.dry_run():
        with torch.device("tpu"):
            big = encoder(2048, 24, 8192).to(torch.bfloat16)
        params = sum(p.numel() for p in big.parameters())
        torch.tpu.reset_peak_memory_stats()
        torchtpu.metrics.reset()
        try:
            train_steps(big, 8, 1)
        except torch.OutOfMemoryError as e:  # as the chip would: the step does not fit its HBM
            print(f"   out of memory on the simulated {torchtpu._C.chip()['name']}: "
                  f"{str(e).splitlines()[0][:120]}")
        peak = torch.tpu.max_memory_allocated()
    print(f"   {params / 1e9:.2f}B parameters, estimated in {time.perf_counter() - t0:.1f} s on "
          f"this host, HBM peak {peak / 2**30:.1f} GiB")
    known = {c["name"]: c for c in torchtpu._C.all_chips()}
    for chip in chips:
        e = torchtpu.metrics.estimate(chip=chip)
        fits = "fits" if peak <= known[chip]["hbm_bytes"] else "does NOT fit"
        print(f"   {chip:<4} step {e['device_time_s'] * 1e3:9.1f} ms, "
              f"{e['fraction_of_peak']:.1%} of peak; {fits} in {known[chip]['hbm_bytes'] / 2**30:.0f} GiB")


if __name__ == "__main__":
    main()
