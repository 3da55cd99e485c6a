#!/usr/bin/env python
"""Train a small character-level transformer language model on the simulated "tpu" device.

This is torchtpu's end-to-end "main job": an ordinary PyTorch training loop (embedding,
attention, MLP, LayerNorm, cross-entropy, backward, AdamW) run on ``device="tpu"``, followed
by a report of what the device did: chip, parameter count, loss curve, host wall time,
simulated HBM usage, native ops, CPU fallbacks and bytes transferred.

The training text is the documentation shipped with the repository (see ``load_corpus``), so
the example needs no download. The script exits with status 1 if the loss did not go down,
so that CI notices a device that computes wrong numbers.

    python examples/train.py                  # default run, about 1-2 minutes on a small CPU
    python examples/train.py --steps 20       # quick smoke test
    python examples/train.py --fallback warn  # also warn about every op that falls back
    python examples/train.py --compile        # the step compiled: torch.compile(backend="tpu")
    python examples/train.py --json report.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchtpu

# The repository root: this file lives in <root>/examples/.
REPO_ROOT = Path(__file__).resolve().parent.parent

# Below this many characters of documentation, more text sources are added (see load_corpus).
MIN_CORPUS_CHARS = 20_000

# How many steps are averaged for the "start" and "end" loss figures.
LOSS_WINDOW = 5


# ---------------------------------------------------------------------------------------------
# Data


def load_corpus(root: Path) -> tuple[str, list[Path]]:
    """Return the training text and the files it came from.

    Sources, in order, each added only while the text is still shorter than MIN_CORPUS_CHARS:
      1. every ``*.md`` under ``<root>/docs/`` plus ``<root>/README.md`` (always used);
      2. ``<root>/../shared/docs/*.md`` if that folder exists;
      3. the package's own Python sources (``torchtpu/*.py``, ``examples/*.py``),
         which always exist, so there is always something to train on.
    """
    tiers = [
        sorted((root / "docs").rglob("*.md")) + [root / "README.md"],
        sorted((root.parent / "shared" / "docs").glob("*.md")),
        sorted((root / "torchtpu").glob("*.py")) + sorted((root / "examples").glob("*.py")),
    ]
    parts: list[str] = []
    used: list[Path] = []
    for tier, paths in enumerate(tiers):
        if tier > 0 and sum(len(p) for p in parts) >= MIN_CORPUS_CHARS:
            break
        for path in paths:
            if path.is_file():
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
                used.append(path)
    return "\n\n".join(parts), used


class CharDataset:
    """The corpus as a tensor of character ids, with random (input, target) windows."""

    def __init__(self, text: str, context: int, seed: int):
        self.chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.data = torch.tensor([self.stoi[ch] for ch in text], dtype=torch.long)
        self.context = context
        if len(self.data) <= context + 1:
            raise SystemExit(f"corpus of {len(self.data)} characters is too short for --context {context}")
        # Batches are drawn on the host with their own generator, like a data loader would,
        # so the choice of windows does not depend on the device's random number stream.
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> list[int]:
        return [self.stoi[ch] for ch in s if ch in self.stoi]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def batch(self, batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` random windows: x = chars [i, i+T), y = chars [i+1, i+T+1)."""
        starts = torch.randint(len(self.data) - self.context - 1, (batch_size, 1), generator=self.generator)
        idx = starts + torch.arange(self.context + 1)  # (B, T+1) indices into the corpus
        window = self.data[idx]
        # One host->device copy per tensor, as with a pinned-memory data loader.
        return window[:, :-1].to(device), window[:, 1:].to(device)


# ---------------------------------------------------------------------------------------------
# Model: a decoder-only transformer in plain torch.nn


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t only sees positions <= t.

    Written out with matmuls, a mask and softmax (rather than F.scaled_dot_product_attention)
    so that the device runs each of these ops itself.
    """

    def __init__(self, d_model: int, n_heads: int, context: int):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by heads {n_heads}")
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)  # queries, keys and values in one matmul
        self.proj = nn.Linear(d_model, d_model)
        # mask[i, j] is True where query i must NOT see key j (j in the future).
        mask = torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, heads, T, head_dim)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)

        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, heads, T, T)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = weights @ v  # (B, heads, T, head_dim)

        out = out.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again
        return self.proj(out)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model: int, n_heads: int, context: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, context)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model),
            nn.GELU(),
            nn.Linear(4 * d_model, d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class CharTransformer(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, context: int):
        super().__init__()
        self.context = context
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context, d_model)  # learned absolute positions
        self.blocks = nn.ModuleList(Block(d_model, n_heads, context) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # Small normal weights and zero biases, as is usual for GPT-style models.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids (B, T) -> next-token logits (B, T, vocab)."""
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


@torch.no_grad()
def generate(model: CharTransformer, dataset: CharDataset, prompt: str, n_chars: int,
             device: torch.device, seed: int, temperature: float = 0.8) -> str:
    """Sample ``n_chars`` characters after ``prompt``, one forward pass per character.

    Sampling happens on the host with a fixed generator, so the samples are reproducible and
    do not consume the device's random numbers; only the last position's logits are copied.
    """
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    ids = dataset.encode(prompt) or [0]
    for _ in range(n_chars):
        window = torch.tensor([ids[-model.context:]], dtype=torch.long, device=device)
        logits = model(window)[0, -1].float().cpu()
        probs = F.softmax(logits / temperature, dim=-1)
        ids.append(int(torch.multinomial(probs, 1, generator=gen)))
    model.train(was_training)
    return dataset.decode(ids[len(dataset.encode(prompt)):])


# ---------------------------------------------------------------------------------------------
# Progress bar and report helpers


class ProgressBar:
    """A one-line progress bar redrawn in place with '\\r' (on stderr, so stdout stays clean)."""

    def __init__(self, total: int, width: int = 30, stream=sys.stderr):
        self.total = total
        self.width = width
        self.stream = stream
        self.start = time.perf_counter()
        # When the output is a log file rather than a terminal, redraw less often.
        self.every = 1 if stream.isatty() else 10
        self.visible = False

    def update(self, step: int, loss: float) -> None:
        if step % self.every and step != self.total:
            return
        elapsed = time.perf_counter() - self.start
        rate = step / elapsed if elapsed > 0 else 0.0
        filled = int(self.width * step / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r[{bar}] {step:>{len(str(self.total))}}/{self.total}"
                          f"  loss {loss:.4f}  {rate:.2f} steps/s ")
        self.stream.flush()
        self.visible = True

    def pause(self) -> None:
        """End the bar's line so other output starts on a fresh line."""
        if self.visible:
            self.stream.write("\n")
            self.stream.flush()
            self.visible = False


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def top(counts: dict[str, int], k: int = 10) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=150, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per step")
    p.add_argument("--context", type=int, default=64, help="sequence length in characters")
    p.add_argument("--d-model", type=int, default=64, help="embedding width")
    p.add_argument("--layers", type=int, default=2, help="transformer blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads per block")
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of model init and batches")
    p.add_argument("--device", default="tpu", help='device to train on ("tpu", "tpu:1", "cpu")')
    p.add_argument("--fallback", default="silent", choices=["warn", "silent", "error"],
                   help="what an op without a native TPU kernel does")
    p.add_argument("--sample-every", type=int, default=25, help="steps between text samples")
    p.add_argument("--sample-chars", type=int, default=80, help="characters per text sample")
    p.add_argument("--compile", action="store_true",
                   help='compile the training step with torch.compile(backend="tpu"): the model '
                        "(forward and backward graphs) and a capturable AdamW step, each graph "
                        "one program (docs/compiled-mode.md)")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")
    args = p.parse_args(argv)
    if args.steps < 2:
        p.error("--steps must be at least 2 to tell whether the loss went down")
    return args


# ---------------------------------------------------------------------------------------------
# Main


@dataclass
class Training:
    """What the training loop leaves for the report."""
    losses: list[float] = field(default_factory=list)
    train_seconds: float = 0.0   # host time spent in training steps only
    sample_seconds: float = 0.0  # host time spent generating samples
    wall_seconds: float = 0.0
    sample: str = ""


PROMPT = "The "


def set_up_device(args: argparse.Namespace) -> torch.device:
    """Device setup, then a clean slate for the counters and the peak-memory figures."""
    device = torch.device(args.device)
    torchtpu.set_fallback_mode(args.fallback)
    torch.manual_seed(args.seed)
    if device.type == "tpu":
        torch.tpu.set_device(device)
    torchtpu.metrics.reset()
    if device.type == "tpu":
        torch.tpu.reset_peak_memory_stats(device)
    return device


def build_model(args: argparse.Namespace, dataset: CharDataset, device: torch.device,
                compiled: bool):
    """The model, its optimizer, and the forward and optimizer step the loop calls (compiled
    with --compile on tpu); prints what was built."""
    model = CharTransformer(dataset.vocab_size, args.d_model, args.layers, args.heads, args.context)
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    # (capturable: the step counts stay on the device, so the whole update is one graph)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01,
                                  capturable=compiled)
    forward, optimizer_step = model, optimizer.step
    if compiled:
        forward = torch.compile(model, backend="tpu")
        optimizer_step = torch.compile(optimizer.step, backend="tpu")
    print(f"model: {n_params:,} parameters on {device} "
          f"(d_model {args.d_model}, {args.layers} layers, {args.heads} heads, context {args.context})")
    print(f"training: {args.steps} steps x {args.batch_size} x {args.context} tokens, "
          f"AdamW lr {args.lr}, fallback mode {torchtpu.get_fallback_mode()!r}")
    # A freshly initialized model predicts nearly uniformly, so its loss is near ln(vocab).
    print(f"(loss of a uniform guess: ln({dataset.vocab_size}) = {math.log(dataset.vocab_size):.4f})")
    return model, optimizer, forward, optimizer_step, n_params


def train(args, dataset, model, optimizer, forward, optimizer_step, device) -> Training | None:
    """The training loop, a sample every --sample-every steps; None if the loss is not finite."""
    run = Training()
    bar = ProgressBar(args.steps)
    wall_start = time.perf_counter()

    model.train()
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        x, y = dataset.batch(args.batch_size, device)
        logits = forward(x)
        loss = F.cross_entropy(logits.reshape(-1, dataset.vocab_size), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer_step()
        loss_value = loss.item()  # copies one number to the host, which also waits for the step
        run.train_seconds += time.perf_counter() - t0

        run.losses.append(loss_value)
        if not math.isfinite(loss_value):
            bar.pause()
            print(f"error: loss is {loss_value} at step {step}", file=sys.stderr)
            return None
        bar.update(step, loss_value)

        if step % args.sample_every == 0 or step == args.steps:
            t0 = time.perf_counter()
            run.sample = generate(model, dataset, PROMPT, args.sample_chars, device, seed=args.seed)
            run.sample_seconds += time.perf_counter() - t0
            bar.pause()
            print(f"step {step:>4} sample: {PROMPT + run.sample!r}")

    if device.type == "tpu":
        torch.tpu.synchronize(device)
    run.wall_seconds = time.perf_counter() - wall_start
    bar.pause()
    return run


def loss_windows(losses: list[float]) -> tuple[int, float, float]:
    """The window and the average loss of the first and last steps. The two windows never
    overlap (hence steps // 2)."""
    window = max(1, min(LOSS_WINDOW, len(losses) // 2))
    return window, sum(losses[:window]) / window, sum(losses[-window:]) / window


def report_of(args, device, run: Training, n_params: int, dataset: CharDataset,
              corpus_chars: int) -> dict:
    """The report's figures known after training (the chip, compiled, memory and estimate
    sections are added as they are printed)."""
    window, first_avg, last_avg = loss_windows(run.losses)
    losses = run.losses
    return {
        "device": str(device),
        "steps": args.steps,
        "tokens_per_step": args.batch_size * args.context,
        "parameters": n_params,
        "vocab_size": dataset.vocab_size,
        "corpus_chars": corpus_chars,
        "config": {k: v for k, v in vars(args).items() if k != "json"},
        "loss": {
            "first": losses[0], "last": losses[-1],
            f"first_{window}_avg": first_avg, f"last_{window}_avg": last_avg,
            "decreased": last_avg < first_avg, "history": losses,
        },
        "host_time": {
            "wall_s": run.wall_seconds, "train_s": run.train_seconds,
            "sample_s": run.sample_seconds, "steps_per_s": args.steps / run.train_seconds,
            "tokens_per_s": args.steps * args.batch_size * args.context / run.train_seconds,
        },
        "native_ops": torchtpu.metrics.native_ops(),
        "fallbacks": torchtpu.metrics.fallbacks(),
        "counters": torchtpu.metrics.counters(),
        "final_sample": PROMPT + run.sample,
    }


def print_device(report: dict, device: torch.device) -> None:
    if device.type == "tpu":
        props = torch.tpu.get_device_properties(device)
        report["chip"] = {
            "name": props.name, "chip": props.chip, "total_memory": props.total_memory,
            "mxu_dim": props.mxu_dim, "bf16_flops": props.bf16_flops,
            "hbm_bytes_per_s": props.hbm_bytes_per_s,
        }
        report["device_count"] = torch.tpu.device_count()
        print(f"device:              {device} = {torch.tpu.get_device_name(device)}")
        print(f"chip:                {props.chip}, HBM {fmt_bytes(props.total_memory)}, "
              f"MXU {props.mxu_dim}x{props.mxu_dim}, {props.bf16_flops / 1e12:g} bf16 TFLOP/s, "
              f"HBM bandwidth {props.hbm_bytes_per_s / 1e9:g} GB/s")
        print(f"devices:             {torch.tpu.device_count()}")
    else:
        print(f"device:              {device} (not a TPU: no chip or HBM figures)")


def print_compiled(report: dict) -> None:
    c = torchtpu.metrics.compiled()
    report["compiled"] = {k: c[k] for k in ("dynamo_graphs", "graphs", "programs",
                                            "program_runs", "runs_op_by_op", "compile_s")}
    print(f"compiled:            {c['dynamo_graphs']} Dynamo graphs, {c['programs']} programs "
          f"run {c['program_runs']} times without per-op dispatch, {c['runs_op_by_op']} "
          f"graph calls op by op, {c['compile_s']:.1f} s in the backend")


def print_steps_and_time(args, run: Training, report: dict) -> None:
    window, first_avg, last_avg = loss_windows(run.losses)
    print(f"steps:               {args.steps}")
    print(f"tokens per step:     {args.batch_size * args.context:,} "
          f"({args.batch_size} sequences x {args.context} characters)")
    print(f"loss at start:       {run.losses[0]:.4f}  (first {window} steps avg {first_avg:.4f})")
    print(f"loss at end:         {run.losses[-1]:.4f}  (last {window} steps avg {last_avg:.4f})")
    print(f"host wall time:      {run.wall_seconds:.1f} s total, {run.train_seconds:.1f} s "
          f"training, {run.sample_seconds:.1f} s sampling (measured on the host)")
    print(f"throughput:          {args.steps / run.train_seconds:.2f} steps/s, "
          f"{report['host_time']['tokens_per_s']:,.0f} tokens/s (measured on the host)")


def print_memory(report: dict, device: torch.device) -> None:
    peak = torch.tpu.max_memory_allocated(device)
    reserved = torch.tpu.memory_reserved(device)
    peak_reserved = torch.tpu.max_memory_reserved(device)
    report["memory"] = {"peak_allocated": peak, "reserved": reserved, "peak_reserved": peak_reserved}
    print(f"peak HBM allocated:  {fmt_bytes(peak)}")
    print(f"HBM reserved:        {fmt_bytes(reserved)} now, {fmt_bytes(peak_reserved)} at peak")


def print_ops_and_estimate(args, report: dict, device: torch.device) -> None:
    native, fallback = report["native_ops"], report["fallbacks"]
    total_native, total_fallback = sum(native.values()), sum(fallback.values())
    total_ops = total_native + total_fallback
    share = 100.0 * total_fallback / total_ops if total_ops else 0.0
    print(f"native TPU ops:      {total_native:,} calls of {len(native)} kinds")
    print(f"CPU fallbacks:       {total_fallback:,} calls of {len(fallback)} kinds "
          f"({share:.1f}% of op calls)")
    if device.type == "tpu":
        est = torchtpu.metrics.estimate()
        report["estimate"] = est
        print(f"estimated TPU time:  {est['device_time_s'] * 1e3:.1f} ms in {est['launches']:,} "
              f"launches, {est['device_time_s'] * 1e3 / args.steps:.3f} ms per step on "
              f"{est['chip']} (cost model, not measured; includes sampling)")


def print_report(args, device, run: Training, report: dict, compiled: bool, n_params: int) -> bool:
    """Prints the report (filling its device sections in) and the verdict; whether the loss
    decreased."""
    rule = "=" * 72
    print(rule)
    print("torchtpu training report")
    print(rule)
    print_device(report, device)
    print(f"model parameters:    {n_params:,}")
    if compiled:
        print_compiled(report)
    print_steps_and_time(args, run, report)
    if device.type == "tpu":
        print_memory(report, device)
    print_ops_and_estimate(args, report, device)
    print(rule)
    print(torchtpu.metrics.report(limit=10))
    print(rule)
    _, first_avg, last_avg = loss_windows(run.losses)
    decreased = last_avg < first_avg
    verdict = "OK: the loss decreased" if decreased else "FAIL: the loss did not decrease"
    print(f"{verdict} ({first_avg:.4f} -> {last_avg:.4f})")
    return decreased


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Keep stdout and the stderr progress bar in order when both go to the same log file.
    sys.stdout.reconfigure(line_buffering=True)
    device = set_up_device(args)

    text, sources = load_corpus(REPO_ROOT)
    dataset = CharDataset(text, args.context, args.seed)
    print(f"corpus: {len(text):,} characters from {len(sources)} file(s), vocabulary {dataset.vocab_size}")
    for path in sources:
        print(f"  {path.resolve()}")

    compiled = args.compile and device.type == "tpu"
    model, optimizer, forward, optimizer_step, n_params = build_model(args, dataset, device, compiled)
    run = train(args, dataset, model, optimizer, forward, optimizer_step, device)
    if run is None:
        return 1

    report = report_of(args, device, run, n_params, dataset, len(text))
    loss_decreased = print_report(args, device, run, report, compiled, n_params)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"report written to {args.json}")

    return 0 if loss_decreased else 1


if __name__ == "__main__":
    sys.exit(main())
