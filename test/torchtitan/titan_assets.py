"""Stand-ins for the test assets TorchTitan's PyPI wheel does not ship.

TorchTitan's llama3 debug configuration (``--module llama3 --config llama3_debugmodel``) reads a
tokenizer from ``hf_assets_path`` (``./tests/assets/tokenizer`` in TorchTitan's repository: a
``tokenizer.json`` and a ``tokenizer_config.json``) and the dataset ``c4_test``
(``./tests/assets/c4_test``: JSON lines with a ``"text"`` field, read by
``datasets.load_dataset(path, split="train")``). ``write(folder)`` makes both under ``folder``:

- ``tokenizer/``: a byte-level BPE tokenizer trained with the ``tokenizers`` library on the
  corpus below, 2,000 entries (the debug model's vocabulary is 2,048), with Llama 3's
  ``<|begin_of_text|>`` and ``<|end_of_text|>`` as its BOS and EOS tokens;
- ``c4_test/data.json``: ``DOCS`` synthetic documents of seeded random English-like sentences.

Both are deterministic (a fixed seed), so every run of a test reads the same tokens. Pass
``--hf_assets_path FOLDER/tokenizer --dataloader.dataset_path FOLDER/c4_test`` to TorchTitan.
"""
import json
import os
import random

VOCAB = 2000
DOCS = 600
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"

_SUBJECTS = ["the chip", "a model", "the compiler", "each rank", "the optimizer", "a kernel",
             "the scheduler", "our team", "the dataset", "every layer", "the host", "a tensor"]
_VERBS = ["reads", "writes", "shards", "gathers", "reduces", "trains", "compiles", "measures",
          "streams", "caches", "splits", "checks", "moves", "scales", "predicts", "fuses"]
_OBJECTS = ["the weights", "a batch of tokens", "its gradients", "the attention scores",
            "one more step", "the learning rate", "a shard of memory", "the loss curve",
            "every activation", "the vocabulary", "a small matrix", "the next word"]
_TAILS = ["before noon", "on every step", "in bfloat16", "across two chips", "without a copy",
          "with care", "as expected", "twice as fast", "at full precision", "in one launch",
          "after the warmup", "for the benchmark"]


def _sentence(rng: random.Random) -> str:
    s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    if rng.random() < 0.6:
        s += f" {rng.choice(_TAILS)}"
    if rng.random() < 0.3:
        s += f", then {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    if rng.random() < 0.2:
        s += f" {rng.randint(2, 4096)} times"
    return s[0].upper() + s[1:] + "."


def documents(n: int = DOCS, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(rng.randint(4, 16))) for _ in range(n)]


def _write_tokenizer(folder: str, docs: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(docs, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=[BOS, EOS], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True,
                   "add_eos_token": False, "model_max_length": 131072}, f)


def write(folder: str) -> dict:
    """Writes ``tokenizer/`` and ``c4_test/`` under ``folder`` (once); returns their paths."""
    tok_dir, data_dir = os.path.join(folder, "tokenizer"), os.path.join(folder, "c4_test")
    data = os.path.join(data_dir, "data.json")
    if not (os.path.exists(os.path.join(tok_dir, "tokenizer.json")) and os.path.exists(data)):
        docs = documents()
        _write_tokenizer(tok_dir, docs)
        os.makedirs(data_dir, exist_ok=True)
        with open(data + ".tmp", "w") as f:
            for i, d in enumerate(docs):
                f.write(json.dumps({"text": d, "id": i}) + "\n")
        os.replace(data + ".tmp", data)
    return {"tokenizer": tok_dir, "dataset": data_dir}


if __name__ == "__main__":
    import sys
    print(json.dumps(write(sys.argv[1] if len(sys.argv) > 1 else "build/titan-assets")))
