"""Compiled graphs with JAX kernels (docs/custom-kernels.md, "torch.compile").

A kernel made by ``jax_op`` stays one op in the ATen graph AOTAutograd hands to the "tpu" backend.
Its host code (JAX, interpret mode) cannot run on a stream's worker, which never takes the GIL
(docs/design.md 6), so it cannot be a node of a program (docs/design.md 3.2). The graph is cut at
each kernel: the runs of ops between kernels are programs of their own (captured and replayed as
any graph's), and each kernel runs between them as in eager, one launch in the ledger. No JAX is
imported here.
"""
from __future__ import annotations

import operator

import torch


def _kernel_names() -> set:
    from . import _registered
    return set(_registered)


def _is_kernel(node, names) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    name = getattr(target, "name", None)
    if callable(name):
        try:
            qualified = name()
        except Exception:
            return False
        return qualified.split(".")[0] in names
    return False


def has_kernels(gm) -> bool:
    names = _kernel_names()
    return bool(names) and any(_is_kernel(n, names) for n in gm.graph.nodes)


class _Program(torch.nn.Module):
    """A piece of the graph between kernels, run as a program (``make_program``'s result)."""

    def __init__(self, program, single: bool):
        super().__init__()
        self.program = program
        self.single = single

    def forward(self, *args):
        outs = self.program(list(args))
        return outs[0] if self.single else tuple(outs)


class SplitGraph:
    """An ATen graph cut at its kernels: ``pieces`` (programs, ``_GraphProgram``) and kernels run
    in graph order by the split module. Called with AOTAutograd's boxed convention."""

    def __init__(self, gm, make_program):
        from torch.fx.passes.split_module import split_module

        names = _kernel_names()
        part, assignment, kernel_parts = 0, {}, {}
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if _is_kernel(node, names):
                part += 1
                assignment[node.name] = kernel_parts[node.name] = part
                part += 1
            elif node.target is operator.getitem and node.args[0].name in kernel_parts:
                assignment[node.name] = kernel_parts[node.args[0].name]  # (its outputs)
                continue
            else:
                assignment[node.name] = part
        split = split_module(gm, None, lambda n: assignment[n.name], keep_original_order=True)
        self.pieces = []
        self.kernels = 0
        for child_name, child in list(split.named_children()):
            if any(_is_kernel(n, names) for n in child.graph.nodes):
                self.kernels += 1
                continue
            output = next(n for n in child.graph.nodes if n.op == "output")
            single = not isinstance(output.args[0], (tuple, list))
            if single:  # (programs take their outputs as a list)
                value = output.args[0]
                output.args = ((value,),)
                child.graph.lint()
                child.recompile()
            program = make_program(child)
            self.pieces.append(program)
            setattr(split, child_name, _Program(program, single))
        self.module = split
        self.name = f"graph cut at {self.kernels} kernel(s)"

    def __call__(self, args):
        args = list(args)
        outs = self.module(*args)
        return list(outs) if isinstance(outs, (tuple, list)) else [outs]

    def stats(self) -> list:
        out = []
        for piece in self.pieces:
            out.extend(piece.stats())
        return out
