"""Runs a Jupyter notebook's code cells in order, in one namespace, as a kernel would: the
notebook's text is not changed (test/torch_tpu_programs/run.py runs each .ipynb through this).

Usage: python ipynb_exec.py NOTEBOOK.ipynb

- Each code cell is compiled with its cell number as the file name, so a traceback names the cell.
- As IPython does, a cell whose last statement is an expression prints that value's repr.
- IPython syntax that is not Python: a line starting with `!` is a shell command and is run with
  /bin/sh (its exit status is printed, as IPython does not fail on it either); a line starting
  with `%` (a line magic) or a cell starting with `%%` (a cell magic) is not run, and a note
  saying so is printed. TorchTPU's notebooks vendored in third_party/torch_tpu_programs have
  neither (checked by test/python/test_torch_tpu_programs.py).
- The working directory is the notebook's folder, as Jupyter's is.
"""
import ast
import json
import os
import subprocess
import sys


def _python_source(cell_source: str, index: int) -> str:
    lines = cell_source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        print(f"[ipynb_exec] cell {index}: cell magic {lines[0].strip()!r} not run", flush=True)
        return ""
    out = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith("!"):
            out.append(f"{indent}__ipynb_shell__({stripped[1:]!r})")
        elif stripped.startswith("%"):
            out.append(f"{indent}print({('[ipynb_exec] line magic not run: ' + stripped)!r})")
        else:
            out.append(line)
    return "\n".join(out)


def _shell(command: str) -> None:
    print(f"[ipynb_exec] ! {command}", flush=True)
    status = subprocess.call(command, shell=True)
    if status:
        print(f"[ipynb_exec] shell command exited with {status}", flush=True)


def main(path: str) -> None:
    path = os.path.abspath(path)
    with open(path, encoding="utf-8") as f:
        notebook = json.load(f)
    os.chdir(os.path.dirname(path))
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path]
    namespace = {"__name__": "__main__", "__ipynb_shell__": _shell}
    code_cells = [c for c in notebook["cells"] if c.get("cell_type") == "code"]
    for index, cell in enumerate(code_cells, 1):
        source = cell["source"]
        source = "".join(source) if isinstance(source, list) else source
        source = _python_source(source, index)
        if not source.strip():
            continue
        print(f"[ipynb_exec] cell {index}/{len(code_cells)}", flush=True)
        tree = ast.parse(source, filename=f"<cell {index}>")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, f"<cell {index}>", "exec"), namespace)
        if last is not None:
            value = eval(compile(last, f"<cell {index}>", "eval"), namespace)
            if value is not None:
                print(repr(value), flush=True)
        sys.stdout.flush()
    print(f"[ipynb_exec] ran {len(code_cells)} code cells", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python ipynb_exec.py NOTEBOOK.ipynb")
    main(sys.argv[1])
