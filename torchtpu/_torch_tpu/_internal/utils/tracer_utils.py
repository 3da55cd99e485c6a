"""TorchTPU's ``tracer_utils``, written for torchtpu: reports of what an OpTracer or an
ActivationTracer recorded, and replays of their records on another device (normally "cpu") with
the difference between each recorded result and its replay.

A replay runs every recorded op (or module call) again from the inputs recorded for it, not from
the replay's own earlier results, so each delta is that op's own contribution: the first op
with a large delta is where the tpu's numerics part from the CPU's, not merely the first place
an earlier difference shows.
"""
from __future__ import annotations

import copy
import itertools
import math
from typing import Any, Sequence

import torch
from torch.utils import _pytree

from torch_tpu._internal.utils import utils
from torch_tpu._internal.utils.tracers import TensorMeta, _versions

__all__ = ["compare_replay", "link_events", "pformat_activation_tracer", "pformat_op_tracer",
           "pformat_replay", "replay_log"]

# Ops whose results are uninitialized memory: nothing to compare.
_UNINITIALIZED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                  "new_empty_strided"}


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return utils.get_tensor_summary(value)
    if isinstance(value, TensorMeta):
        return f"{value} (no values recorded)"
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__}(...)"


def _value_lines(prefix: str, label: str, value: Any) -> list[str]:
    """One line per item of a module's arguments or results (tuples and lists item by item)."""
    if isinstance(value, (tuple, list)):
        return [f"{prefix}{label}[{i}]  {_describe(v)}" for i, v in enumerate(value)]
    if isinstance(value, dict):
        return [f"{prefix}{label}[{k}]  {_describe(v)}" for k, v in value.items()]
    return [f"{prefix}{label}  {_describe(value)}"]


def _module_label(event: utils.Event) -> str:
    name = event.get("name", "")
    return type(event["module"]).__name__ + (f" '{name}'" if name else "")


# ---------------------------------------------------------------------------------------------
# Reports of the records.


def pformat_op_tracer(tracer: utils.OpTracer, calls: bool = True) -> str:
    """OpTracer's report: the calls per op (``tracer._pformat()``) and, when ``calls`` is true,
    every call in order with its input and output tensors (shape, dtype, device)."""
    text = tracer._pformat()
    if not calls or not tracer.log:
        return text
    width = max(len(e["name"]) for e in tracer.log)
    lines = [text, "", f"calls in order ({len(tracer.log)}):"]
    for e in tracer.log:
        ins = ", ".join(str(m) for m in e["inputs"]) or "-"
        outs = ("raised " + type(e["error"]).__name__ if "error" in e
                else ", ".join(str(m) for m in e.get("outputs", [])) or "-")
        lines.append(f"  #{e['idx']:<5}{e['name']:<{width}}  ({ins}) -> ({outs})")
    return "\n".join(lines)


def link_events(pre_log: Sequence[utils.Event], log: Sequence[utils.Event]) -> None:
    """Pairs each forward-pre event with the forward event of the same call, by hook order:
    adds ``"post_event"`` to the first and ``"pre_event"`` to the second. A call whose forward
    raised keeps no ``"post_event"``. Raises RuntimeError when the logs cannot come from one
    tracer (a forward event with no call open for its module)."""
    open_calls: list[utils.Event] = []
    pres = iter(sorted(pre_log, key=lambda e: e["idx"]))
    pending = next(pres, None)
    for post in sorted(log, key=lambda e: e["idx"]):
        while pending is not None and pending["idx"] < post["idx"]:
            open_calls.append(pending)
            pending = next(pres, None)
        while open_calls and open_calls[-1]["module"] is not post["module"]:
            open_calls.pop()  # (a call that raised inside this one)
        if not open_calls:
            raise RuntimeError(
                f"forward event #{post['idx']} ({_module_label(post)}) has no forward-pre "
                "event before it: pre_log and log are not the forward_pre_log and forward_log "
                "of one ActivationTracer")
        pre = open_calls.pop()
        pre["post_event"] = post
        post["pre_event"] = pre


def pformat_activation_tracer(tracer: utils.ActivationTracer) -> str:
    """ActivationTracer's report: the forward calls as a tree (each module with its inputs,
    its children, its outputs and how long it took on the host), then the backward calls."""
    link_events(tracer.forward_pre_log, tracer.forward_log)
    events = sorted(itertools.chain(tracer.forward_pre_log, tracer.forward_log),
                    key=lambda e: e["idx"])
    lines = [f"ActivationTracer: {len(tracer.forward_pre_log)} forward calls, "
             f"{len(tracer.backward_log)} backward calls"]
    pre_ids = {id(e) for e in tracer.forward_pre_log}
    for e in events:
        bar = "|  " * e["depth"]
        inner = bar + "|  "
        if id(e) in pre_ids:
            lines.append(f"{bar}+- {_module_label(e)} (#{e['idx']})")
            lines += _value_lines(inner, "in", e["args"])
            for key, value in e["kwargs"].items():
                lines.append(f"{inner}in[{key}]  {_describe(value)}")
            if "post_event" not in e:
                lines.append(f"{bar}+- {_module_label(e)} did not return (it raised?)")
        else:
            lines += _value_lines(inner, "out", e["output"])
            took = (e["time"] - e["pre_event"]["time"]) * 1e3
            lines.append(f"{bar}+- end {_module_label(e)} (#{e['idx']}, {took:.3f} ms)")
    if tracer.backward_log:
        lines.append("backward:")
        for e in tracer.backward_log:
            lines.append(f"  {_module_label(e)} (#{e['idx']}, depth {e['depth']})")
            lines += _value_lines("    ", "grad_output", e["grad_output"])
            lines += _value_lines("    ", "grad_input", e["grad_input"])
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Replays.


def _to_device(tree: Any, device: torch.device, recorded_on: str | None = None) -> Any:
    """``tree`` with every tensor copied to ``device`` (always a new tensor: a replayed
    in-place op must not change the record), and every torch.device of the recorded device's
    type replaced by ``device``."""
    kind = torch.device(recorded_on).type if recorded_on else None

    def move(x):
        if isinstance(x, TensorMeta):
            raise ValueError("the log holds tensor metadata only (OpTracer(values=False)): there "
                             "are no recorded values to replay")
        if isinstance(x, torch.Tensor):
            return x.detach().to(device, copy=True)
        if isinstance(x, torch.device) and kind is not None and x.type == kind:
            return device
        return x
    return _pytree.tree_map(move, tree)


def _module_copies(log: Sequence[utils.Event], device: torch.device) -> dict[int, Any]:
    """A copy on ``device`` of every module in ``log``, the model left where it is: outermost
    modules are copied first, and the modules inside a copied one map to its copies (one copy of
    the weights in all). Parameters and buffers are copied straight to ``device``."""
    copies: dict[int, torch.nn.Module] = {}
    for event in sorted(log, key=lambda e: e["depth"]):
        module = event["module"]
        if id(module) in copies:
            continue
        memo: dict[int, Any] = {}
        for p in module.parameters():
            memo[id(p)] = torch.nn.Parameter(p.detach().to(device, copy=True),
                                             requires_grad=p.requires_grad)
        for b in module.buffers():
            memo[id(b)] = b.detach().to(device, copy=True)
        clone = copy.deepcopy(module, memo)
        for original, copied in zip(module.modules(), clone.modules()):
            copies.setdefault(id(original), copied)
    return copies


def replay_log(log: Sequence[utils.Event], device: str | torch.device
               ) -> list[utils.Event | Exception]:
    """Runs every event of ``log`` again on ``device``, each from its own recorded inputs, and
    returns one item per event: an Event (``module`` or ``op``, ``args``, ``kwargs``,
    ``output`` on ``device``, ``idx``) or the exception the replay raised.

    ``log`` is an ActivationTracer's ``forward_log`` (TorchTPU's use: each module call is
    replayed on a copy of the module on ``device``; the model is not moved) or an OpTracer's
    ``log`` (each ATen op is replayed; its devices of the recorded device's type become
    ``device``). Replays run without autograd."""
    device = torch.device(device)
    events = list(log)
    if not events:
        return []
    if all("op" in e for e in events):
        if any(isinstance(leaf, TensorMeta) for e in events
               for leaf in _pytree.tree_leaves((e["args"], e["kwargs"]))):
            raise ValueError("this OpTracer kept tensor metadata only (OpTracer(values=False)): "
                             "there are no recorded values to replay")
        return [_replay_op(e, device) for e in events]
    if not all("module" in e and "output" in e for e in events):
        raise ValueError("replay_log replays an ActivationTracer's forward_log or an OpTracer's "
                         "log; these events are neither (a forward_pre_log has no outputs)")
    copies = _module_copies(events, device)
    replayed: list[utils.Event | Exception] = []
    for e in events:
        module = copies[id(e["module"])]
        try:
            args = _to_device(e["args"], device)
            kwargs = _to_device(e["kwargs"], device)
            with torch.no_grad():
                output = module(*args, **kwargs)
        except Exception as exc:  # (reported per event by pformat_replay)
            replayed.append(exc)
            continue
        replayed.append({"module": module, "args": args, "kwargs": kwargs, "output": output,
                         "idx": e["idx"], "name": e.get("name", ""), "depth": e["depth"]})
    return replayed


def _replay_op(e: utils.Event, device: torch.device) -> utils.Event | Exception:
    try:
        args = _to_device(e["args"], device, e.get("device"))
        kwargs = _to_device(e["kwargs"], device, e.get("device"))
        with torch.no_grad():
            output = e["op"](*args, **kwargs)
    except Exception as exc:  # (reported per op by pformat_replay)
        return exc
    return {"op": e["op"], "name": e["name"], "args": args, "kwargs": kwargs, "output": output,
            "idx": e["idx"]}


# ---------------------------------------------------------------------------------------------
# Comparing a replay with the record.


def _tensor_delta(recorded: Any, replayed: Any) -> dict[str, Any]:
    """max_abs, max_rel (over elements where the replay is nonzero), mismatched (elements that
    differ, NaN against a number included), numel and a note, for one recorded output."""
    result = {"max_abs": 0.0, "max_rel": 0.0, "mismatched": 0, "numel": 0, "note": ""}
    if isinstance(recorded, TensorMeta):
        result["note"] = "no recorded values"
        return result
    tensors = isinstance(recorded, torch.Tensor) + isinstance(replayed, torch.Tensor)
    if tensors == 1:
        result["note"] = (f"{type(recorded).__name__} against replay "
                          f"{type(replayed).__name__}")
        result["mismatched"] = 1
        return result
    if tensors == 0:
        if recorded != replayed:
            result["note"] = f"{recorded!r} against replay {replayed!r}"
            result["mismatched"] = 1
        return result
    if recorded.shape != replayed.shape:
        result["note"] = f"shape {tuple(recorded.shape)} against replay {tuple(replayed.shape)}"
        result["mismatched"] = max(recorded.numel(), replayed.numel())
        return result
    a = recorded.detach().to("cpu")
    b = replayed.detach().to("cpu")
    if a.dtype != b.dtype:
        result["note"] = f"dtype {a.dtype} against replay {b.dtype}"
    wide = torch.complex128 if (a.is_complex() or b.is_complex()) else torch.float64
    a, b = a.to(wide), b.to(wide)
    result["numel"] = b.numel()
    if b.numel() == 0:
        return result
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    error = torch.where(same, torch.zeros((), dtype=torch.float64), (a - b).abs())
    unmatched_nan = torch.isnan(error)
    result["mismatched"] = int((~same).sum())
    finite = error[~unmatched_nan & torch.isfinite(error)]
    result["max_abs"] = float(finite.max()) if finite.numel() else 0.0
    if (~torch.isfinite(error)).any():
        result["max_abs"] = math.inf
        result["note"] = (result["note"] + "; " if result["note"] else "") + (
            f"{int((~torch.isfinite(error)).sum())} NaN/Inf elements differ")
    size = b.abs()
    nonzero = (size > 0) & torch.isfinite(error)
    if nonzero.any():
        result["max_rel"] = float((error[nonzero] / size[nonzero]).max())
    return result


def _merge(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    merged = {"max_abs": 0.0, "max_rel": 0.0, "mismatched": 0, "numel": 0, "note": ""}
    for d in deltas:
        merged["max_abs"] = max(merged["max_abs"], d["max_abs"])
        merged["max_rel"] = max(merged["max_rel"], d["max_rel"])
        merged["mismatched"] += d["mismatched"]
        merged["numel"] += d["numel"]
    merged["note"] = "; ".join(d["note"] for d in deltas if d["note"])
    return merged


def _event_delta(event: utils.Event, replayed: utils.Event | Exception) -> dict[str, Any]:
    if "error" in event:  # (an op that raised while recorded: OpTracer keeps it)
        again = (f"raised {type(replayed).__name__}" if isinstance(replayed, Exception)
                 else "ran")
        return {**_merge([]), "note": f"raised {type(event['error']).__name__} when recorded; "
                                      f"the replay {again}"}
    if isinstance(replayed, Exception):
        return {**_merge([]), "note": f"replay raised {type(replayed).__name__}: {replayed}",
                "error": replayed}
    if "op" in event:
        base = event["op"]._schema.name.split("::")[-1]
        if base in _UNINITIALIZED:
            return {**_merge([]), "note": "uninitialized memory: not compared"}
        if torch.Tag.nondeterministic_seeded in event["op"].tags:
            return {**_merge([]), "note": "random op: its replay draws other numbers"}
    elif isinstance(event["module"], torch.nn.modules.dropout._DropoutNd) and \
            event["module"].training:
        return {**_merge([]), "note": "dropout in training mode: its replay draws other numbers"}
    recorded = _pytree.tree_leaves(event["output"])
    again = _pytree.tree_leaves(replayed["output"])
    if len(recorded) != len(again):
        return {**_merge([]), "mismatched": 1,
                "note": f"{len(recorded)} outputs against {len(again)} in the replay"}
    merged = _merge([_tensor_delta(r, p) for r, p in zip(recorded, again)])
    if "versions" in event and _versions(
            (event["args"], event["kwargs"], event["output"])) != event["versions"]:
        merged["stale"] = True
        merged["note"] = ("an input or output was changed in place after it was recorded: "
                          "the comparison uses its current value" +
                          ("; " + merged["note"] if merged["note"] else ""))
    return merged


def compare_replay(log: Sequence[utils.Event], replayed_log: Sequence[utils.Event | Exception]
                   ) -> list[dict[str, Any]]:
    """For each event and its replay: ``idx``, ``label`` (the op's name, or the module's class
    and name), ``max_abs`` and ``max_rel`` errors of its outputs against the replay (relative
    to the replay, over its nonzero elements), ``mismatched`` and ``numel`` elements, and a
    ``note`` when they could not be compared or something else differs; ``stale`` is present
    (True) when a recorded tensor was changed in place after it was recorded, ``error`` when
    the replay raised."""
    if len(log) != len(replayed_log):
        raise RuntimeError(f"the log has {len(log)} events and the replay {len(replayed_log)}: "
                           "pass replay_log's result for this log")
    rows = []
    for event, replayed in zip(log, replayed_log):
        label = event["name"] if "op" in event else _module_label(event)
        rows.append({"idx": event["idx"], "label": label, **_event_delta(event, replayed)})
    return rows


def _number(v: float) -> str:
    return "0" if v == 0 else f"{v:.3g}"


def _delta_text(row: dict[str, Any]) -> str:
    if "error" in row or (row["numel"] == 0 and row["note"]):
        return row["note"]
    text = (f"max abs {_number(row['max_abs']):<9} max rel {_number(row['max_rel']):<9} "
            f"({row['mismatched']}/{row['numel']} differ)")
    return text + (f"  [{row['note']}]" if row["note"] else "")


def _recorded_device(log: Sequence[utils.Event]) -> str:
    for e in log:
        found = e.get("device") or next(
            (str(t.device) for t in _pytree.tree_leaves(e.get("output"))
             if isinstance(t, torch.Tensor)), None)
        if found:
            return found
    return "an unknown device"


def _replay_device(replayed_log: Sequence[utils.Event | Exception]) -> str:
    for r in replayed_log:
        if isinstance(r, dict):
            for t in _pytree.tree_leaves(r["output"]):
                if isinstance(t, torch.Tensor):
                    return str(t.device)
    return "the replay device"


def pformat_replay(log: Sequence[utils.Event], pre_log: Sequence[utils.Event] | None,
                   replayed_log: Sequence[utils.Event | Exception]) -> str:
    """The record against its replay, event by event in order: each one's max absolute and
    relative error (and how many elements differ), ending with the first event whose outputs
    differ and the one that differs most.

    For an ActivationTracer (``log`` its forward_log, ``pre_log`` its forward_pre_log), each
    module call is shown with its depth, host time, inputs, recorded and replayed outputs. For
    an OpTracer's log, one line per op (``pre_log`` is not used: pass None)."""
    rows = compare_replay(log, replayed_log)
    ops = bool(log) and "op" in log[0]
    lines = [f"Replay on {_replay_device(replayed_log)} of {len(rows)} "
             f"{'ops' if ops else 'module calls'} recorded on {_recorded_device(log)}, each "
             "from its recorded inputs (a delta is that one's own, not inherited from earlier "
             f"{'ops' if ops else 'calls; a container spans the calls inside it'}):"]
    if ops:
        width = max(len(r["label"]) for r in rows)
        for r in rows:
            lines.append(f"  #{r['idx']:<5}{r['label']:<{width}}  {_delta_text(r)}")
    else:
        if pre_log:
            link_events(pre_log, log)
        start = min((e["time"] for e in pre_log), default=0.0) if pre_log else None
        for event, replayed, r in zip(log, replayed_log, rows):
            pre = event.get("pre_event")
            span = f"#{pre['idx']}..#{event['idx']}" if pre else f"#{event['idx']}"
            head = f"--- {r['label']} ({span}), depth {event['depth']}"
            if pre is not None and start is not None:
                head += (f", {1e3 * (pre['time'] - start):.3f} to "
                         f"{1e3 * (event['time'] - start):.3f} ms")
            lines.append(head)
            lines += _value_lines("  ", "in", event["args"])
            lines += _value_lines("  ", "recorded", event["output"])
            if isinstance(replayed, dict):
                lines += _value_lines("  ", "replay  ", replayed["output"])
            lines.append(f"  delta     {_delta_text(r)}")
    differing = [r for r in rows if r["mismatched"] and "error" not in r and "stale" not in r]
    if differing:
        first = differing[0]
        worst = max(differing, key=lambda r: r["max_abs"])
        lines.append(f"first to differ: #{first['idx']} {first['label']} "
                     f"(max abs {_number(first['max_abs'])}); largest: #{worst['idx']} "
                     f"{worst['label']} (max abs {_number(worst['max_abs'])})")
    else:
        lines.append("no recorded output differs from its replay")
    stale = sum(1 for r in rows if "stale" in r)
    if stale:
        lines.append(f"{stale} comparisons used values changed in place after they were "
                     "recorded (not counted as differences): ActivationTracer(model, "
                     "snapshot=True) keeps copies instead")
    failed = sum(1 for r in rows if "error" in r)
    if failed:
        lines.append(f"{failed} replays raised (see above)")
    return "\n".join(lines)
