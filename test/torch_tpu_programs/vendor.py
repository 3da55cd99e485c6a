"""Vendors Google TorchTPU's programs into third_party/torch_tpu_programs/ byte for byte and
writes SOURCES.md there (repository, path, commit, SHA-256 of each file).

    python test/torch_tpu_programs/vendor.py [--from build/torch_tpu_ref]

The source folder is a copy of files of TorchTPU's public repository at their repository paths,
with ``.sources.tsv`` listing ``path<TAB>commit<TAB>sha256<TAB>status`` for each (how the copy
was made is outside this repository). Copied: the programs test/torch_tpu_programs/programs.py
names, the modules and data files they read (HELPERS below) and the LICENSE; not TorchTPU's
package (torch_tpu/ other than its docs' notebooks), build files or tests. Each file's SHA-256
is checked against the list before it is copied.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import programs as programs_mod  # noqa: E402

DEST = os.path.join(REPO, "third_party", "torch_tpu_programs")
REPOSITORY = "jonathan1920/torch_tpu"
# Modules and data the programs import or read (beside the programs themselves).
HELPERS = [
    "docs/notebooks/tpu_utils.py",
    "torch_tpu/docs/notebooks/tpu_utils.py",
    "examples/paths.py",
    "examples/tutorials/distributed/hello_world_distributed.py",
    "examples/tutorials/distributed/run_script.py",
    "examples/tutorials/distributed/hello_world_distributed_run_script.py",
    "examples/tutorials/distributed/run_hello_world_distributed.py",
    "examples/resnet/impl/resnet.py",
    "examples/deepseek/model.py",
    "examples/mingpt/impl/__init__.py",
    "examples/mingpt/impl/mingpt.py",
    "examples/mingpt/impl/mingpt_jax.py",
    "examples/mingpt/impl/trainer.py",
    "examples/mingpt/impl/utils.py",
    "examples/mingpt/impl/README",
    "examples/mingpt/mingpt_runner_lib.py",
    "examples/ops_and_kernels/pallas_add.py",
    "examples/ops_and_kernels/torch_pallas_add.py",
    "examples/huggingface_transformers/model_configs.py",
    "examples/huggingface_transformers/generate.py",
    "examples/gemma4/tpu_attention.py",
    "examples/qwen3/impl/qwen3.py",
    "examples/llama3/impl/llama3_2.py",
    "examples/distributed/data_parallel/dp_utils.py",
    "examples/distributed/data_parallel/simple_model.py",
    "examples/distributed/data_parallel/manual/launch.py",
    "examples/distributed/data_parallel/wrapped/launch.py",
    "examples/gemma4/model.py",
    "examples/gemma4/model_baseline.py",
    "examples/gemma4/splash_attention.py",
    "examples/distributed/fsdp/model.py",
    "examples/distributed/tensor_parallel/manual/model.py",
    "examples/distributed/tensor_parallel/dtensor_wrapped/model.py",
]
HELPER_DIRS = ["examples/huggingface_transformers/model_configs/"]


def wanted(listed: dict) -> list[str]:
    paths = {"LICENSE"}
    paths.update(p.path for p in programs_mod.PROGRAMS)
    paths.update(HELPERS)
    for d in HELPER_DIRS:
        paths.update(p for p in listed if p.startswith(d))
    return sorted(paths)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", default=os.path.join(REPO, "build", "torch_tpu_ref"))
    args = ap.parse_args()
    listed = {}
    with open(os.path.join(args.src, ".sources.tsv")) as f:
        for line in f:
            if line.strip():
                path, commit, sha, status = line.rstrip("\n").split("\t")
                listed[path] = (commit, sha, status)
    rows, missing = [], []
    for path in wanted(listed):
        if path not in listed:
            missing.append(path)
            continue
        commit, sha, status = listed[path]
        src = os.path.join(args.src, path)
        data = open(src, "rb").read()
        if hashlib.sha256(data).hexdigest() != sha or status != "ok":
            sys.exit(f"{path}: the copy does not match its listed SHA-256 ({status})")
        dst = os.path.join(DEST, path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
        rows.append((path, commit, sha))
    with open(os.path.join(DEST, "SOURCES.md"), "w") as f:
        f.write(
            "# Google TorchTPU's programs, vendored\n\n"
            "Tutorials, notebooks and examples of Google's TorchTPU, copied byte for byte from the "
            f"public repository `{REPOSITORY}` at the paths they have there, to run unmodified on "
            "torchtpu (`python test/torch_tpu_programs/run.py`; which programs and how: "
            "test/torch_tpu_programs/programs.py; results: docs/coming-from-torchtpu.md, "
            "\"TorchTPU's own programs\"). Written by test/torch_tpu_programs/vendor.py, which "
            "checks each file's SHA-256 below before copying it. Only the programs and the "
            "modules and data files they read; not TorchTPU's package.\n\n"
            "Licenses: `LICENSE` is the repository's: Apache-2.0 for every file, except "
            "`examples/mingpt/impl/*`, under the MIT license (Copyright (c) 2020 Andrej "
            "Karpathy), whose text is the second part of the same file.\n\n"
            "Each file is listed with the commit of the repository its bytes were taken from "
            "(files come from different commits: each as the copy found it).\n\n"
            f"Repository: `{REPOSITORY}` (GitHub)\n\n"
            "| path | commit | SHA-256 |\n|---|---|---|\n")
        for path, commit, sha in rows:
            f.write(f"| `{path}` | `{commit}` | `{sha}` |\n")
    print(f"vendored {len(rows)} files into {os.path.relpath(DEST, REPO)}")
    if missing:
        print("not in the source copy:", *missing, sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
