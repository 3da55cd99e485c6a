"""A tiny Llama written to a local folder, with no network: a config, random weights (seed 0,
float32) and a small byte-level BPE tokenizer trained here by the tokenizer builder of
test/torch_tpu_programs/standins/hf_hub.py (its Hub stand-ins' corpus and a line about vLLM).
vLLM and transformers load it by path.

Usage: python tiny_model.py FOLDER [--sliding-window N]
"""
import argparse
import importlib.util
import json
import os


def _hf_hub():
    """test/torch_tpu_programs/standins/hf_hub.py, imported by its path (its folder holds
    stand-in packages that must not shadow real ones on sys.path)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "torch_tpu_programs",
                        "standins", "hf_hub.py")
    spec = importlib.util.spec_from_file_location("hf_hub", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Prompts of mixed lengths (the tests' and the benchmark's).
PROMPTS = [
    "Hello, I am",
    "The quick brown fox jumps over the lazy dog. Once upon a time",
    "Who are you?",
    "PyTorch tensors live on the device; matrices are multiplied on the MXU. vLLM pages",
    "Once",
    "How can I help you today? I am an assistant running on a simulated TPU, one token",
    "The lazy dog",
    "A small model that generated text",
]


def build(folder: str, sliding_window: int | None = None) -> str:
    """Writes the model into folder (once) and returns folder."""
    marker = os.path.join(folder, "config.json")
    if os.path.exists(marker):
        return folder
    import torch
    import transformers

    os.makedirs(folder, exist_ok=True)
    hf_hub = _hf_hub()
    corpus = hf_hub.CORPUS + [
        "vLLM pages its key-value cache in blocks and schedules requests in batches."]
    fast = hf_hub.tokenizer(["<s>", "</s>"], corpus=corpus, bos_token="<s>", eos_token="</s>")
    common = dict(
        vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
        tie_word_embeddings=False, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, initializer_range=0.08, dtype="float32")
    if sliding_window:
        config = transformers.MistralConfig(sliding_window=sliding_window, **common)
        cls = transformers.MistralForCausalLM
    else:
        config = transformers.LlamaConfig(**common)
        cls = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    model = cls(config)
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, do_sample=False)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def hf_greedy(folder: str, prompts, max_tokens: int) -> list[list[int]]:
    """transformers' greedy generate on the CPU: the new token ids per prompt (no EOS stop)."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    out = []
    for p in prompts:
        ids = tok(p, return_tensors="pt").input_ids
        gen = model.generate(ids, max_new_tokens=max_tokens, min_new_tokens=max_tokens,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
        out.append(gen[0, ids.shape[1]:].tolist())
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--sliding-window", type=int, default=None)
    a = ap.parse_args()
    print(json.dumps({"folder": build(a.folder, a.sliding_window)}))
