"""vLLM on "tpu" (torchtpu/vllm/) against vLLM's CPU backend and transformers' generate.

Runs in the virtual environment scripts/test_vllm.sh makes (vLLM is not installed beside the
main environment); skipped where vLLM is not importable. Each vLLM run is a process of its own
(test/vllm/run_generate.py): the platform is chosen once per process, by the environment.
Marker ``vllm``; ``-m "vllm and smoke"`` is the short case.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("vllm")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tiny_model import PROMPTS, build, hf_greedy  # noqa: E402

pytestmark = pytest.mark.vllm
KV = str(64 << 20)  # bytes of KV cache for runs that set it explicitly
MAX_TOKENS = 64


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("tiny-llama")))


@pytest.fixture(scope="session")
def window_model_dir(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("tiny-mistral-sw8")), sliding_window=8)


def run(model, *args, cpu=False, mode="strict", timeout=900):
    env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TORCHTPU_FALLBACK="error")
    if cpu:
        env["VLLM_TARGET_DEVICE"] = "cpu"
    else:
        env.pop("VLLM_TARGET_DEVICE", None)
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "run_generate.py"), model, *args],
        env=env, capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"no result (exit {proc.returncode}):\n{proc.stderr[-6000:]}")


_cache = {}


def cpu_reference(model, *args):
    key = (model, args)
    if key not in _cache:
        _cache[key] = run(model, *args, cpu=True)
        assert _cache[key]["platform"] == "CpuPlatform"
    return _cache[key]


def check_tpu_run(r, n_requests):
    assert r["platform"] == "TpuPlatform"
    assert r["fallbacks"] == {}, r["fallbacks"]
    # No vLLM C++ op (torch.ops._C...) was ever handed a tpu tensor.
    assert r["foreign_op_calls"] == {}, r["foreign_op_calls"]
    assert r["requests"] == n_requests
    for chip in ("v5e", "v6e", "v7"):
        total, per_request = r["estimate"][chip], r["request_estimated_s"][chip]
        assert 0 < per_request <= total * (1 + 1e-9)
        assert per_request > 0.9 * total  # the steps are nearly all of the run's launches
    assert r["estimate"]["v5e"] > r["estimate"]["v6e"] > r["estimate"]["v7"]


@pytest.mark.smoke
def test_generate_strict_equals_cpu(model_dir):
    cpu = cpu_reference(model_dir, "--kv-bytes", KV, "--prompts", "4", "--max-tokens", "16")
    tpu = run(model_dir, "--kv-bytes", KV, "--prompts", "4", "--max-tokens", "16")
    check_tpu_run(tpu, 4)
    assert tpu["tokens"] == cpu["tokens"]


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_generate_equals_cpu_and_transformers(model_dir, mode):
    cpu = cpu_reference(model_dir, "--kv-bytes", KV)
    tpu = run(model_dir, "--kv-bytes", KV, mode=mode)
    assert tpu["eager_mode"] == mode
    check_tpu_run(tpu, len(PROMPTS))
    assert len(tpu["tokens"]) == 8 and all(len(t) == MAX_TOKENS for t in tpu["tokens"])
    assert tpu["tokens"] == cpu["tokens"]
    assert tpu["tokens"] == hf_greedy(model_dir, PROMPTS, MAX_TOKENS)


def test_kv_cache_sized_from_hbm(model_dir):
    tpu = run(model_dir, "--gpu-mem", "0.01", "--prompts", "4", "--max-tokens", "16")
    check_tpu_run(tpu, 4)
    requested = 0.01 * tpu["hbm_bytes"]
    # The KV cache is what is left of 1% of the simulated HBM after the weights and a
    # profiling step: most of it (the tiny model's weights are under 2 MiB).
    assert 0.5 * requested < tpu["kv_cache_bytes"] <= requested
    cpu = cpu_reference(model_dir, "--kv-bytes", KV, "--prompts", "4", "--max-tokens", "16")
    assert tpu["tokens"] == cpu["tokens"]


def test_chunked_prefill_equals_cpu(model_dir):
    cpu = cpu_reference(model_dir, "--kv-bytes", KV)
    tpu = run(model_dir, "--kv-bytes", KV, "--chunked", "16")
    check_tpu_run(tpu, len(PROMPTS))
    assert tpu["tokens"] == cpu["tokens"]
    # Chunks of 16 tokens: prompts longer than that took several steps each.
    assert max(len(p) for p in PROMPTS) > 16


def test_prefix_caching_equals_cpu(model_dir):
    cpu = cpu_reference(model_dir, "--kv-bytes", KV)
    tpu = run(model_dir, "--kv-bytes", KV, "--prefix-caching", "--repeat-prefix")
    check_tpu_run(tpu, 2 * len(PROMPTS))
    assert tpu["tokens_first_run"] == cpu["tokens"]
    assert tpu["tokens"] == cpu["tokens"]  # the second run, its prompts' blocks cached
    assert tpu["prefix_cache_hits"] > 0


def test_sliding_window_equals_cpu_and_transformers(window_model_dir):
    cpu = cpu_reference(window_model_dir, "--kv-bytes", KV, "--max-tokens", "32")
    tpu = run(window_model_dir, "--kv-bytes", KV, "--max-tokens", "32")
    check_tpu_run(tpu, len(PROMPTS))
    assert tpu["tokens"] == cpu["tokens"]
    assert tpu["tokens"] == hf_greedy(window_model_dir, PROMPTS, 32)


def test_sampled_equals_cpu_native_sampler(model_dir):
    # Seeded per request; the device generator draws the CPU's numbers for a seed, so vLLM's
    # PyTorch sampler gives the same tokens on tpu as on the CPU (run_generate.py sets the CPU
    # backend to that sampler: its own default draws noise in C++).
    args = ("--kv-bytes", KV, "--temperature", "0.8", "--max-tokens", "16")
    cpu = cpu_reference(model_dir, *args)
    tpu = run(model_dir, *args, mode="fused")
    check_tpu_run(tpu, len(PROMPTS))
    assert tpu["tokens"] == cpu["tokens"]
    greedy = cpu_reference(model_dir, "--kv-bytes", KV)
    assert tpu["tokens"] != [t[:16] for t in greedy["tokens"]]  # sampling changed something


def test_tensor_parallel_2_ranks_equals_cpu(model_dir, tmp_path):
    # Two worker processes (vLLM's multiprocessing executor), one simulated chip each, the
    # device groups over torchtpu's "tpu_dist"; each rank logs its requests' estimates.
    cpu = cpu_reference(model_dir, "--kv-bytes", KV)
    log = tmp_path / "requests.jsonl"
    os.environ["TORCHTPU_VLLM_REQUEST_LOG"] = str(log)
    try:
        tpu = run(model_dir, "--kv-bytes", KV, "--tp", "2")
    finally:
        del os.environ["TORCHTPU_VLLM_REQUEST_LOG"]
    assert tpu["platform"] == "TpuPlatform"
    assert tpu["tokens"] == cpu["tokens"]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted({r["rank"] for r in rows}) == [0, 1]
    assert sum(r["rank"] == 0 for r in rows) == len(PROMPTS)
    for row in rows:
        assert row["estimated_s"]["v5e"] > 0 and row["tokens"] >= MAX_TOKENS


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url, body, stream=False):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        if not stream:
            return json.loads(resp.read())
        chunks = []
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
        return chunks


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_openai_server_completions(model_dir, tmp_path, mode):
    from transformers import AutoTokenizer

    cpu = cpu_reference(model_dir, "--kv-bytes", KV, "--prompts", "4", "--max-tokens", "16")
    tok = AutoTokenizer.from_pretrained(model_dir)
    port = _free_port()
    request_log = tmp_path / "requests.jsonl"
    env = dict(os.environ, TORCHTPU_FALLBACK="error", TORCHTPU_EAGER_MODE=mode,
               HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
               TORCHTPU_VLLM_REQUEST_LOG=str(request_log))
    env.pop("VLLM_TARGET_DEVICE", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
         "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
         "--max-model-len", "512", "--kv-cache-memory-bytes", KV, "--seed", "0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5):
                    break
            except OSError:
                assert server.poll() is None, server.stdout.read()[-6000:]
                assert time.time() < deadline, "server did not start"
                time.sleep(1)
        with urllib.request.urlopen(base + "/v1/models", timeout=30) as resp:
            models = json.loads(resp.read())
        assert models["data"][0]["id"] == model_dir
        for i in range(4):
            want = cpu["tokens"][i]
            body = {"model": model_dir, "prompt": PROMPTS[i], "max_tokens": 16,
                    "temperature": 0.0, "ignore_eos": True, "return_token_ids": True}
            got = _post(base + "/v1/completions", body)
            assert got["choices"][0]["token_ids"] == want
            assert got["usage"]["completion_tokens"] == 16
            # The text is the tokens' decoding (vLLM holds back an incomplete UTF-8 tail).
            assert tok.decode(want).startswith(got["choices"][0]["text"])
            chunks = _post(base + "/v1/completions", dict(body, stream=True), stream=True)
            assert len(chunks) > 1
            streamed = [t for c in chunks for ch in c["choices"] for t in ch.get("token_ids") or []]
            assert streamed == want
            assert "".join(ch["text"] for c in chunks for ch in c["choices"]) \
                == got["choices"][0]["text"]
        # Each finished request's estimated TPU time, written by the engine's worker when vLLM
        # reports the request finished (the next step): all but the last of the 8.
        rows = [json.loads(line) for line in request_log.read_text().splitlines()]
        assert len(rows) >= 7
        for row in rows:
            assert row["tokens"] >= 16 and row["steps"] >= 16
            assert row["estimated_s"]["v5e"] > row["estimated_s"]["v6e"] > 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
