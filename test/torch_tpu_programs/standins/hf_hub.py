"""Local stand-ins for the Hugging Face Hub checkpoints TorchTPU's programs download
(test/torch_tpu_programs/standins/README.md): tiny models of the same architecture with random
weights and a small byte-level BPE tokenizer with the model's special tokens and chat template,
written into a Hugging Face cache laid out as the Hub's download would leave it
(``$HF_HOME/hub/models--ORG--NAME/snapshots/COMMIT``). run.py points ``HF_HOME`` at it and sets
``HF_HUB_OFFLINE=1``, so ``from_pretrained("Qwen/Qwen3-0.6B")`` finds it without a network.

Text generated from random weights is not meaningful; the programs' own checks (shapes, that the
output starts with the prompt, CPU against TPU) are what they test.

Usage: python hf_hub.py HF_HOME [ORG/NAME ...]   (builds the stand-ins missing there; run.py runs
this for each program's stand-in).
"""
import json
import os
import sys

# A fixed revision name for the stand-ins' snapshot folders.
COMMIT = "0000000000000000000000000000000000057a4d"
# What the stand-ins' tokenizers are trained on (test/vllm/tiny_model.py's too, with a line of its own).
CORPUS = [
    "Hello, I am a language model running on a simulated TPU.",
    "Who are you? I am an assistant. How can I help you today?",
    "The quick brown fox jumps over the lazy dog.",
    "PyTorch tensors live on the device; matrices are multiplied on the MXU.",
    "Once upon a time there was a small model that generated text, one token at a time.",
]
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tokenizer(special, chat_template=None, corpus=CORPUS, **kwargs):
    """A byte-level BPE tokenizer of 400 tokens trained on `corpus`, with the `special` tokens (and
    `chat_template`); `kwargs` name its special tokens' roles (bos_token=..., eos_token=...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)
    if chat_template:
        fast.chat_template = chat_template
    return fast


def _qwen3(folder):
    import torch
    import transformers

    tok = tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], QWEN_CHAT_TEMPLATE,
                    eos_token="<|im_end|>", pad_token="<|endoftext|>")
    config = transformers.Qwen3Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        tie_word_embeddings=True, bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, dtype="bfloat16")
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id, do_sample=False)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


def _llama3_2_1b(folder):
    import torch
    import transformers

    # Untied embeddings, unlike the real checkpoint: hf_llama3_worker.py shards the embedding
    # and the output layer in two FSDP groups, which torch 2.13's fully_shard refuses for a tied
    # parameter on any device ("shared with a parameter already managed by another FSDP group").
    tok = tokenizer(["<|begin_of_text|>", "<|end_of_text|>"], bos_token="<|begin_of_text|>",
                    eos_token="<|end_of_text|>")
    config = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
        rope_theta=500000.0, tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, dtype="bfloat16")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, do_sample=False)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


def _resnet_50(folder):
    import transformers

    # A configuration only: the programs build the model from it (from_config), not weights.
    # ResNet-50's layout (bottleneck blocks, 1000 labels), narrower and one block per stage.
    config = transformers.ResNetConfig(
        embedding_size=16, hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 1, 1],
        layer_type="bottleneck", num_labels=1000)
    config.save_pretrained(folder)


# Hub id -> builder.
STANDINS = {"Qwen/Qwen3-0.6B": _qwen3, "meta-llama/Llama-3.2-1B": _llama3_2_1b,
            "microsoft/resnet-50": _resnet_50}


def snapshot(hf_home: str, repo_id: str) -> str:
    return os.path.join(hf_home, "hub", "models--" + repo_id.replace("/", "--"), "snapshots",
                        COMMIT)


def build(hf_home: str, repo_ids=None) -> None:
    """Writes each stand-in not yet in ``hf_home`` (a marker file says it is complete)."""
    for repo_id in repo_ids or STANDINS:
        folder = snapshot(hf_home, repo_id)
        marker = os.path.join(folder, "STANDIN.json")
        if os.path.exists(marker):
            continue
        os.makedirs(folder, exist_ok=True)
        STANDINS[repo_id](folder)
        refs = os.path.join(os.path.dirname(os.path.dirname(folder)), "refs")
        os.makedirs(refs, exist_ok=True)
        with open(os.path.join(refs, "main"), "w") as f:
            f.write(COMMIT)
        with open(marker, "w") as f:
            json.dump({"repo_id": repo_id, "standin": "random weights, tiny config",
                       "made_by": "test/torch_tpu_programs/standins/hf_hub.py"}, f)


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2:] or None)
    print("built", ", ".join(sys.argv[2:] or STANDINS), "in", sys.argv[1])
