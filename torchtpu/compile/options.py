"""CompileOptions: what ``torch.compile(..., backend="tpu", mode=..., options={...})`` asks of the
graphs it compiles (docs/compiled-mode.md, "Modes and options")."""
from __future__ import annotations

class CompileOptions:
    """What ``torch.compile(..., backend="tpu", mode=..., options={...})`` asks of the graphs
    it compiles (docs/compiled-mode.md, "Modes and options").

    options:
      ``"matmul_precision"``: ``"highest"``, ``"high"`` or ``"medium"``: the MXU passes of the
        graphs' float32 matmuls and convolutions, whatever ``torch.set_float32_matmul_precision``
        says (XLA keeps a precision per program the same way); None (default): the level in force
        at each call.
      ``"replay"``: False runs each ATen graph op by op in the current eager mode instead of as a
        program (to tell a program's result from eager's when looking for a bug); default True.
      ``"max_programs"``: programs kept per graph, one per input shape (default 16); a graph
        called with more shapes runs op by op, counted.
      ``"buckets"``: how a graph with dynamic sizes is priced (docs/compiled-mode.md, "Buckets"):
        ``"pow2"`` (default): each symbolic size rounded up to a power of two, an int N: up to a
        multiple of N, None: each size priced as itself (a TPU program per size). Every call is
        charged the estimate of the graph at its bucket's sizes, as a TPU would run it padded;
        the host still computes at the call's own sizes.
    mode: ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` and
      ``"max-autotune-no-cudagraphs"`` give the same programs: a program already replays as one
      launch with no per-op host work (what CUDA graphs give "reduce-overhead"), and its plan has
      no kernel variants to tune.
    """

    MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    KNOWN = {"matmul_precision": (None, "highest", "high", "medium"), "replay": (True, False),
             "max_programs": int, "buckets": (None, "pow2", int)}

    def __init__(self, mode=None, options=None):
        if mode is not None and mode not in self.MODES:
            raise RuntimeError(
                f"torch.compile(backend='tpu'): unrecognized mode={mode!r}; the modes are "
                f"{', '.join(self.MODES)} (all give the same programs: docs/compiled-mode.md)")
        options = dict(options or {})
        for key, value in options.items():
            allowed = self.KNOWN.get(key)
            if allowed is None:
                raise RuntimeError(
                    f"torch.compile(backend='tpu'): unexpected option {key!r}; the options are "
                    f"{', '.join(self.KNOWN)} (Inductor's options do not apply: "
                    "docs/compiled-mode.md)")
            whole = isinstance(value, int) and not isinstance(value, bool)
            if allowed is int:
                ok = whole and value >= 0
            else:
                ok = (whole and value >= 1) if int in allowed and whole else value in allowed
            if not ok:
                wanted = ("an int >= 0" if allowed is int else
                          " or ".join("an int >= 1" if a is int else repr(a) for a in allowed))
                raise RuntimeError(
                    f"torch.compile(backend='tpu'): option {key!r} must be {wanted}, not {value!r}")
        self.matmul_precision = options.get("matmul_precision")
        self.replay = options.get("replay", True)
        self.max_programs = options.get("max_programs", 16)
        self.buckets = options.get("buckets", "pow2")

    def key(self) -> tuple:
        return (self.matmul_precision, self.replay, self.max_programs, self.buckets)

    def bucket(self, n: int) -> int:
        """The size a TPU program for size ``n`` of a dynamic dimension is compiled at."""
        if self.buckets is None or n <= 0:
            return n
        if self.buckets == "pow2":
            return 1 << (n - 1).bit_length()
        return -(-n // self.buckets) * self.buckets


_DEFAULT_OPTIONS = CompileOptions()
