"""vLLM serving on "tpu" (docs/ecosystem.md, "vLLM"), with what a TPU would take per request.

Run it with the Python of the environment vLLM is installed in (scripts/test_vllm.sh makes
build/venv-vllm):

    build/venv-vllm/bin/python examples/vllm_serve.py [--model DIR] [--eager-mode fused]
    build/venv-vllm/bin/python examples/vllm_serve.py --serve     # the OpenAI-compatible server

1. offline: ``LLM.generate`` on tpu (torchtpu's vLLM platform is picked up by itself), then per
   request the estimated device time on v5e, v6e and v7 (torchtpu.vllm.request_stats()) and the
   run's estimated tokens/s per chip;
2. ``--serve``: starts ``vllm.entrypoints.openai.api_server`` on 127.0.0.1, asks it for a
   completion and a streamed one, and stops it.

Without --model, a tiny random Llama is written to a temporary folder (test/vllm/tiny_model.py),
so nothing is downloaded; its text is gibberish, its tokens are those of vLLM's CPU backend.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "vllm"))


def offline(model: str, prompts: list[str], max_tokens: int) -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: its metrics
    import torchtpu
    import torchtpu.vllm
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, dtype="float32", max_model_len=512,
              kv_cache_memory_bytes=64 << 20, seed=0)
    torchtpu.vllm.request_stats(reset=True)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=max_tokens))
    host_s = time.perf_counter() - t0
    stats = torchtpu.vllm.request_stats()
    generated = sum(len(o.outputs[0].token_ids) for o in outs)
    print(f"\n{len(outs)} requests, {generated} tokens in {host_s:.2f} s on this host "
          f"(eager mode {torchtpu.get_eager_mode()}, fallbacks {torchtpu.metrics.fallbacks()})")
    print(f"{'request':>8} {'scheduled tokens':>16}  "
          "estimated device time: v5e / v6e / v7   text")
    for o in outs:
        # vLLM's engine knows a request by its id with a suffix of its own.
        s = next(v for k, v in stats.items()
                 if k == o.request_id or k.startswith(o.request_id + "-"))
        est = " / ".join(f"{s['estimated_s'][c] * 1e3:.2f} ms" for c in ("v5e", "v6e", "v7"))
        print(f"{o.request_id:>8} {s['tokens']:>16}  {est}   {o.outputs[0].text[:30]!r}")
    for chip in ("v5e", "v6e", "v7"):
        total = sum(s["estimated_s"][chip] for s in stats.values())
        print(f"estimated on one {chip}: {generated / total:,.0f} tokens/s")


def serve(model: str, prompt: str, port: int) -> None:
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "512", "--kv-cache-memory-bytes", str(64 << 20)]
    server = subprocess.Popen(cmd, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/health", timeout=5).close()
                break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit("the server stopped")
                time.sleep(1)
        body = {"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0.0}
        req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        print("completion:", json.loads(urllib.request.urlopen(req).read())["choices"][0])
        req = urllib.request.Request(base + "/v1/completions",
                                     json.dumps(dict(body, stream=True)).encode(),
                                     {"Content-Type": "application/json"})
        print("streamed:", end=" ")
        for raw in urllib.request.urlopen(req):
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                print(repr(json.loads(line[6:])["choices"][0]["text"]), end=" ", flush=True)
        print()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="a local model folder (default: a tiny random Llama)")
    ap.add_argument("--eager-mode", choices=["strict", "debug", "fused"])
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--port", type=int, default=8321)
    a = ap.parse_args()
    if a.eager_mode:
        os.environ["TORCHTPU_EAGER_MODE"] = a.eager_mode
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    from tiny_model import PROMPTS, build

    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or build(os.path.join(tmp, "tiny-llama"))
        if a.serve:
            serve(model, PROMPTS[0], a.port)
        else:
            offline(model, PROMPTS, a.max_tokens)


if __name__ == "__main__":
    main()
