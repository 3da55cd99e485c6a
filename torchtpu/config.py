"""torchtpu's configuration: every environment variable torchtpu reads, in one table (name, type,
default, meaning, whose variable it is, where it is documented), and the one accessor through
which the package reads them (docs/configuration.md is generated from the table).

The C++ core reads the same table: ``csrc/runtime/ConfigTable.inc`` is generated from it
(``python -m torchtpu config --write-cpp``) and ``runtime::env`` refuses a name it lacks.
``test/python/test_config.py`` fails when code reads a variable that is not in the table, when
code reads one other than through the accessors, and when the C++ table or the docs drift.

This module imports nothing but the standard library: the package reads variables before its
extension loads (``TORCH_DEVICE_BACKEND_AUTOLOAD``), and vLLM's plugin entry point before it
imports torchtpu at all (``TORCHTPU_VLLM``).

    python -m torchtpu config             # the variables, their values in this environment
    python -m torchtpu config --markdown  # the reference table (docs/configuration.md)
    python -m torchtpu config --write     # regenerate the docs' table and the C++ table
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    type: str  # flag (0/1), int, number, text, choice
    default: str  # "" when unset means nothing, or the default depends on something else
    meaning: str
    owner: str = "torchtpu"  # whose variable: torchtpu, TorchTPU (Google's), PyTorch, torchrun
    read_by: str = "C++"  # C++ or Python
    doc: str = ""  # the docs page that says more


_T, _G, _P = "torchtpu", "TorchTPU", "PyTorch"

VARIABLES: tuple[Variable, ...] = (
    # -- the device
    Variable("TORCHTPU_NUM_DEVICES", "int", "4", "Number of simulated devices (chips) on the host.",
             doc="runtime.md"),
    Variable("TORCHTPU_CHIP", "choice", "v5e", "Chip generation simulated: v4, v5e, v5p, v6e, v7.",
             doc="simulated-chip.md"),
    Variable("ACCELERATOR_TYPE", "text", "",
             "Chip and count as a Cloud TPU type (`v6e-4`): the chip when TORCHTPU_CHIP is unset, "
             "the device count when TORCHTPU_NUM_DEVICES is unset.", _G, doc="coming-from-torchtpu.md"),
    Variable("TORCHTPU_HBM_BYTES", "int", "", "HBM capacity per device in bytes, overriding the "
             "chip's.", doc="runtime.md"),
    Variable("TPU_VISIBLE_DEVICES", "text", "", "The host's chips this process sees (`2,0`), "
             "numbered from 0 in that order; read before TPU_VISIBLE_CHIPS.", _G,
             doc="distributed.md"),
    Variable("TPU_VISIBLE_CHIPS", "text", "", "The host's chips this process sees (`2,0`), "
             "numbered from 0 in that order.", _G, doc="distributed.md"),
    Variable("TORCHTPU_LOG_LEVEL", "choice", "warn", "Log level of the C++ core: trace, debug, "
             "info, warn, error, off.", doc="runtime.md"),
    # -- eager modes
    Variable("TORCHTPU_EAGER_MODE", "choice", "strict", "Eager mode at start: strict, debug or "
             "fused.", doc="eager-modes.md"),
    Variable("TPU_LAUNCH_BLOCKING", "flag", "0", "1 starts in debug eager (TorchTPU's variable).",
             _G, doc="eager-modes.md"),
    Variable("TPU_DEFER_AND_FUSE", "flag", "0", "1 starts in fused eager (TorchTPU's variable).",
             _G, doc="eager-modes.md"),
    Variable("TORCH_TPU_DEFER_AND_FUSE", "flag", "0", "1 starts in fused eager (the name "
             "torchtpu used before TPU_DEFER_AND_FUSE).", doc="eager-modes.md"),
    Variable("TORCHTPU_FALLBACK", "choice", "warn", "Ops without a native kernel: warn, silent "
             "(run on the CPU, counted) or error.", doc="runtime.md"),
    Variable("TORCHTPU_CHECK_NANS", "flag", "0", "1 raises naming the first op that produced a "
             "NaN or Inf.", doc="eager-modes.md"),
    Variable("TORCHTPU_DRY_RUN", "flag", "0", "1 makes the whole process a dry run: tensors "
             "without values, ops only charged.", doc="insight.md"),
    Variable("TORCHTPU_METRICS_REPORT", "flag", "0", "1 prints torchtpu.metrics.report() at exit.",
             read_by="Python", doc="insight.md"),
    # -- fused eager
    Variable("TORCHTPU_DEFER_MAX_OPS", "int", "4096", "Fused eager: the pending graph's size that "
             "forces a flush.", doc="eager-modes.md"),
    Variable("TORCHTPU_DEFER_PLAN_CACHE", "int", "4096", "Fused eager: plans kept in the plan "
             "cache (the least recently used go first).", doc="eager-modes.md"),
    Variable("TORCHTPU_DEFER_LOCATIONS", "flag", "0", "1 records the Python line of every "
             "recorded op (named in errors).", doc="eager-modes.md"),
    Variable("TORCHTPU_DUMP_REGIONS", "text", "", "File to which fused eager appends the IR of "
             "each new plan.", doc="eager-modes.md"),
    Variable("TORCHTPU_DEFER_DEBUG", "text", "", "Comma-separated planner debug flags (for "
             "developers: defer/Passes.cpp).", doc="eager-modes.md"),
    Variable("TORCHTPU_FUSED_BLOCK", "int", "32768", "Elements per block of every fused region "
             "(for experiments; the default keeps each operand's block in L2).",
             doc="host-speed.md"),
    Variable("TORCHTPU_FUSED_LOOP", "flag", "1", "0 turns off the register-level loop of fused "
             "regions (each op then runs its ATen kernel per block).", doc="host-speed.md"),
    Variable("TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS", "choice", "safe", "Loop detection in fused "
             "eager: safe or aggressive cut the pending graph where the ops repeat; empty or any "
             "other value is off.", _G, doc="eager-modes.md"),
    # -- host execution
    Variable("TORCHTPU_INLINE", "choice", "1", "Where a stream's work runs when the stream is "
             "idle: 0 always on its worker thread, 1 short work on the issuing thread, all every "
             "piece on the issuing thread.", doc="runtime.md"),
    Variable("TORCHTPU_ONE_OPENMP_TEAM", "flag", "1", "1 keeps one OpenMP team for the process's "
             "device work (stream workers borrow the issuing thread's); 0 lets each thread start "
             "its own.", doc="runtime.md"),
    Variable("TORCHTPU_BACKWARD_ON_CALLER", "flag", "1", "1 runs backward passes started on the "
             "importing thread on that thread, as the CPU's; 0 keeps PyTorch's device thread.",
             read_by="Python", doc="runtime.md"),
    # -- numerics and the cost model
    Variable("TORCHTPU_MATMUL_PRECISION", "choice", "medium", "float32 matmuls outside "
             "torch.tpu.precision scopes: medium (one bf16 pass, as the chip), high, highest; "
             "torch.set_float32_matmul_precision sets it too.", doc="simulated-chip.md"),
    Variable("TORCHTPU_HIGHEST_ALGORITHM", "choice", "bf16_6x", "What float32 matmuls and "
             "convolutions at highest compute: bf16_6x (the chip's six bf16 passes) or float32 "
             "(the host CPU's float32 GEMM, the CPU's result: an opt-in for tests that compare "
             "with the CPU); torch.tpu.set_highest_algorithm sets it too.", doc="precision.md"),
    Variable("LIBTPU_INIT_ARGS", "text", "", "libtpu's flags; the simulated chip honours "
             "--xla_jf_conv_full_precision (every float32 matmul and convolution at highest).",
             "libtpu", read_by="Python", doc="precision.md"),
    Variable("TORCHTPU_LAUNCH_US", "text", "2", "Cost model: the cost of one launch in µs, for "
             "every chip (`1.5`) or per chip (`v5e:2,v7:1`).", doc="simulated-chip.md"),
    Variable("TORCHTPU_EMULATION_FACTOR", "number", "10", "Cost model: VPU cost of float64 and "
             "complex work relative to float32.", doc="simulated-chip.md"),
    Variable("TORCHTPU_TOPOLOGY", "text", "", "Cost model: the slice's ICI topology collectives "
             "are priced on, chips per torus axis (`4x4`) or per chip (`v5e:4x4,v5p:4x4x4`); "
             "unset, each group is one ring.", doc="distributed.md"),
    Variable("TORCH_TPU_TOPOLOGY", "text", "", "The slice topology (`2,2,1`) when "
             "TORCHTPU_TOPOLOGY is unset (TorchTPU's variable).", _G, doc="distributed.md"),
    # -- compiled mode
    Variable("TORCHTPU_CACHE_DIR", "text", "", "Directory of compiled mode's disk cache, kept "
             "across runs; unset: off (unless TorchTPU's tier variables turn it on).",
             read_by="Python", doc="compiled-mode.md"),
    Variable("TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE", "text", "", "Compiled mode's cache in "
             "/dev/shm/torch_tpu_cache/<name>, shared by the host's processes; disabled: off; "
             "unset: on as `default` with a tier-3 root or WORLD_SIZE above 1.", _G,
             read_by="Python", doc="compiled-mode.md"),
    Variable("TORCH_TPU_TIER2_COMPILATION_CACHE", "text", "", "The same as "
             "TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE (the name TorchTPU's notebooks use).",
             _G, read_by="Python", doc="compiled-mode.md"),
    Variable("TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT", "text", "", "A directory kept "
             "across runs and hosts for compiled mode's cache; gs:// roots are ignored.", _G,
             read_by="Python", doc="compiled-mode.md"),
    Variable("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", "text", "", "The same as "
             "TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT (the name TorchTPU's docs use).",
             _G, read_by="Python", doc="compiled-mode.md"),
    Variable("TORCHINDUCTOR_CACHE_DIR", "text", "", "Saved and restored around a compilation "
             "with the disk cache on, which points it at the cache's directory for PyTorch's "
             "AOTAutograd cache.", _P, read_by="Python", doc="compiled-mode.md"),
    # -- distributed
    Variable("TORCHTPU_DIST_CHECK", "flag", "1", "0: collectives of tpu_dist skip the cross-rank "
             "check of shapes and dtypes.", read_by="Python", doc="distributed.md"),
    Variable("TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS", "choice", "1", "Fused eager: "
             "0 or false records tpu_dist's all_reduce, all_gather_into_tensor, "
             "reduce_scatter_tensor and broadcast inside the pending graph; anything else cuts "
             "the graph at every collective.", _G, read_by="Python", doc="distributed.md"),
    Variable("LOCAL_RANK", "int", "", "The rank on this host (set by torchrun): the tpu device a "
             "process binds to.", "torchrun", read_by="Python", doc="distributed.md"),
    Variable("RANK", "int", "0", "The process's rank (set by torchrun): names each rank's figures "
             "in `python -m torchtpu estimate --nproc-per-node`.", "torchrun", read_by="Python",
             doc="insight.md"),
    Variable("WORLD_SIZE", "int", "1", "The number of ranks (set by torchrun): above 1, "
             "TorchTPU's tier-2 compilation cache is on by default.", "torchrun",
             read_by="Python", doc="compiled-mode.md"),
    # -- Python integration
    Variable("TORCH_DEVICE_BACKEND_AUTOLOAD", "flag", "1", "0: PyTorch does not load device "
             "backends at `import torch`; torchtpu then registers when imported. Saved, set to 0 "
             "while torchtpu imports torch, and restored.", _P, read_by="Python",
             doc="runtime.md"),
    Variable("TORCH_TPU_INTERNAL_ALLOW_XLA_BACKEND", "flag", "0", "1 lets `import torch_tpu` load "
             "torchtpu's twin even where torch_xla is installed.", _G, read_by="Python",
             doc="coming-from-torchtpu.md"),
    Variable("TPU_PROFILER_OUTPUT_DIR", "text", "", "Where torch.profiler.xprof_trace_handler "
             "writes traces when it is given no directory.", _G, read_by="Python",
             doc="coming-from-torchtpu.md"),
    # -- Pallas kernels
    Variable("TORCHTPU_PALLAS_DETECT_RACES", "flag", "0", "1: Pallas interpret mode's race "
             "detector for kernels run through torchtpu.pallas.", read_by="Python",
             doc="custom-kernels.md"),
    Variable("TORCHTPU_PALLAS_OOB_READS", "choice", "raise", "Out-of-bounds reads of Pallas "
             "kernels: raise or uninitialized.", read_by="Python", doc="custom-kernels.md"),
    Variable("TORCHTPU_PALLAS_UNINITIALIZED", "choice", "nan", "What uninitialized memory of "
             "Pallas kernels holds: nan or zero.", read_by="Python", doc="custom-kernels.md"),
    Variable("TORCHTPU_PALLAS_CORES", "int", "1", "Cores (threads) of Pallas interpret mode.",
             read_by="Python", doc="custom-kernels.md"),
    # -- vLLM plugin
    Variable("TORCHTPU_VLLM", "flag", "1", "0: vLLM does not load torchtpu's platform plugin.",
             read_by="Python", doc="ecosystem.md"),
    Variable("TORCHTPU_VLLM_REQUEST_STATS", "flag", "1", "0: the vLLM worker keeps no "
             "per-request estimates.", read_by="Python", doc="ecosystem.md"),
    Variable("TORCHTPU_VLLM_REQUEST_LOG", "text", "", "File to which the vLLM worker appends each "
             "request's estimate as JSON lines.", read_by="Python", doc="ecosystem.md"),
)

_BY_NAME = {v.name: v for v in VARIABLES}


def variable(name: str) -> Variable:
    """The table's entry; a KeyError names the table for a variable it lacks."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not in torchtpu's configuration table (torchtpu/config.py): "
                       f"add it there before reading it") from None


def get(name: str) -> str | None:
    """The variable's value in the environment, None when unset or empty."""
    variable(name)
    return os.environ.get(name) or None


def raw(name: str) -> str | None:
    """The variable as set, empty included (None when unset): for code that saves a variable to
    restore it."""
    variable(name)
    return os.environ.get(name)


def value(name: str) -> str:
    """The variable's value, or its default when unset or empty."""
    return get(name) or variable(name).default


def flag(name: str) -> bool:
    """A 0/1 variable; another value is a ValueError naming it."""
    v = value(name)
    if v not in ("0", "1"):
        raise ValueError(f"{name}={v!r}: expected 0 or 1")
    return v == "1"


def settings() -> dict[str, str]:
    """The table's variables set in this environment."""
    return {v.name: os.environ[v.name] for v in VARIABLES if os.environ.get(v.name)}


def markdown() -> str:
    """The reference table (docs/configuration.md's body)."""
    rows = ["| variable | default | meaning | whose | read by | docs |", "|---|---|---|---|---|---|"]
    for v in VARIABLES:
        default = f"`{v.default}`" if v.default else ""
        doc = f"[{v.doc}]({v.doc})" if v.doc else ""
        rows.append(f"| `{v.name}` | {default} | {v.meaning} | {v.owner} | {v.read_by} | {doc} |")
    return "\n".join(rows) + "\n"


def cpp_table() -> str:
    """The C++ core's copy of the table (csrc/runtime/ConfigTable.inc)."""
    def quoted(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["// Generated from torchtpu/config.py by `python -m torchtpu config --write-cpp`; "
             "do not edit.",
             "// {name, default, read by C++}: the variables the C++ core may read "
             "(runtime/Config.h)."]
    for v in VARIABLES:
        lines.append(f"{{{quoted(v.name)}, {quoted(v.default)}, "
                     f"{'true' if v.read_by == 'C++' else 'false'}}},")
    return "\n".join(lines) + "\n"


DOC_PAGE = "docs/configuration.md"
CPP_TABLE = "csrc/runtime/ConfigTable.inc"
_BEGIN, _END = "<!-- generated by `python -m torchtpu config --write`: begin -->", \
    "<!-- generated: end -->"


def generated_files(root: str) -> dict[str, str]:
    """What ``python -m torchtpu config --write`` writes in the source tree at ``root``: the C++
    table, and docs/configuration.md with its table between the markers replaced."""
    page_path = os.path.join(root, DOC_PAGE)
    with open(page_path) as f:
        page = f.read()
    start, end = page.index(_BEGIN) + len(_BEGIN), page.index(_END)
    page = page[:start] + "\n" + markdown() + page[end:]
    return {os.path.join(root, CPP_TABLE): cpp_table(), page_path: page}
