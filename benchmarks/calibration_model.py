"""One chip's program of a published TPU run, as eager PyTorch on "tpu" in a dry run
(benchmarks/calibration.py; docs/insight.md, "Calibration against published measurements").

A decoder LM (``Arch``: dense or MoE, GQA or MLA attention, SwiGLU / GELU / ReLU MLP, RMSNorm or
LayerNorm, RoPE or learned positions) written as a Hugging Face model writes it: RMSNorm in
float32, RoPE by rotate-half, ``scaled_dot_product_attention(is_causal=True)``, the loss on
float32 logits. ``train_step`` runs what one chip of the measured slice runs (``Run``):

- **FSDP**: the chip computes with the whole (gathered) weights on its own batch; every layer's
  bf16 weights are all-gathered before its forward and again before its backward (prefetched one
  layer ahead, on a stream of their own, so compute hides them where it is longer), its
  gradients reduce-scattered after its backward, and AdamW (with MaxText's gradient clipping)
  updates the chip's 1/N shard of float32 master weights and moments: a one-process dry run of
  the sharded program, not a multi-rank run (70B-671B models at 64-512 ranks do not run on this
  host, and each rank's program is the same).
- **TP** (tensor parallelism, ``tp``): heads, MLP and vocabulary split over ``tp`` chips, the
  activations all-gathered before and reduce-scattered after each block (sequence-parallel
  layout), on the compute stream.
- **EP** (expert parallelism, ``ep``): the chip holds E / ep experts; tokens reach them by an
  all-to-all before and after the experts, on the compute stream.
- **remat**: MaxText's policies by checkpoint name (decoder_layer_input, query_proj, key_proj,
  value_proj, context, out_proj, mlpwi, mlpwo): each decoder layer runs under
  ``torch.utils.checkpoint`` with a selective policy that saves the named values and recomputes
  the rest in the backward, stopping once what the backward needs is recomputed (PyTorch's early
  stop), as XLA computes only what the backward reads. Offloaded names count as saved (their
  host transfers are not charged).
- **int8 / fp8**: MaxText's int8 (AQT: the forward and both gradients' matmuls in int8, dynamic
  per-row and per-column scales) and fp8 (qwix's fp8_full: static scales) for the dense layers,
  each quantized matmul one fused kernel (XLA fuses the quantization into the dot) charged at
  the dtype's rate through torchtpu's kernel-pricing API (calibration_kernels.py); attention
  stays bf16. Written as eager quantization ops instead (abs, amax, divide, round, clamp, convert,
  each through HBM), GPT-3 175B's int8 step on v6e was estimated at 33.9 s, most of it those
  ops over the 175B weights, against 5.7 s fused.
- **MoE**: tokens sorted by expert; token-dropping runs (dense dispatch) compute each expert as
  a ``bmm`` over its buffer of tokens x k / E x the capacity factor; dropless runs (``gmm``)
  compute the experts as MaxText's grouped matmul does (megablox, or tokamax's port of it):
  whole tiles of tm sorted rows, a tile that a group boundary falls in once per group, the
  weights fetched again at each tile, one grouped matmul per JAX device (two a v7 chip); the
  group sizes are one seeded draw of uniform random routing (calibration_kernels.py), the
  tensors keep the balanced layout.
- **attention**: causal flash attention (torchtpu's fused kernel charge); where the run's splash
  attention has an unfused backward (``unfused_attention_bwd``, MaxText's default), the dK/dV
  kernel's second computation of the scores and dP is charged too.

Collectives are charged with ``torchtpu._C.charge_collective`` on the slice's ICI
(TORCHTPU_TOPOLOGY, set per row), overlapped with compute by the ledger's stream clocks
(docs/distributed.md, "Overlap with compute"). The estimate of a step is
``torchtpu.metrics.estimate()["parallel_time_s"]``.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

from torchtpu import _C

from calibration_kernels import (_SAVED, _GroupedMatmul, _QuantLinear, _UnfusedAttentionBackward,
                                 _policy, named)

BF16 = torch.bfloat16


@dataclasses.dataclass(frozen=True)
class Arch:
    vocab: int
    d: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ff: int                      # MLP width of the dense layers
    mlp: str = "swiglu"          # "swiglu", "gelu" or "relu" (the last two not gated)
    norm: str = "rms"            # "rms" or "layer"
    positions: str = "rope"      # "rope" or "learned"
    tied: bool = False
    qk_norm: bool = False        # RMSNorm on each head's queries and keys (Qwen3)
    experts: int = 0             # MoE: routed experts, top-k, each expert's MLP width
    topk: int = 0
    expert_ff: int = 0
    shared_ff: int = 0           # width of the shared experts together
    first_dense: int = 0         # the first layers are dense
    moe_every: int = 1           # then every n-th layer is MoE (the others dense)
    router: str = "softmax"      # "softmax" or "sigmoid"
    # Multi-head latent attention (DeepSeek): q_lora 0 is a plain query projection.
    mla: tuple | None = None     # (q_lora, kv_lora, qk_nope, qk_rope, v_head)

    def is_moe(self, layer: int) -> bool:
        return (self.experts > 0 and layer >= self.first_dense
                and (layer - self.first_dense + 1) % self.moe_every == 0)


@dataclasses.dataclass(frozen=True)
class Run:
    batch: int                   # sequences per chip
    seq: int
    fsdp: int                    # chips the weights are sharded over
    tp: int = 1
    ep: int = 1
    remat: str | tuple = "none"  # "none", "full", or the checkpoint names saved
    quant: str | None = None     # None, "int8" or "fp8"
    capacity: float = 1.0        # MoE capacity factor (1: dropless, balanced)
    grad_bytes: int = 4          # bytes per gradient element reduce-scattered
    # Dropless MoE through MaxText's grouped matmul (megablox, or tokamax's port of it): its
    # (tm, tk, tn) tiles; None: the experts as one bmm (the dense dispatch of token-dropping runs).
    gmm: tuple | None = None
    devices: int = 1             # JAX devices per chip (v7: 2 TensorCores), each a gmm of its own
    # Splash attention's backward as two kernels (sa_use_fused_bwd_kernel=False): the block size
    # of its dK/dV kernel, which computes the scores and dP again; None: one fused kernel.
    unfused_attention_bwd: int | None = None


# --- collectives ---------------------------------------------------------------------------------

class Comm:
    """The collectives of one chip's step: FSDP's on a stream of their own (overlapped with
    compute, waited for where their result is needed), TP's and EP's on the compute stream."""

    def __init__(self, run: Run):
        self.run = run
        self.side = torch.tpu.Stream()
        self.pending: dict = {}
        self.bytes = {"all_gather": 0.0, "reduce_scatter": 0.0, "all_reduce": 0.0,
                      "all_to_all": 0.0}

    def _charge(self, kind: str, nbytes: float, chips: int) -> int:
        self.bytes[kind] += nbytes
        return _C.charge_collective(kind, float(nbytes), int(chips))

    def issue(self, key, kind: str, nbytes: float) -> None:
        """An FSDP collective issued on the side stream once the compute issued so far is."""
        if self.run.fsdp <= 1 or nbytes <= 0:
            return
        self.side.wait_stream(torch.tpu.current_stream())
        with torch.tpu.stream(self.side):
            self.pending[key] = self._charge(kind, nbytes, self.run.fsdp)

    def wait(self, key) -> None:
        ident = self.pending.pop(key, None)
        if ident is not None:
            _C.collective_waited(ident)

    def wait_all(self) -> None:
        for key in list(self.pending):
            self.wait(key)

    def inline(self, kind: str, nbytes: float, chips: int) -> None:
        """A collective on the compute stream (TP, EP): the compute waits for it."""
        if chips > 1 and nbytes > 0:
            self._charge(kind, nbytes, chips)


_COMM: Comm | None = None


class _GatherTP(torch.autograd.Function):
    """Sequence-parallel TP: all-gather the activations over the TP group (the backward
    reduce-scatters their gradient)."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        _COMM.inline("all_gather", tp * x.numel() * x.element_size(), tp)
        return x.new_empty((tp * x.shape[0],) + tuple(x.shape[1:]))

    @staticmethod
    def backward(ctx, g):
        _COMM.inline("reduce_scatter", g.numel() * g.element_size(), ctx.tp)
        return g.new_empty((g.shape[0] // ctx.tp,) + tuple(g.shape[1:])), None


class _ScatterTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        _COMM.inline("reduce_scatter", x.numel() * x.element_size(), tp)
        return x.new_empty((x.shape[0] // tp,) + tuple(x.shape[1:]))

    @staticmethod
    def backward(ctx, g):
        _COMM.inline("all_gather", ctx.tp * g.numel() * g.element_size(), ctx.tp)
        return g.new_empty((ctx.tp * g.shape[0],) + tuple(g.shape[1:])), None


class _AllToAll(torch.autograd.Function):
    """EP: tokens to their experts' chips (and back); the backward moves the gradients."""

    @staticmethod
    def forward(ctx, x, ep):
        ctx.ep = ep
        _COMM.inline("all_to_all", x.numel() * x.element_size(), ep)
        return x

    @staticmethod
    def backward(ctx, g):
        _COMM.inline("all_to_all", g.numel() * g.element_size(), ctx.ep)
        return g, None


class _Mark(torch.autograd.Function):
    """Identity whose backward runs a callback: at a layer's output it runs before the layer's
    backward, at its input after it."""

    @staticmethod
    def forward(ctx, x, callback):
        ctx.callback = callback
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.callback()
        return g, None


def linear(x: torch.Tensor, w: torch.Tensor, quant: str | None) -> torch.Tensor:
    if quant is None:
        return F.linear(x, w)
    x2 = x.reshape(-1, x.shape[-1])
    return _QuantLinear.apply(x2, w, quant).view(*x.shape[:-1], w.shape[0])


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Hugging Face's LlamaRMSNorm."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's apply_rotary_pos_emb for one tensor."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Model:
    """The weights one chip computes with (its TP / EP share, whole under FSDP) and the
    forward of a step. Weights are bf16 tensors on "tpu" (a dry run: no values)."""

    def __init__(self, arch: Arch, run: Run):
        self.a, self.r = a, r = arch, run
        tp = r.tp
        self.heads, self.kv = a.heads // tp, max(1, a.kv_heads // tp)
        self.params: list[torch.Tensor] = []
        self.layer_params: list[list[torch.Tensor]] = []
        w = self._weight
        # (vocabulary-parallel under TP: the chip's share of the embedding and of the logits)
        self.embed = w(a.vocab // tp, a.d)
        self.pos = w(r.seq, a.d) if a.positions == "learned" else None
        self.head = self.embed if a.tied else w(a.vocab // tp, a.d)
        self.final_norm = self._norm_weights(a.d)
        self.outer_params = list(self.params)
        self.layers = []
        for i in range(a.layers):
            start = len(self.params)
            self.layers.append(self._layer_weights(i))
            self.layer_params.append(self.params[start:])

    def _weight(self, *shape) -> torch.Tensor:
        t = torch.empty(shape, dtype=BF16, device="tpu", requires_grad=True)
        self.params.append(t)
        return t

    def _norm_weights(self, n: int):
        if self.a.norm == "layer":
            return (self._weight(n), self._weight(n))
        return (self._weight(n),)

    def _mlp_weights(self, width: int, gated: bool, experts: int = 0):
        """A dense MLP's weights as nn.Linear lays them out; experts' as bmm takes them."""
        w, d = self._weight, self.a.d
        if experts:
            out = {"wi_0": w(experts, d, width), "wo": w(experts, width, d)}
            if gated:
                out["wi_1"] = w(experts, d, width)
            return out
        out = {"wi_0": w(width, d), "wo": w(d, width)}
        if gated:
            out["wi_1"] = w(width, d)
        return out

    def _layer_weights(self, i: int) -> dict:
        a, tp, w = self.a, self.r.tp, self._weight
        L = {"norm1": self._norm_weights(a.d), "norm2": self._norm_weights(a.d)}
        if a.mla:
            q_lora, kv_lora, nope, rope, v_head = a.mla
            if q_lora:
                L["q_a"], L["q_norm"] = w(q_lora, a.d), (w(q_lora),)
                L["q_b"] = w(self.heads * (nope + rope), q_lora)
            else:
                L["q"] = w(self.heads * (nope + rope), a.d)
            L["kv_a"], L["kv_norm"] = w(kv_lora + rope, a.d), (w(kv_lora),)
            L["kv_b"] = w(self.heads * (nope + v_head), kv_lora)
            L["o"] = w(a.d, self.heads * v_head)
        else:
            L["q"] = w(self.heads * a.head_dim, a.d)
            L["k"] = w(self.kv * a.head_dim, a.d)
            L["v"] = w(self.kv * a.head_dim, a.d)
            L["o"] = w(a.d, self.heads * a.head_dim)
            if a.qk_norm:
                L["q_norm"], L["k_norm"] = (w(a.head_dim),), (w(a.head_dim),)
        gated = a.mlp == "swiglu"
        if a.is_moe(i):
            L["router"] = w(a.experts, a.d)
            L["experts"] = self._mlp_weights(a.expert_ff // (tp if self.r.ep == 1 else 1), gated,
                                             a.experts // self.r.ep)
            if a.shared_ff:
                L["shared"] = self._mlp_weights(a.shared_ff // tp, gated)
        else:
            L["mlp"] = self._mlp_weights(a.ff // tp, gated)
        return L

    # -- the forward ----------------------------------------------------------------------------

    def norm(self, x, weights):
        if self.a.norm == "layer":
            return F.layer_norm(x, (x.shape[-1],), weights[0], weights[1])
        return rms_norm(x, weights[0])

    def gather(self, x):
        return _GatherTP.apply(x, self.r.tp) if self.r.tp > 1 else x

    def scatter(self, x):
        return _ScatterTP.apply(x, self.r.tp) if self.r.tp > 1 else x

    def attention(self, L: dict, h: torch.Tensor, cos, sin, mask=None, cache=None):
        a, q_ = self.a, self.r.quant
        B, S = h.shape[0], h.shape[1]
        if a.mla:
            q_lora, kv_lora, nope, rope, v_head = a.mla
            with named("query_proj"):
                if q_lora:
                    q = linear(self.norm(linear(h, L["q_a"], q_), L["q_norm"]), L["q_b"], q_)
                else:
                    q = linear(h, L["q"], q_)
            q = q.view(B, S, self.heads, nope + rope).transpose(1, 2)
            with named("key_proj"):
                kv = linear(h, L["kv_a"], q_)
            c, k_rope = kv.split([kv_lora, rope], dim=-1)
            with named("value_proj"):
                kv = linear(self.norm(c, L["kv_norm"]), L["kv_b"], q_)
            kv = kv.view(B, S, self.heads, nope + v_head).transpose(1, 2)
            k_nope, v = kv.split([nope, v_head], dim=-1)
            k_rope = rotate(k_rope.view(B, 1, S, rope), cos[..., :rope], sin[..., :rope])
            q_nope, q_rope = q.split([nope, rope], dim=-1)
            q = torch.cat((q_nope, rotate(q_rope, cos[..., :rope], sin[..., :rope])), dim=-1)
            k = torch.cat((k_nope, k_rope.expand(B, self.heads, S, rope)), dim=-1)
        else:
            hd = a.head_dim
            with named("query_proj"):
                q = linear(h, L["q"], q_).view(B, S, self.heads, hd).transpose(1, 2)
            with named("key_proj"):
                k = linear(h, L["k"], q_).view(B, S, self.kv, hd).transpose(1, 2)
            with named("value_proj"):
                v = linear(h, L["v"], q_).view(B, S, self.kv, hd).transpose(1, 2)
            if a.qk_norm:
                q, k = self.norm(q, L["q_norm"]), self.norm(k, L["k_norm"])
            if a.positions == "rope":
                q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None:
            k, v = cache(k, v)
        with named("context"):
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               is_causal=mask is None and cache is None,
                                               enable_gqa=k.shape[1] != q.shape[1])
            if self.r.unfused_attention_bwd and cache is None:
                o = _UnfusedAttentionBackward.apply(o, q, k, v, self.r.unfused_attention_bwd)
        o = o.transpose(1, 2).reshape(B, S, -1)
        with named("out_proj"):
            return linear(o, L["o"], q_)

    def mlp(self, W: dict, h: torch.Tensor) -> torch.Tensor:
        q_ = self.r.quant
        with named("mlpwi"):
            gate = linear(h, W["wi_0"], q_)
            up = linear(h, W["wi_1"], q_) if "wi_1" in W else None
        act = {"swiglu": F.silu, "gelu": F.gelu, "relu": F.relu}[self.a.mlp](gate)
        act = act * up if up is not None else act
        with named("mlpwo"):
            return linear(act, W["wo"], q_)

    def moe(self, L: dict, h: torch.Tensor) -> torch.Tensor:
        a, r = self.a, self.r
        shape = h.shape
        x = h.reshape(-1, shape[-1])
        T, k, E = x.shape[0], a.topk, a.experts
        logits = F.linear(x, L["router"]).float()
        probs = logits.sigmoid() if a.router == "sigmoid" else logits.softmax(-1)
        weights, chosen = probs.topk(k, dim=-1)
        order = chosen.flatten().argsort()
        token = order.div(k, rounding_mode="floor")
        xs = x.index_select(0, token)                         # tokens sorted by expert
        per_expert = math.ceil(T * k / E * r.capacity)        # balanced routing
        slot = None
        if r.capacity == 1.0 and (T * k) % E == 0:
            buf = xs
        else:  # token dropping: each expert's buffer holds `capacity` times its share
            slot = order.remainder(E * per_expert)
            buf = x.new_zeros(E * per_expert, x.shape[-1]).index_copy(0, slot, xs)
        if r.ep > 1:
            buf = _AllToAll.apply(buf, r.ep)
        W = L["experts"]
        xe = buf.view(E // r.ep, -1, x.shape[-1])
        mm = functools.partial(_GroupedMatmul.apply, run=r) if r.gmm else torch.bmm
        with named("mlpwi"):
            gate = mm(xe, W["wi_0"])
            up = mm(xe, W["wi_1"]) if "wi_1" in W else None
        act = F.silu(gate) * up if up is not None else F.gelu(gate)
        with named("mlpwo"):
            ye = mm(act, W["wo"]).view(-1, x.shape[-1])
        if r.ep > 1:
            ye = _AllToAll.apply(ye, r.ep)
        ys = ye if slot is None else ye.index_select(0, slot)
        ys = ys * weights.flatten().index_select(0, order).to(BF16).unsqueeze(-1)
        out = torch.zeros_like(x).index_add(0, token, ys)
        if "shared" in L:
            out = out + self.mlp(L["shared"], x)
        return out.view(shape)

    def layer(self, i: int, x: torch.Tensor, cos, sin, mask=None, cache=None) -> torch.Tensor:
        L = self.layers[i]
        h = self.gather(self.norm(x, L["norm1"]))
        x = x + self.scatter(self.attention(L, h, cos, sin, mask, cache))
        h = self.gather(self.norm(x, L["norm2"]))
        y = self.moe(L, h) if "experts" in L else self.mlp(L["mlp"], h)
        return x + self.scatter(y)

    def layer_bytes(self, i: int, per_element: int) -> float:
        return float(sum(p.numel() for p in self.layer_params[i]) * per_element)

    def rope_tables(self, positions: int):
        hd = self.a.mla[3] if self.a.mla else self.a.head_dim
        cos = torch.empty(positions, hd, dtype=BF16, device="tpu")
        return cos, torch.empty_like(cos)


def train_step(arch: Arch, run: Run) -> dict:
    """One chip's training step in the running dry run: forward with the loss, backward, the
    FSDP collectives, gradient clipping and AdamW on the chip's shard. Returns what was built
    (parameters, collective bytes)."""
    global _COMM
    model = Model(arch, run)
    comm = _COMM = Comm(run)
    B, S, tp = run.batch, run.seq, run.tp
    ids = torch.empty(B, S, dtype=torch.long, device="tpu")
    cos, sin = model.rope_tables(S)
    saved = (frozenset() if run.remat in ("none", "full") else frozenset(run.remat))
    _SAVED[0] = saved
    gathered, grads = 2, run.grad_bytes
    outer = float(sum(p.numel() for p in model.outer_params))

    def layer_fn(i, x):
        return model.layer(i, x, cos, sin)

    # Forward: the embedding's and head's weights, then each layer's, gathered one ahead.
    comm.issue("outer", "all_gather", outer * gathered)
    comm.issue(("fwd", 0), "all_gather", model.layer_bytes(0, gathered))
    comm.wait("outer")
    x = F.embedding(ids, model.embed)
    if model.pos is not None:
        x = x + model.pos
    for i in range(arch.layers):
        comm.wait(("fwd", i))
        if i + 1 < arch.layers:
            comm.issue(("fwd", i + 1), "all_gather", model.layer_bytes(i + 1, gathered))
        x = _Mark.apply(x, functools.partial(_after_backward, model, comm, i, grads))
        if run.remat == "none":
            x = layer_fn(i, x)
        else:
            context = functools.partial(create_selective_checkpoint_contexts,
                                        functools.partial(_policy, saved))
            x = checkpoint(functools.partial(layer_fn, i), x, use_reentrant=False,
                           context_fn=context, preserve_rng_state=False)
        x = _Mark.apply(x, functools.partial(_before_backward, model, comm, i, gathered))
    h = model.gather(model.norm(x, model.final_norm)).view(-1, arch.d)
    logits = linear(h, model.head, run.quant)
    labels = torch.empty(logits.shape[0], dtype=torch.long, device="tpu")
    loss = F.cross_entropy(logits.float(), labels)
    comm.issue(("bwd", arch.layers - 1), "all_gather",
               model.layer_bytes(arch.layers - 1, gathered))
    loss.backward()
    comm.issue("outer_grads", "reduce_scatter", outer * grads)
    comm.wait_all()

    # The optimizer on this chip's shard: float32 master weights and moments, 1/fsdp of each.
    shards = [torch.empty(math.ceil(p.numel() / run.fsdp), dtype=torch.float32, device="tpu",
                          requires_grad=True) for p in model.params]
    for s in shards:
        s.grad = torch.empty_like(s)
    torch.nn.utils.clip_grad_norm_(shards, 1.0)
    opt = torch.optim.AdamW(shards, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    opt.step()
    return {"chip_parameters": sum(p.numel() for p in model.params),
            "collective_bytes": dict(comm.bytes)}


def _before_backward(model: Model, comm: Comm, i: int, gathered: int) -> None:
    """Layer i's backward starts: its weights must be gathered; prefetch the next one's."""
    comm.wait(("bwd", i))
    if i > 0:
        comm.issue(("bwd", i - 1), "all_gather", model.layer_bytes(i - 1, gathered))


def _after_backward(model: Model, comm: Comm, i: int, grads: int) -> None:
    """Layer i's backward is done: reduce-scatter its gradients."""
    comm.issue(("grads", i), "reduce_scatter", model.layer_bytes(i, grads))


def decode_step(arch: Arch, run: Run, decode: int, context: int, prefill: int,
                prefill_context: int) -> dict:
    """One serving iteration on one chip of a TP group (vLLM's): `decode` sequences emit a token
    each, attending to a KV cache of `context` tokens, and one prefill chunk of `prefill` tokens
    attends to its `prefill_context` earlier tokens and itself (causal). The TP all-reduces are
    reduce-scatter + all-gather on the compute stream; logits only for the sampled positions."""
    global _COMM
    model = Model(arch, run)
    _COMM = Comm(run)
    hd = arch.head_dim
    kv = model.kv
    caches = []
    with torch.no_grad():
        for _ in range(arch.layers):
            caches.append([torch.empty(decode, kv, context, hd, dtype=BF16, device="tpu")
                           for _ in range(4)])  # decode K, V; prefill K, V
        tokens = decode + prefill
        ids = torch.empty(1, tokens, dtype=torch.long, device="tpu")
        cos, sin = model.rope_tables(tokens)
        x = F.embedding(ids, model.embed)
        mask = torch.empty(prefill, prefill_context + prefill, dtype=torch.bool, device="tpu")
        for i in range(arch.layers):
            x = _decode_layer(model, i, x, cos, sin, caches[i], decode, prefill,
                              prefill_context, mask)
        h = model.norm(x, model.final_norm)[0, :decode + 1]
        logits = F.linear(h, model.head)
        _COMM.inline("all_gather", run.tp * logits.numel() * 2, run.tp)
        logits.float().argmax(-1)
    return {"chip_parameters": sum(p.numel() for p in model.params),
            "collective_bytes": dict(_COMM.bytes)}


def _decode_layer(model: Model, i, x, cos, sin, cache, decode, prefill, prefill_context, mask):
    a, r = model.a, model.r
    L = model.layers[i]
    h = model.norm(x, L["norm1"])
    hd = a.head_dim
    T = h.shape[1]
    q = linear(h, L["q"], None).view(T, model.heads, hd).transpose(0, 1)
    k = linear(h, L["k"], None).view(T, model.kv, hd).transpose(0, 1)
    v = linear(h, L["v"], None).view(T, model.kv, hd).transpose(0, 1)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    # The new keys and values into the paged cache (one slot per token).
    k_cache, v_cache = cache[0], cache[1]
    k_cache[:, :, -1].copy_(k[:, :decode].transpose(0, 1))
    v_cache[:, :, -1].copy_(v[:, :decode].transpose(0, 1))
    qd = q[:, :decode].transpose(0, 1).unsqueeze(2)                 # [decode, H, 1, hd]
    od = F.scaled_dot_product_attention(qd, k_cache, v_cache, enable_gqa=model.heads != model.kv)
    # The prefill chunk against its earlier tokens (from the cache) and itself.
    kp = torch.empty(1, model.kv, prefill_context + prefill, hd, dtype=BF16, device="tpu")
    kp[:, :, prefill_context:].copy_(k[:, decode:].unsqueeze(0))
    vp = torch.empty_like(kp)
    vp[:, :, prefill_context:].copy_(v[:, decode:].unsqueeze(0))
    op = F.scaled_dot_product_attention(q[:, decode:].unsqueeze(0), kp, vp, attn_mask=mask,
                                        enable_gqa=model.heads != model.kv)
    o = torch.cat((od.squeeze(2), op[0].transpose(0, 1)), dim=0).reshape(1, T, -1)
    o = linear(o, L["o"], None)
    _COMM.inline("all_reduce", o.numel() * o.element_size(), r.tp)
    x = x + o
    y = model.mlp(L["mlp"], model.norm(x, L["norm2"]))
    _COMM.inline("all_reduce", y.numel() * y.element_size(), r.tp)
    return x + y
