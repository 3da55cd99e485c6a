"""The model zoos' run on "tpu" and its comparison with the CPU (test/models/zoo.py and
test/models/diffusers_zoo.py build the CPU reference; this module runs it again on "tpu"): the
forward, the backward with its float64 rule for ill-conditioned gradients, generate(), and one
AdamW step whose update is compared with the CPU's; in mode "compiled", a failure PyTorch's own
compile shares on the CPU is a harness limit."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))  # compare_errors.py
from compare_errors import same_failure  # noqa: E402  when a CPU compile's error excuses tpu's

# float32 models of a few layers: matmuls at "highest" equal fp32 GEMMs up to addition order,
# and addmm adds the bias after the product (one extra rounding); through a few layers and a
# softmax this stays far below 1e-4.
ATOL, RTOL = 1e-4, 1e-4


def first_tensor(out):
    """The main floating-point output: logits, last hidden state, or the first tensor found."""
    import torch

    if isinstance(out, torch.Tensor):  # (a bare tensor: its .values() is the sparse accessor)
        if out.is_floating_point():
            return out
        raise LookupError("no floating-point tensor in the model output")
    for k in ("logits", "last_hidden_state", "audio_values", "reconstruction"):
        value = getattr(out, k, None) if not isinstance(out, (tuple, list, torch.Tensor)) else None
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value
    values = out.values() if hasattr(out, "values") else out if isinstance(out, (tuple, list)) else [out]
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v
        if isinstance(v, (tuple, list)) or (hasattr(v, "values") and not isinstance(v, torch.Tensor)):
            try:
                return first_tensor(v)
            except LookupError:
                pass
    raise LookupError("no floating-point tensor in the model output")



LR, WEIGHT_DECAY, EPS = 1e-3, 1e-2, 1e-8  # the AdamW step of the zoos (AdamW's defaults but lr)
# The gradient below which an element's first AdamW step is not pinned by the gradient: see
# check_adamw_update.
GRAD_FLOOR = 1e-5
# Relative tolerance of an update pinned by its gradient: 2 * EPS / GRAD_FLOOR (see
# check_adamw_update: the updates of two gradients of the same sign, both at least GRAD_FLOOR,
# differ by at most EPS / GRAD_FLOOR = 1e-3 of lr; twice that for margin).
STEP_RTOL = 2 * EPS / GRAD_FLOOR


def adamw_step(model) -> list:
    """One AdamW step (lr 1e-3) of the model's parameters; their new values."""
    import torch

    torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, eps=EPS).step()
    return [p.detach().clone() for p in model.parameters()]


def check_adamw_update(name: str, old, new_tpu, new_cpu, grad_tpu, grad_cpu,
                       compiled: bool = False) -> int:
    """Raises AssertionError unless one AdamW step moved a parameter on "tpu" as it moved it on
    the CPU. `old`: its values before the step (equal on both devices); `new_*`: after it;
    `grad_*`: the gradients each step used (None: no gradient, the step must leave it alone).
    `compiled`: the "tpu" backward ran through AOTAutograd, which gives a parameter that the
    outputs depend on but the loss does not (a pooler beside the hidden state compared) a zero
    gradient where eager autograd leaves None (PyTorch's own aot_eager on the CPU does the same):
    its step is then weight decay alone. Returns the number of elements whose update was
    compared with the CPU's.

    The update itself (new - old) is compared, not the new values: an update is ~lr = 1e-3 and
    a step that does nothing would pass a comparison of the values at any tolerance above lr.
    AdamW's first step moves an element by u = -lr * (g / (|g| + eps) + wd * old) (bias
    corrections cancel: m_hat = g, v_hat = g^2). Where both gradients have one sign and both
    are at least GRAD_FLOOR, g / (|g| + eps) is that sign within eps / GRAD_FLOOR = 1e-3,
    whatever the gradients' values: the two updates must agree within STEP_RTOL of the CPU's,
    plus one float32 rounding of each device's new value (an ulp of the parameter each: the
    update is the difference of two float32 values near `old`; with lr = 1e-3 an ulp of a
    parameter of magnitude 1 is 1.2e-4 of the update, and far more of the weight decay's part,
    -1e-5 * old, where the gradient is exactly zero). Where the gradients are smaller, or of
    opposite signs (a true gradient of ~0 whose float32 rounding noise has either sign: within
    the gradient comparison's atol 1e-4), the update's sign is the noise's, and only Adam's
    bound is checked: |u| <= lr * (1 + wd * |old|). A step that does nothing fails wherever
    a gradient is pinned; a parameter without any pinned element counts none."""
    import torch

    dtype = new_tpu.dtype if new_tpu.is_floating_point() else torch.float32
    old, new_tpu, new_cpu = (t.detach().cpu().double() for t in (old, new_tpu, new_cpu))
    u_tpu, u_cpu = new_tpu - old, new_cpu - old
    ulp = torch.finfo(dtype).eps * old.abs()  # (at least an ulp of |old| in its dtype)
    if compiled and grad_cpu is None and grad_tpu is not None and not grad_tpu.detach().cpu().any():
        grad_cpu = torch.zeros_like(grad_tpu, device="cpu")
        new_cpu = (old * (1 - LR * WEIGHT_DECAY)).to(dtype).double()  # weight decay alone
        u_cpu = new_cpu - old
    if grad_cpu is None or grad_tpu is None:
        if grad_cpu is not None or grad_tpu is not None:
            raise AssertionError(f"step of {name}: a gradient on one device only "
                                 f"(tpu {grad_tpu is not None}, cpu {grad_cpu is not None})")
        if not torch.equal(u_tpu, torch.zeros_like(u_tpu)) or not torch.equal(u_cpu, u_tpu):
            raise AssertionError(f"step of {name}: no gradient, yet it moved")
        return 0
    g_tpu, g_cpu = grad_tpu.detach().cpu().double(), grad_cpu.detach().cpu().double()
    pinned = (g_tpu.abs().minimum(g_cpu.abs()) >= GRAD_FLOOR) & (g_tpu.sign() == g_cpu.sign())
    pinned |= (g_tpu == 0) & (g_cpu == 0)  # weight decay alone, the same on both
    allowed = STEP_RTOL * u_cpu.abs() + 2 * ulp
    bad = pinned & ((u_tpu - u_cpu).abs() > allowed)
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(
            f"step of {name}: {int(bad.sum())} of {int(pinned.sum())} updates pinned by their "
            f"gradient differ from the CPU's beyond rtol {STEP_RTOL:g}; first at flat index {i}: "
            f"tpu {u_tpu.flatten()[i].item():.6g}, cpu {u_cpu.flatten()[i].item():.6g} "
            f"(gradients tpu {g_tpu.flatten()[i].item():.3g}, cpu {g_cpu.flatten()[i].item():.3g})")
    bound = LR * (1 + WEIGHT_DECAY * old.abs()) * (1 + STEP_RTOL) + 2 * ulp
    over = ~pinned & (u_tpu.abs() > bound)
    if over.any():
        i = int(over.flatten().nonzero()[0])
        raise AssertionError(f"step of {name}: {int(over.sum())} updates beyond Adam's first-step "
                             f"bound lr * (1 + wd |p|); first at flat index {i}: "
                             f"{u_tpu.flatten()[i].item():.6g}")
    return int(pinned.sum())


def cpu_side_failure(result: dict, stage: str, e: Exception) -> dict:
    """The record of a model the CPU side could not build or run (a harness limitation)."""
    return {**result, "status": "harness", "reason": f"CPU side ({stage}): {type(e).__name__}: {str(e)[:160]}"}


def random_forward(result: dict, model, inputs: dict, out) -> dict | None:
    """The record of a model whose forward draws random numbers (run again on the CPU under
    another seed, it differs from `out`), a harness limitation; None when it does not. CPU and
    device have separate generators (as with CUDA): such a forward cannot give the same result
    on both."""
    import torch

    torch.manual_seed(1)
    with torch.no_grad():
        again = first_tensor(model(**inputs))
    if not torch.allclose(again, out.detach(), atol=ATOL, rtol=RTOL, equal_nan=True):
        return {**result, "status": "harness",
                "reason": "the forward pass draws random numbers (another seed changes it)"}
    return None



def tree_map_only(kind, fn, tree):
    """fn applied to every `kind` leaf of nested lists, tuples and dicts (inputs such as a list
    of conditioning images, one per ControlNet)."""
    from torch.utils._pytree import tree_map_only as _map

    return _map(kind, fn, tree)


def fresh_model(ref: dict):
    """A new copy of the reference's untrained model: ref["make"]() where the model cannot be
    deep-copied (weight-normalized layers hold non-leaf tensors), else a deep copy."""
    import copy

    return ref["make"]() if ref.get("make") else copy.deepcopy(ref["model"])


class IllConditioned(Exception):
    """The CPU's float32 result is itself far from float64: the comparison means nothing."""


def float64_grads(ref: dict) -> dict:
    """Gradients of the same forward and loss on the CPU in float64 (computed once; {} when the
    model does not run in float64)."""
    import torch

    if "float64_grads" not in ref:
        try:
            model = fresh_model(ref).double()
            torch.manual_seed(0)
            inputs = tree_map_only(torch.Tensor, lambda v: v.double() if v.is_floating_point() else v,
                                   ref["inputs"])
            first_tensor(model(**inputs)).pow(2).mean().backward()
            ref["float64_grads"] = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        except Exception:  # noqa: BLE001 - no float64 reference: the plain comparison decides
            ref["float64_grads"] = {}
    return ref["float64_grads"]


def _forward_on_tpu(ref: dict, compiled: bool, run: dict):
    """The model on "tpu" (compiled or not) and its forward against the CPU's; the forward's
    output is kept in run["out"] before it is compared (a failure's report reads it)."""
    import torch
    import torchtpu

    dev_model = fresh_model(ref).to("tpu")
    torchtpu.metrics.reset()
    if compiled:
        import torch._dynamo

        torch._dynamo.reset()
    forward = torch.compile(dev_model, backend="tpu") if compiled else dev_model
    torch.manual_seed(0)
    run["out"] = first_tensor(forward(**tree_map_only(torch.Tensor, lambda v: v.to("tpu"),
                                                      ref["inputs"])))
    torch.testing.assert_close(run["out"].detach().cpu(), ref["out"], atol=ATOL, rtol=RTOL)
    return dev_model


def _check_grads(ref: dict, dev_model, checked: list) -> None:
    """Every parameter's gradient against the CPU's (or, ill-conditioned, against float64)."""
    import torch

    for name, p_tpu in dev_model.named_parameters():
        if name not in ref["grads"]:
            continue
        got, want = p_tpu.grad.cpu(), ref["grads"][name]
        if torch.allclose(got, want, atol=1e-4, rtol=1e-3):
            continue
        # An ill-conditioned gradient (a sum of many large terms that cancel) can differ by
        # more than the tolerance between two float32 summation orders. Then tpu passes if
        # it is as close to a float64 reference as the CPU is (within 2x, plus 1e-6).
        exact = float64_grads(ref).get(name)
        if exact is not None:
            err_tpu = (got.double() - exact).abs().max().item()
            err_cpu = (want.double() - exact).abs().max().item()
            scale = exact.abs().max().item()
            if err_cpu > 0.1 * scale:
                # the CPU's float32 gradient is no reference: nothing to compare with
                raise IllConditioned(f"grad of {name}: the CPU's float32 gradient is off by "
                                     f"{err_cpu:.2e} from float64 (largest |grad| {scale:.2e})")
            if err_tpu <= 2 * err_cpu + 1e-6:
                checked.append(f"{name}: |tpu - f64| {err_tpu:.2e}, |cpu - f64| {err_cpu:.2e}")
                continue
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3,
                                   msg=lambda m: f"grad of {name}: {m}")


def _check_generate(ref: dict, dev_model) -> None:
    import torch

    with torch.no_grad():
        g_tpu = dev_model.generate(ref["ids"].to("tpu"), max_new_tokens=4, do_sample=False)
    if not torch.equal(g_tpu.cpu(), ref["generated"]):
        raise AssertionError(f"generated tokens differ: {g_tpu.cpu().tolist()} vs "
                             f"{ref['generated'].tolist()}")


def _check_optimizer_step(ref: dict, dev_model, compiled: bool) -> None:
    import torch

    named = list(dev_model.named_parameters())
    before = [p.detach().cpu() for _, p in named]
    opt = torch.optim.AdamW(dev_model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, eps=EPS,
                            capturable=compiled)
    (torch.compile(opt.step, backend="tpu") if compiled else opt.step)()
    # The update of every parameter against the CPU's (check_adamw_update: a step that does
    # nothing fails), and at least one element somewhere pinned by its gradient.
    pinned = sum(check_adamw_update(name, old, p_tpu, p_cpu, p_tpu.grad, ref["grads"].get(name),
                                    compiled)
                 for (name, p_tpu), old, p_cpu in zip(named, before, ref["stepped"]))
    if pinned == 0:
        raise AssertionError("optimizer step: no gradient element is large enough to pin its "
                             "update: the step was not compared")


def _passing_row(checked: list, compiled: bool) -> dict:
    import torchtpu

    row = {"status": "pass", "fallbacks": torchtpu.metrics.fallbacks()}
    if checked:
        row["checked_against_float64"] = checked
    if compiled:
        c = torchtpu.metrics.compiled()
        row["compiled"] = {k: c[k] for k in ("dynamo_graphs", "programs", "program_runs",
                                             "runs_op_by_op", "program_failures")}
        row["compiled"]["graph_breaks"] = sum(c["graph_breaks"].values())
    return row


def _failure_row(e: Exception, ref: dict, compiled: bool, stage: str, out) -> dict:
    """A failed stage's row: a backend bug, or the harness's when PyTorch's own compile on the
    CPU fails the same way."""
    import torchtpu

    try:
        torchtpu.sync()
    except Exception:  # noqa: BLE001 - a deferred error of the same failure
        pass
    unlike = None
    if compiled and stage in ("forward", "backward"):
        tpu_out = out.detach().cpu() if stage == "forward" and out is not None else None
        cpu_failure = compiled_on_cpu_fails(ref, tpu_out)
        if isinstance(cpu_failure, str):
            return {"status": "harness", "stage": stage,
                    "reason": f"PyTorch's own compile (backend aot_eager) on the CPU does "
                              f"the same: {cpu_failure}"}
        if cpu_failure is not None:
            # A CPU compile that fails excuses this failure only if it is the same one
            # (test/helpers/compare_errors.py: same exception type, same message).
            unlike = same_failure(e, cpu_failure)
            if unlike is None:
                return {"status": "harness", "stage": stage,
                        "reason": f"PyTorch's own compile (backend aot_eager) on the CPU does "
                                  f"the same: {type(cpu_failure).__name__}: {str(cpu_failure)[:200]}"}
    row = {"status": "backend bug", "stage": stage, "reason": f"{type(e).__name__}: {str(e)[:300]}",
           "fallbacks": torchtpu.metrics.fallbacks()}
    if unlike is not None:
        row["cpu_compile_fails_otherwise"] = unlike
    return row


def run_on_tpu(ref: dict, mode: str) -> dict:
    """Run the stages of `ref` on "tpu" in eager `mode`, compared with the CPU results. Mode
    "compiled": the forward (with AOTAutograd's backward) and a capturable AdamW step compiled
    with torch.compile(backend="tpu"), in strict eager (generate() runs eagerly)."""
    import torchtpu

    compiled = mode == "compiled"
    torchtpu.set_eager_mode("strict" if compiled else mode)
    run = {"stage": "forward", "out": None}  # the stage reached; the forward's output on "tpu"
    checked: list[str] = []
    try:
        dev_model = _forward_on_tpu(ref, compiled, run)
        run["stage"] = "backward"
        run["out"].float().pow(2).mean().backward()
        _check_grads(ref, dev_model, checked)
        if ref["generated"] is not None:
            run["stage"] = "generate"
            _check_generate(ref, dev_model)
        run["stage"] = "optimizer"
        _check_optimizer_step(ref, dev_model, compiled)
        torchtpu.sync()
        return _passing_row(checked, compiled)
    except IllConditioned as e:
        return {"status": "harness", "reason": f"ill-conditioned in float32: {e}"}
    except Exception as e:  # noqa: BLE001
        return _failure_row(e, ref, compiled, run["stage"], run["out"])


def compiled_on_cpu_fails(ref: dict, tpu_out=None):
    """How the same forward and backward compiled on the CPU by PyTorch's own backend
    "aot_eager" (Dynamo and AOTAutograd, then eager kernels) fails, or None when it runs: its
    exception (a compiled "tpu" failure that raises the same one is PyTorch's, not torchtpu's:
    run_on_tpu compares them). With `tpu_out` (a compiled "tpu" forward that differs from
    eager): a sentence, when the CPU's compiled forward differs from eager as well and the "tpu"
    one equals it (the model computes another thing when compiled, as transformers' code does
    under torch.compiler.is_compiling())."""
    import torch

    try:
        torch._dynamo.reset()
        model = torch.compile(fresh_model(ref), backend="aot_eager")
        torch.manual_seed(0)
        out = first_tensor(model(**ref["inputs"]))
        cpu_compiled = out.detach()
        out.float().pow(2).mean().backward()
        if tpu_out is not None and not torch.allclose(cpu_compiled, ref["out"], atol=ATOL, rtol=RTOL):
            vs_eager = (cpu_compiled - ref["out"]).abs().max().item()
            vs_tpu = (cpu_compiled - tpu_out).abs().max().item()
            if torch.allclose(tpu_out, cpu_compiled, atol=ATOL, rtol=RTOL):
                return (f"its forward differs from eager on the CPU too (max |diff| {vs_eager:.3g}); "
                        f"the compiled tpu forward equals it (max |diff| {vs_tpu:.3g})")
        return None
    except Exception as e:  # noqa: BLE001
        return e
    finally:
        torch._dynamo.reset()
