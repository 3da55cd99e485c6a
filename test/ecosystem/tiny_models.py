"""Tiny causal language models for the library tiers, made offline: a config class, random
weights from a seed and a small byte-level BPE tokenizer trained here (no network, no Hub).

``build(folder, arch)`` writes one into ``folder`` (once) and returns the folder, which
transformers (and TRL, which loads a reference model by path) open with ``from_pretrained``.
"""
import os

CORPUS = [
    "Hello, I am a language model running on a simulated TPU.",
    "Who are you? I am an assistant. How can I help you today?",
    "The quick brown fox jumps over the lazy dog.",
    "Rewards are compared within a group of completions of one prompt.",
    "Once upon a time there was a small model that learned from its own samples.",
    "Weights are quantized to eight or four bits and multiplied on the MXU.",
]

PROMPTS = [
    "Hello, I am",
    "The quick brown fox",
    "Who are you?",
    "Once upon a time",
]


def build(folder: str, arch: str = "qwen2", seed: int = 0) -> str:
    if os.path.exists(os.path.join(folder, "config.json")):
        return folder
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    os.makedirs(folder, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                                eos_token="</s>", pad_token="<pad>")
    common = dict(vocab_size=len(fast), hidden_size=64, intermediate_size=128,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=256, tie_word_embeddings=False,
                  bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                  pad_token_id=fast.pad_token_id, dtype="float32")
    if arch == "qwen2":
        config, cls = transformers.Qwen2Config(**common), transformers.Qwen2ForCausalLM
    else:
        config, cls = transformers.LlamaConfig(head_dim=16, **common), transformers.LlamaForCausalLM
    torch.manual_seed(seed)
    model = cls(config)
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
