"""Runs vLLM's offline LLM.generate once, in this process, and prints one JSON line: the greedy
token ids per prompt, the platform, torchtpu's fallbacks, calls of vLLM's C++ ops with a tpu
tensor, per-request estimates and timings. The platform is chosen by the environment (vLLM's
``VLLM_TARGET_DEVICE=cpu`` for its CPU backend, else torchtpu's plugin), so each backend is its
own process (test/vllm/test_vllm_tpu.py, benchmarks/vllm.py).

Usage: python run_generate.py MODEL_DIR [--max-tokens N] [--prompts K] [--chunked N]
       [--prefix-caching] [--repeat-prefix] [--kv-bytes B] [--gpu-mem F]
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _watch_foreign_ops(seen: dict) -> None:
    """Counts every call of a non-PyTorch op (vLLM's C++ extension: torch.ops._C, ...) that is
    given a tpu tensor: torchtpu wraps each such op (torchtpu/_custom_ops.py)."""
    from torchtpu import _custom_ops

    for cls in (_custom_ops._ForeignOpOverload, _custom_ops._ForeignOpOverloadPacket):
        original = cls.__call__

        def call(self, *args, __original=original, **kwargs):
            if _custom_ops._has_tpu_tensor(args, kwargs):
                name = str(getattr(self, "_name", None) or self)
                seen[name] = seen.get(name, 0) + 1
            return __original(self, *args, **kwargs)

        cls.__call__ = call


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--chunked", type=int, default=0,
                    help="max_num_batched_tokens (chunked prefill)")
    ap.add_argument("--prefix-caching", action="store_true")
    ap.add_argument("--repeat-prefix", action="store_true",
                    help="every prompt twice, the second run hitting the prefix cache")
    ap.add_argument("--kv-bytes", type=int, default=0)
    ap.add_argument("--gpu-mem", type=float, default=0.0)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--tp", type=int, default=1, help="tensor_parallel_size")
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="above 0: sampled, seeded per request (top_p 0.9, top_k 20)")
    ap.add_argument("--compile", action="store_true",
                    help="vLLM's CPU backend compiled (its default); eager otherwise")
    return ap.parse_args()


def llm_kwargs(a) -> dict:
    """vLLM's LLM(...) arguments for the command line."""
    kwargs = dict(model=a.model, dtype="float32", seed=0, max_model_len=512,
                  max_num_seqs=a.max_num_seqs, enable_prefix_caching=a.prefix_caching)
    if a.chunked:
        kwargs.update(enable_chunked_prefill=True, max_num_batched_tokens=a.chunked)
    if a.tp > 1:
        kwargs["tensor_parallel_size"] = a.tp
    if not a.compile:
        kwargs["enforce_eager"] = True
    if a.kv_bytes:
        kwargs["kv_cache_memory_bytes"] = a.kv_bytes
    if a.gpu_mem:
        kwargs["gpu_memory_utilization"] = a.gpu_mem
    return kwargs


def sampling_params(a, prompts):
    from vllm import SamplingParams

    if a.temperature > 0:
        return [SamplingParams(temperature=a.temperature, top_p=0.9, top_k=20, seed=i,
                               max_tokens=a.max_tokens, ignore_eos=True)
                for i in range(len(prompts))]
    return SamplingParams(temperature=0.0, max_tokens=a.max_tokens, ignore_eos=True)


def tpu_figures(load_fallbacks: dict, foreign: dict) -> dict:
    """What torchtpu counted and estimated for the generation."""
    import torch
    import torchtpu
    import torchtpu.vllm as tv

    stats = tv.request_stats()
    return dict(
        eager_mode=torchtpu.get_eager_mode(),
        matmul_precision=torch.tpu.get_matmul_precision(),
        fallbacks={**load_fallbacks, **torchtpu.metrics.fallbacks()},
        foreign_op_calls=foreign,
        native_ops=len(torchtpu.metrics.native_ops()),
        estimate={c: torchtpu.metrics.estimate(chip=c)["device_time_s"]
                  for c in ("v5e", "v6e", "v7")},
        launches=torchtpu.metrics.estimate()["launches"],
        requests=len(stats),
        request_estimated_s={c: sum(r["estimated_s"].get(c, 0.0) for r in stats.values())
                             for c in ("v5e", "v6e", "v7")},
        kv_cache_bytes=int(torch.tpu.memory_allocated()),
        # v5e seconds of the launches that read and write the KV cache
        # (torchtpu/vllm/attention.py), and any generic index op on it
        cache_ops_v5e_s=sum(v for k, v in torchtpu.metrics.op_times(chip="v5e").items()
                            if "kv_cache" in k or "index_copy" in k),
        op_times_v5e=torchtpu.metrics.op_times(chip="v5e"),
        hbm_bytes=torch.tpu.get_device_properties(0).total_memory,
    )


def main() -> None:
    a = parse_args()

    from tiny_model import PROMPTS

    foreign: dict = {}
    on_tpu = os.environ.get("VLLM_TARGET_DEVICE") != "cpu"
    if on_tpu:
        import torchtpu

        _watch_foreign_ops(foreign)
        torchtpu.metrics.reset()
    from vllm import LLM, SamplingParams

    if not on_tpu and a.temperature > 0:
        # vLLM's CPU platform samples with its own C++ noise (forward_cpu); the reference for
        # tpu is vLLM's PyTorch sampler (forward_native, what every other platform runs).
        from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler

        TopKTopPSampler.forward_cpu = TopKTopPSampler.forward_native
    from vllm.platforms import current_platform

    t0 = time.perf_counter()
    llm = LLM(**llm_kwargs(a))
    t_load = time.perf_counter() - t0
    load_fallbacks = {}
    if on_tpu:
        # The estimates cover the generation (the load's profiling step is not a request's).
        load_fallbacks = torchtpu.metrics.fallbacks()
        torchtpu.metrics.reset()
    prompts = PROMPTS[: a.prompts]
    params = sampling_params(a, prompts)
    runs = 2 if a.repeat_prefix else 1
    tokens, t_gen = [], 0.0
    for _ in range(runs):
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        t_gen = time.perf_counter() - t0
        tokens.append([list(o.outputs[0].token_ids) for o in outs])
    if os.environ.get("TORCHTPU_VLLM_REQUEST_LOG"):
        # The workers log a request when vLLM reports it finished, at the next step: one more.
        llm.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
    result = {
        "platform": type(current_platform).__name__,
        "tokens": tokens[-1], "tokens_first_run": tokens[0],
        "load_s": t_load, "generate_s": t_gen,
        "generated": sum(len(t) for t in tokens[-1]),
        "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs),
        # Prompt tokens of the last run served from the prefix cache.
        "prefix_cache_hits": sum(o.num_cached_tokens or 0 for o in outs),
    }
    if on_tpu:
        result.update(tpu_figures(load_fallbacks, foreign))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
