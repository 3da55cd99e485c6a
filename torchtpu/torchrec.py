"""TorchRec and fbgemm's table-batched embeddings on "tpu" (docs/torchrec.md).

Nothing here imports TorchRec or fbgemm_gpu: ``install()`` (called when torchtpu loads) asks
``_import_hooks.after_import`` to adapt each once it is imported.

- **fbgemm_gpu**: its TBE lookups, ``fbgemm::split_embedding_codegen_lookup_{optimizer}_function_pt2``
  (what ``SplitTableBatchedEmbeddingBagsCodegen`` calls, and through it TorchRec's fused
  embedding kernels), get a kernel for tpu tensors (the ``AutogradPrivateUse1`` and
  ``PrivateUse1`` keys): an autograd function whose forward is ``torchtpu_tbe::forward`` and
  whose backward is ``torchtpu_tbe::backward``, the fused optimizer updating the weights and its
  state in place, as fbgemm's backward does (csrc/aten/EmbeddingBags.cpp); and its dense lookup
  (``dense_embedding_codegen_lookup_function``, TorchRec's data-parallel tables), whose backward
  gives the weights' gradient instead. fbgemm's own kernel
  for those ops refuses any device but the CPU, CUDA and MTIA.
- ``SplitTableBatchedEmbeddingBagsCodegen`` on a tpu device keeps its tables in device memory
  (fbgemm's ``EmbeddingLocation.DEVICE``, as on CUDA), whatever location it was given: TorchRec
  asks for host placement (``HOST``, fbgemm's CPU mode, which has no Adam) on any device but CUDA.
  The dense ``DenseTableBatchedEmbeddingBagsCodegen`` TorchRec builds for data-parallel tables
  (in fbgemm's CPU mode on any device but CUDA and MTIA) is moved to the tpu device.
- **TorchRec**: ``DistributedModelParallel(module, device=torch.device("tpu", ...))`` plans for
  an accelerator with HBM (``topology()``: TorchRec's planner knows "cuda", "mtia" and "cpu";
  "cuda" gives the HBM budget, here the simulated chip's, and the row-wise shardings), and every
  shard the plan places on "cuda:N" is placed on "tpu:N".
"""
from __future__ import annotations

import threading

import torch

from . import _fbgemm_sparse
from ._import_hooks import after_import

_OPTIMIZERS = ("sgd", "rowwise_adagrad", "adagrad", "adam")
_OUTPUT_DTYPES = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16}  # fbgemm's SparseType
_libraries = []  # (kept alive: a torch.library.Library unregisters its kernels when collected)


def _table(tensors, what):
    """(buffer, offsets) of fbgemm's packed tensors: [host, placements, offsets] (CPU layout),
    [dev, uvm, placements, offsets] or [dev, uvm, placements, offsets, lxu_cache] (device)."""
    if len(tensors) == 3:
        return tensors[0], tensors[2]
    dev, uvm = tensors[0], tensors[1]
    if uvm.numel() != 0 or (len(tensors) == 5 and tensors[4].numel() != 0):
        raise NotImplementedError(
            f"fbgemm TBE on tpu: {what} in managed (UVM) memory or a software cache; tpu has "
            "no unified memory: use EmbeddingLocation.DEVICE (TorchRec's compute kernel 'fused')")
    return dev, tensors[3]


def _check_supported(kw, optimizer):
    aux_tensor, aux_bool = kw["aux_tensor"], kw["aux_bool"]
    if aux_tensor[0] is not None:
        raise NotImplementedError("fbgemm TBE on tpu: variable batch sizes per feature (VBE) "
                                  "are not supported")
    # aux_bool: is_experimental, use_uniq_cache_locations_bwd, use_homogeneous_placements,
    # apply_global_weight_decay, gradient_clipping, stochastic_rounding, mixed_D
    if aux_bool[3]:
        raise NotImplementedError("fbgemm TBE on tpu: global weight decay is not supported")
    if aux_bool[4]:
        raise NotImplementedError("fbgemm TBE on tpu: gradient_clipping is not supported")
    if optimizer == "rowwise_adagrad" and kw["optim_float"][2] > 0:
        raise NotImplementedError("fbgemm TBE on tpu: rowwise_adagrad's max_norm is not "
                                  "supported (fbgemm's CPU kernel ignores it too)")
    if optimizer == "adam" and kw["optim_bool"] and kw["optim_bool"][0]:
        raise NotImplementedError("fbgemm TBE on tpu: Adam's use_rowwise_bias_correction is "
                                  "not supported")


def _optimizer_state(kw, optimizer):
    """The optimizer's state tensors, their per-feature offsets and the hyperparameters
    (eps, weight_decay, weight_decay_mode, beta1, beta2) torchtpu_tbe::backward takes."""
    if optimizer == "sgd":
        return [], [], [0.0, 0.0, 0.0, 0.0, 0.0]
    m1, m1_offsets = _table(kw["momentum1"], "the optimizer state")
    f = kw["optim_float"]
    if optimizer == "rowwise_adagrad":  # optim_float: eps, weight_decay, max_norm
        return [m1], [m1_offsets], [f[0], f[1], float(kw["optim_int"][0]), 0.0, 0.0]
    if optimizer == "adagrad":  # optim_float: eps
        return [m1], [m1_offsets], [f[0], 0.0, 0.0, 0.0, 0.0]
    m2, m2_offsets = _table(kw["momentum2"], "the optimizer state")  # eps, beta1, beta2, wd
    return [m1, m2], [m1_offsets, m2_offsets], [f[0], f[3], 0.0, f[1], f[2]]


class _Lookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, placeholder, indice_weights, call):
        ctx.call = call
        ctx.weighted = indice_weights
        return torch.ops.torchtpu_tbe.forward(
            call["weights"], call["weights_offsets"], call["D_offsets"], call["total_D"],
            call["max_D"], call["indices"], call["offsets"], call["pooling_mode"],
            indice_weights, call["output_dtype"])

    @staticmethod
    def backward(ctx, grad_output):
        c = ctx.call
        grad_weights = None
        if ctx.needs_input_grad[1]:  # (before the update: the gradient of the rows looked up)
            grad_weights = torch.ops.torchtpu_tbe.indice_weights_grad(
                grad_output, c["weights"], c["weights_offsets"], c["D_offsets"], c["indices"],
                c["offsets"], c["feature_requires_grad"])
        torch.ops.torchtpu_tbe.backward(
            grad_output, c["weights"], c["weights_offsets"], c["D_offsets"], c["indices"],
            c["offsets"], c["pooling_mode"], ctx.weighted, c["optimizer"], c["states"],
            c["state_offsets"], c["learning_rate"], c["hyper"], c["iter"])
        return None, grad_weights, None


class _DenseLookup(torch.autograd.Function):
    """fbgemm's dense TBE (DenseTableBatchedEmbeddingBagsCodegen, TorchRec's data-parallel
    tables): the weights are an ordinary parameter whose gradient (the summed row gradients in a
    zeroed buffer of the weights' shape) an optimizer outside applies."""

    @staticmethod
    def forward(ctx, weights, indice_weights, call):
        ctx.call = call
        ctx.save_for_backward(weights, indice_weights)
        return torch.ops.torchtpu_tbe.forward(
            weights, call["weights_offsets"], call["D_offsets"], call["total_D"],
            call["max_D"], call["indices"], call["offsets"], call["pooling_mode"],
            indice_weights, call["output_dtype"])

    @staticmethod
    def backward(ctx, grad_output):
        c = ctx.call
        weights, indice_weights = ctx.saved_tensors
        grad_iw = None
        if ctx.needs_input_grad[1]:
            grad_iw = torch.ops.torchtpu_tbe.indice_weights_grad(
                grad_output, weights, c["weights_offsets"], c["D_offsets"], c["indices"],
                c["offsets"], c["feature_requires_grad"])
        grad_w = None
        if ctx.needs_input_grad[0]:
            grad_w = torch.zeros(weights.shape, dtype=torch.float32, device=weights.device)
            torch.ops.torchtpu_tbe.backward(
                grad_output, grad_w, c["weights_offsets"], c["D_offsets"], c["indices"],
                c["offsets"], c["pooling_mode"], indice_weights, "gradient", [], [], None,
                [0.0] * 5, 0)
            grad_w = grad_w.to(weights.dtype)
        return grad_w, grad_iw, None


def _dense_lookup(dev_weights, weights_offsets, D_offsets, total_D, max_D, hash_size_cumsum,
                  total_hash_size_bits, indices, offsets, pooling_mode, indice_weights,
                  feature_requires_grad, output_dtype=0, B_offsets=None, *args, **kwargs):
    if B_offsets is not None:
        raise NotImplementedError("fbgemm TBE on tpu: variable batch sizes per feature (VBE) "
                                  "are not supported")
    dtype = _OUTPUT_DTYPES.get(output_dtype)
    if dtype is None:
        raise NotImplementedError(f"fbgemm TBE on tpu: output_dtype {output_dtype}")
    call = dict(weights_offsets=weights_offsets, D_offsets=D_offsets, total_D=int(total_D),
                max_D=int(max_D), indices=indices, offsets=offsets, pooling_mode=pooling_mode,
                output_dtype=dtype, feature_requires_grad=feature_requires_grad)
    return _DenseLookup.apply(dev_weights, indice_weights, call)


def _lookup_kernel(optimizer, names):
    def lookup(*args, **kwargs):
        kw = dict(zip(names, args))
        kw.update(kwargs)
        _check_supported(kw, optimizer)
        weights, weights_offsets = _table(kw["weights"], "the embedding tables")
        states, state_offsets, hyper = _optimizer_state(kw, optimizer)
        dtype = _OUTPUT_DTYPES.get(kw["output_dtype"])
        if dtype is None:
            raise NotImplementedError(f"fbgemm TBE on tpu: output_dtype {kw['output_dtype']} "
                                      "(fbgemm's SparseType; tpu has FP32, FP16 and BF16)")
        call = dict(
            weights=weights, weights_offsets=weights_offsets, D_offsets=kw["D_offsets"],
            total_D=int(kw["total_D"]), max_D=int(kw["max_D"]), indices=kw["indices"],
            offsets=kw["offsets"], pooling_mode=kw["pooling_mode"], output_dtype=dtype,
            feature_requires_grad=kw["feature_requires_grad"], optimizer=optimizer,
            states=states, state_offsets=state_offsets,
            learning_rate=kw["learning_rate_tensor"], hyper=hyper, iter=int(kw["aux_int"][0]))
        return _Lookup.apply(kw["placeholder_autograd_tensor"], kw["indice_weights"], call)

    return lookup


def _bounds_check_indices(rows_per_table, indices, offsets, bounds_check_mode, warning,
                          weights=None, B_offsets=None, max_B=-1, *args, **kwargs):
    """fbgemm::bounds_check_indices on tpu (TBE's forward calls it first): torchtpu_tbe's."""
    if B_offsets is not None:
        raise NotImplementedError("fbgemm TBE on tpu: variable batch sizes per feature (VBE) "
                                  "are not supported")
    if offsets.dtype != indices.dtype:  # (fbgemm's CPU kernel casts them too, to a copy)
        offsets = offsets.to(indices.dtype)
    torch.ops.torchtpu_tbe.bounds_check(rows_per_table, indices, offsets, bounds_check_mode,
                                        warning)


def _infos_metadata(unused, B, T):
    """fbgemm::get_infos_metadata: the bits of B and T packed into an int32, computed from the
    two integers alone (the tensor only picks the kernel): fbgemm's CPU kernel, on no tensor."""
    return torch.ops.fbgemm.get_infos_metadata(torch.empty(0), B, T)


def _register_lookups(_module) -> None:
    library = torch.library.Library("fbgemm", "IMPL")
    library.impl("bounds_check_indices", _bounds_check_indices, "PrivateUse1")
    library.impl("get_infos_metadata", _infos_metadata, "PrivateUse1")
    _fbgemm_sparse.register(library)  # (the input distribution's sparse-feature ops)
    library.impl("dense_embedding_codegen_lookup_function", _dense_lookup, "AutogradPrivateUse1")
    library.impl("dense_embedding_codegen_lookup_function", _dense_lookup, "PrivateUse1")
    for optimizer in _OPTIMIZERS:
        name = f"split_embedding_codegen_lookup_{optimizer}_function_pt2"
        names = [a.name for a in getattr(torch.ops.fbgemm, name).default._schema.arguments]
        kernel = _lookup_kernel(optimizer, names)
        library.impl(name, kernel, "AutogradPrivateUse1")
        library.impl(name, kernel, "PrivateUse1")  # (inference mode skips the autograd key)
    _libraries.append(library)


def _patch_tbe(module) -> None:
    """SplitTableBatchedEmbeddingBagsCodegen on tpu: tables in device memory."""
    cls = module.SplitTableBatchedEmbeddingBagsCodegen
    if getattr(cls.__init__, "_torchtpu", False):
        return
    original = cls.__init__
    location = module.EmbeddingLocation
    compute = module.ComputeDevice

    def __init__(self, embedding_specs, *args, **kwargs):
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "tpu":
            embedding_specs = [
                (rows, dim, location.DEVICE if where == location.HOST else where, compute.CUDA)
                for rows, dim, where, _ in embedding_specs]
        original(self, embedding_specs, *args, **kwargs)

    __init__._torchtpu = True
    cls.__init__ = __init__


_dense_device = threading.local()  # the device TorchRec builds a dense TBE for (_patch_sharded)


def _patch_dense_tbe(module) -> None:
    """DenseTableBatchedEmbeddingBagsCodegen (no device argument: fbgemm's CPU mode or the current
    CUDA / MTIA device) built by TorchRec for a tpu device: moved there once built, before
    TorchRec takes views of its weights."""
    cls = module.DenseTableBatchedEmbeddingBagsCodegen
    if getattr(cls.__init__, "_torchtpu", False):
        return
    original = cls.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        device = getattr(_dense_device, "device", None)
        if device is not None:
            self.to(device)

    __init__._torchtpu = True
    cls.__init__ = __init__


def _patch_sharded(module) -> None:
    """TorchRec's data-parallel kernels (BatchedDenseEmbeddingBag, BatchedDenseEmbedding) build
    fbgemm's dense TBE in its CPU mode on any device but CUDA and MTIA: on tpu it is moved to the
    kernel's device (_patch_dense_tbe)."""
    for name in ("BatchedDenseEmbeddingBag", "BatchedDenseEmbedding"):
        cls = getattr(module, name, None)
        if cls is None or getattr(cls.__init__, "_torchtpu", False):
            continue

        def wrap(original):
            def __init__(self, config, pg=None, device=None, *args, **kwargs):
                previous = getattr(_dense_device, "device", None)
                on_tpu = device is not None and torch.device(device).type == "tpu"
                _dense_device.device = torch.device(device) if on_tpu else None
                try:
                    original(self, config, pg, device, *args, **kwargs)
                finally:
                    _dense_device.device = previous

            __init__._torchtpu = True
            return __init__

        cls.__init__ = wrap(cls.__init__)


def place_plan_on_tpu(plan):
    """The plan with every shard placed on "cuda:N" placed on "tpu:N" (in place; returned)."""
    from torch.distributed import _remote_device

    for module_plan in plan.plan.values():
        for sharding in module_plan.values():
            spec = getattr(sharding, "sharding_spec", None)
            for shard in getattr(spec, "shards", None) or []:
                device = shard.placement.device()
                if device.type == "cuda":
                    shard.placement = _remote_device(
                        f"rank:{shard.placement.rank()}/tpu:{device.index}")
    return plan


def _patch_dmp(module) -> None:
    cls = module.DistributedModelParallel
    if getattr(cls.__init__, "_torchtpu", False):
        return
    original = cls.__init__

    def __init__(self, module_, env=None, device=None, plan=None, sharders=None, **kwargs):
        if device is not None and torch.device(device).type == "tpu":
            plan = place_plan_on_tpu(plan if plan is not None
                                     else _plan_for_tpu(module_, env, sharders))
        original(self, module_, env, device, plan, sharders, **kwargs)

    __init__._torchtpu = True
    cls.__init__ = __init__


def topology(world_size: int, **kwargs):
    """TorchRec's planner Topology for ``world_size`` simulated chips: an accelerator with HBM
    ("cuda" to TorchRec's planner, the only such device type it knows besides MTIA), each with the
    simulated chip's HBM (``torch.tpu.get_device_properties().total_memory``). Keyword arguments
    go to ``Topology`` (and override these)."""
    from torchrec.distributed.planner import Topology

    kwargs.setdefault("compute_device", "cuda")
    kwargs.setdefault("hbm_cap", torch.tpu.get_device_properties(
        torch.tpu.current_device()).total_memory)
    return Topology(world_size=world_size, **kwargs)


def _plan_for_tpu(module_, env, sharders):
    """TorchRec's default plan, for the simulated chips."""
    import torch.distributed as dist
    from torchrec.distributed.comm import get_local_size
    from torchrec.distributed.planner import EmbeddingShardingPlanner
    from torchrec.distributed.sharding_plan import get_default_sharders

    world_size = env.world_size if env is not None else dist.get_world_size()
    planner = EmbeddingShardingPlanner(topology=topology(
        world_size, local_world_size=get_local_size(world_size)))
    group = env.process_group if env is not None else dist.GroupMember.WORLD
    return planner.collective_plan(module_, sharders or get_default_sharders(), group)


def embedding_costs(chip: str | None = None) -> dict[str, dict[str, float]]:
    """What the cost model charged for the table-batched embedding ops since the last
    ``torchtpu.metrics.reset()``, by op (``torchtpu_tbe::forward``, ``::backward``, ...): launches,
    HBM bytes (the rows gathered and scattered, docs/torchrec.md) and estimated seconds, on the
    simulated chip or on ``chip``. Every figure is an estimate, as ``torchtpu.metrics.estimate``."""
    from . import _C

    priced = _C.price_run(chip or "", -1.0)
    out: dict[str, dict[str, float]] = {}
    for key, field in (("op_launches", "launches"), ("op_hbm_bytes", "hbm_bytes"),
                       ("op_seconds", "estimated_s")):
        for name, value in priced[key].items():
            if name.startswith("torchtpu_tbe::"):
                out.setdefault(name, {})[field] = value
    return out


def install() -> None:
    # (fbgemm_gpu/__init__.py imports its sparse_ops last, after loading its libraries: the ops
    # exist then; fbgemm_gpu itself is in sys.modules, half imported, while it imports torch,
    # which loads torchtpu)
    after_import("fbgemm_gpu.sparse_ops", _register_lookups)
    after_import("fbgemm_gpu.split_table_batched_embeddings_ops_training", _patch_tbe)
    after_import("fbgemm_gpu.split_table_batched_embeddings_ops_training", _patch_dense_tbe)
    after_import("torchrec.distributed.batched_embedding_kernel", _patch_sharded)
    after_import("torchrec.distributed.model_parallel", _patch_dmp)


__all__ = ["embedding_costs", "install", "place_plan_on_tpu", "topology"]
