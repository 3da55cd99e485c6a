"""One TorchTitan training run, launched by torchrun, with what the tests compare written as JSON.

    torchrun --standalone --nproc-per-node N test/torchtitan/run_titan.py \
        --device tpu|cpu --json OUT [TorchTitan's arguments: --module llama3 --config ...]

The run is TorchTitan's own ``torchtitan.train`` path (``ConfigManager().parse_args``,
``config.build()``, ``trainer.train()``), with two additions: each logged step's loss and gradient
norm is recorded (a wrapper around the trainer's ``metrics_processor.log``), and rank 0 writes
``OUT`` with them, the device, the host seconds of the training loop and, on tpu, what
``torchtpu.metrics`` counted (fallbacks, collectives, the estimated device time per step).

``--device tpu``: nothing is set; TorchTitan picks "tpu" itself (``torch._utils.
_get_available_device_type()`` finds the registered PrivateUse1 device) and ``tpu_dist`` as the
process group's backend (``Backend.default_device_backend_map``). ``--device cpu`` is the
reference: TorchTitan has no CPU mode, so the device type it reads at import is made "cpu"
(gloo then) and ``torch.cpu`` is given the memory queries TorchTitan's memory monitor calls
(zeros), with the FlexAttention and Gloo stand-ins below. Only the reference run is patched,
but for torch 2.14's ``torch.distributed.set_timeout``, which both runs get on torch 2.13.
"""
import json
import os
import sys
import time
import types


def _args():
    argv = sys.argv[1:]
    device, out = "tpu", None
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] == "--device":
            device, i = argv[i + 1], i + 2
        elif argv[i] == "--json":
            out, i = argv[i + 1], i + 2
        else:
            rest.append(argv[i])
            i += 1
    return device, out, rest


def _cpu_reference():
    # Without torchtpu: the CPU's run is PyTorch's alone (torch.accelerator is then None, as
    # c10d's barrier expects of a Gloo-only process).
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch
    import torch._utils

    torch._utils._get_available_device_type = lambda: "cpu"
    cpu = torch.cpu
    cpu.get_device_name = lambda *a: "cpu"
    cpu.get_device_properties = lambda *a: types.SimpleNamespace(total_memory=1 << 40, name="cpu")
    cpu.reset_peak_memory_stats = lambda *a: None
    cpu.empty_cache = lambda *a: None
    cpu.memory_stats = lambda *a: {}
    cpu.current_device = lambda: 0  # (torch.cpu says "cpu"; TorchTitan passes it as a device id)

    # FlexAttention, the debug model's attention: PyTorch 2.13 refuses its backward on the CPU
    # (a device check in _validate_device; Inductor's CPU kernel has no backward). Past the
    # check, eager FlexAttention is PyTorch's unfused implementation, device independent, the
    # same one torchtpu runs on tpu (torchtpu/_flex_attention.py): the reference runs it eagerly.
    import torch.nn.attention.flex_attention as fa

    check = fa._validate_device

    def _validate_device(query, key, value):
        if query.device.type != "cpu":
            check(query, key, value)

    fa._validate_device = _validate_device


def _cpu_flex_attention():
    """TorchTitan compiles FlexAttention with Inductor, which has no CPU backward: the reference
    runs it eagerly (PyTorch's unfused implementation; AOTAutograd's graph of it run on the CPU,
    backend "aot_eager", gives the same bits)."""
    from torch.nn.attention.flex_attention import flex_attention
    from torchtitan.models.common.attention import FlexAttention

    FlexAttention._compiled_flex_attn = flex_attention


def _cpu_fsdp_sum():
    """TorchTitan turns FSDP2's gradient division off (``set_gradient_divide_factor(1.0)``), so
    FSDP2 reduce-scatters with ``ReduceOp.PREMUL_SUM(1.0)``, which Gloo refuses; the reference
    reduce-scatters with SUM instead (``set_force_sum_reduction_for_comms``), the same sum. (On
    tpu, tpu_dist runs PREMUL_SUM itself.)"""
    from torch.distributed.fsdp import FSDPModule
    from torchtitan.distributed import fsdp

    original = fsdp.disable_fsdp_gradient_division

    def disable_fsdp_gradient_division(model):
        original(model)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_force_sum_reduction_for_comms(True)

    fsdp.disable_fsdp_gradient_division = disable_fsdp_gradient_division


def _torch_2_14_calls():
    """TorchTitan 0.3.0 calls ``torch.distributed.set_timeout`` after the first step, which
    torch 2.14 added; torch 2.13 has it as ``distributed_c10d._set_pg_timeout`` (same arguments;
    it sets Gloo's and NCCL's timeouts and leaves other backends' as they are). Given here, on
    both devices, when torch lacks it."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = distributed_c10d._set_pg_timeout


def main():
    device, out, titan_args = _args()
    if device == "cpu":
        _cpu_reference()
    _torch_2_14_calls()
    import torch
    from torchtitan.config import ConfigManager
    from torchtitan.tools import utils as titan_utils
    from torchtitan.tools.logging import init_logger

    init_logger()
    assert titan_utils.device_type == device, (titan_utils.device_type, device)
    if device == "cpu":
        _cpu_flex_attention()
        _cpu_fsdp_sum()
    config = ConfigManager().parse_args(titan_args)
    trainer = config.build()
    if config.checkpoint.create_seed_checkpoint:  # as torchtitan.train does
        trainer.checkpointer.save(curr_step=0, last_step=True)
        trainer.close()
        return
    steps = []
    log = trainer.metrics_processor.log

    def record(step, loss, max_loss, grad_norm, *a, **k):
        steps.append({"step": step, "loss": float(loss), "grad_norm": float(grad_norm)})
        return log(step, loss, max_loss, grad_norm, *a, **k)

    trainer.metrics_processor.log = record
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    init_fallbacks = {}
    if device == "tpu":
        import torchtpu.metrics as tm

        # Building and initializing the model is not a training step: its fallbacks are kept,
        # its launches are not priced with the steps.
        torch.tpu.synchronize()
        init_fallbacks = tm.fallbacks()
        tm.reset()
    t0 = time.perf_counter()
    trained = False
    try:
        trainer.train()
        trained = True
    finally:
        seconds = time.perf_counter() - t0
        res = {"device": device, "rank": rank, "world": int(os.environ.get("WORLD_SIZE", "1")),
               "model_device": str(trainer.device), "steps": steps, "train_seconds": seconds,
               "eager_mode": None}
        if device == "tpu":
            import torchtpu

            res["eager_mode"] = torchtpu.get_eager_mode()
            res["metrics"] = _tpu_metrics(init_fallbacks, len(steps))
        if torch.distributed.is_initialized():
            res["backend"] = str(torch.distributed.get_backend())
        if trained and torch.distributed.is_initialized():  # (a collective: not after a failure)
            devices = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(devices, str(trainer.device))
            res["devices"] = devices  # each rank's
        trainer.close()
        if out and rank == 0:
            with open(out, "w") as f:
                json.dump(res, f)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _tpu_metrics(init_fallbacks: dict, nsteps: int) -> dict:
    """What torchtpu counted over the training steps: fallbacks (model building's too),
    collectives, compiled graphs, and the cost model's estimate of a step on each chip."""
    import torch
    import torchtpu.metrics as tm

    torch.tpu.synchronize()
    fallbacks = dict(init_fallbacks)
    for k, v in tm.fallbacks().items():
        fallbacks[k] = fallbacks.get(k, 0) + v
    est = {}
    for chip in ("v5e", "v6e", "v7"):
        e = tm.estimate(chip)
        est[chip] = {"step_s": e["parallel_time_s"] / max(nsteps, 1),
                     "ici_s": e["ici_time_s"] / max(nsteps, 1), "launches": e["launches"],
                     "bottleneck": e["bottleneck"], "priced_as_native": e["priced_as_native"]}
    counters = tm.counters()
    comp = tm.compiled()
    return {"fallbacks": fallbacks, "estimate": est, "error_band": tm.error_band()["label"],
            "inductor_routed": counters.get("compile.inductor_routed", 0),
            "collectives": {k.split(".", 1)[1]: v for k, v in counters.items()
                            if k.startswith("collectives.") and not k.endswith("_bytes")},
            "compiled": {k: comp[k] for k in ("dynamo_graphs", "graphs", "graph_breaks", "recompilations", "programs",
                                                "program_runs", "runs_op_by_op", "program_failures")
                         if k in comp}}


if __name__ == "__main__":
    main()
