"""When may a failure on "tpu" be excused because PyTorch fails the same way on the CPU?

The compiled tiers (the model zoos' compiled mode, test/models/zoo_compare.py; the OpInfo
sweep's compiled tier, test/opinfo/test_opinfo.py) compare a "tpu" run against the same code compiled on the CPU by
PyTorch's own `aot_eager` backend. Where that CPU run raises, a "tpu" error is PyTorch's (Dynamo,
AOTAutograd, a meta kernel), not torchtpu's, only if it is the same failure: the same exception
type and the same message once what legitimately differs between the two runs is normalized (the
device and backend names, object addresses, the source lines Dynamo appends). Any other "tpu"
error is a failure of its own, whatever the CPU did.
"""
from __future__ import annotations

import re

# Dynamo appends the user's frames and hints after the message proper; they name files and lines
# of the run, not the failure.
_TRAILERS = ("\n\nfrom user code:", "\nfrom user code:", "\n\nSet TORCHDYNAMO_VERBOSE",
             "\nSet TORCHDYNAMO_VERBOSE", "\n\nFor more information", "\nSet TORCH_LOGS",
             "\n\nYou can suppress this exception")
_NORMALIZE = (
    # (the backend's name before the devices': backend='tpu' is a backend)
    (re.compile(r"backend=['\"]?[\w.]+['\"]?"), "backend=<backend>"),
    (re.compile(r"\baot_eager\b"), "<backend>"),
    # a fake or real tensor's repr names its device unless it is the CPU: "device='tpu:0', "
    (re.compile(r"\bdevice=['\"][\w:]+['\"],?\s*"), ""),
    (re.compile(r"\b(?:tpu|privateuse1|privateuseone|cpu|meta)(?::\d+)?\b", re.I), "<device>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"\s+"), " "),
)


def normalized_message(error: BaseException) -> str:
    text = str(error)
    for trailer in _TRAILERS:
        if trailer in text:
            text = text[: text.index(trailer)]
    for pattern, repl in _NORMALIZE:
        text = pattern.sub(repl, text)
    return text.strip()


def same_failure(tpu_error: BaseException, cpu_error: BaseException) -> str | None:
    """None when `tpu_error` is the failure `cpu_error` is (same exception type, same normalized
    message); else a sentence saying how they differ."""
    if type(tpu_error) is not type(cpu_error):
        return (f"another exception type: tpu {type(tpu_error).__name__}, "
                f"cpu {type(cpu_error).__name__}")
    a, b = normalized_message(tpu_error), normalized_message(cpu_error)
    if a != b:
        return f"another message: tpu {a[:200]!r}, cpu {b[:200]!r}"
    return None
