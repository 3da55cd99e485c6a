"""The code's shape, checked so that it cannot grow back (docs/design.md, "Layers"; docs/testing.md):

- no source file over 700 lines: C++ (`.cpp`, `.h`, `.inc`) under csrc/, Python under torchtpu/,
  test/, benchmarks/, examples/ and scripts/; a generated or vendored file is left out only in
  `EXCLUDED_FILES`, with the reason;
- no function over 100 lines: Python's through `ast` (every def, nested or a method); C++'s through
  a scan of the braces (below, `cpp_functions`);
- no import cycle among torchtpu's modules (below, `import_graph`);
- C++ includes point down the layers: `python -> api -> defer -> aten -> sim -> runtime`, the
  public header `csrc/include/torchtpu/torchtpu.h` below them all (it includes no internal header,
  and the runtime's chip table includes it), the bindings only the public header and
  `api/Control.h`. CMakeLists.txt checks the direction of calls at link time (each layer linked
  with the layers below it alone); this checks the headers, which the linker does not see (an
  inline function or a type of a higher layer);
- PyTorch's internal headers (ATen/native, c10/core/impl, torch/csrc but the public ones listed
  in `TORCH_PUBLIC_HEADERS`) are included by csrc/pytorch/Internals.h alone, the one file
  to review against a new torch;
- test/python/ holds test files (`test_*.py`) and conftest.py alone: what tests share, and the
  programs they start as child processes, are in test/helpers/ (docs/testing.md).

Each test lists every offender with its size and place. Pure source reading: no device, no build.
"""
import ast
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 100
PYTHON_DIRS = ("torchtpu", "test", "benchmarks", "examples", "scripts")
CPP_DIRS = ("csrc",)
CPP_SUFFIXES = (".cpp", ".h", ".inc")

# Files left out of the size limits, each with the reason (paths from the repository root). Only
# generated or vendored files belong here: code written here is split instead.
EXCLUDED_FILES = {
}

pytestmark = pytest.mark.one_tier("reads the source files: the eager mode does not enter")


def _source_files(dirs, suffixes):
    """The files git knows (tracked, or new and not ignored) under `dirs`: build outputs, copies
    installed into the package (torchtpu/include) and downloaded test files (build/upstream)
    are ignored by .gitignore. Without git (a source archive), every file but build/."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *dirs],
            cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
        paths = [ROOT / p for p in listed]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for d in dirs for p in (ROOT / d).rglob("*")
                 if "build" not in p.relative_to(ROOT).parts]
    return sorted(p for p in paths
                  if p.suffix in suffixes and p.is_file() and "__pycache__" not in p.parts
                  and _relative(p) not in EXCLUDED_FILES)


def _relative(path):
    return path.relative_to(ROOT).as_posix()


def _python_files():
    return _source_files(PYTHON_DIRS, (".py",))


def _cpp_files():
    return _source_files(CPP_DIRS, CPP_SUFFIXES)


def _report(what, offenders):
    return (f"{len(offenders)} {what} (split them into named steps; docs/design.md):\n  "
            + "\n  ".join(offenders))


# ---------------------------------------------------------------------------------------------
# File sizes

def test_no_file_over_700_lines():
    offenders = []
    for path in _python_files() + _cpp_files():
        lines = len(path.read_text(errors="replace").splitlines())
        if lines > MAX_FILE_LINES:
            offenders.append(f"{_relative(path)}: {lines} lines")
    assert not offenders, _report(f"files over {MAX_FILE_LINES} lines", offenders)


def test_excluded_files_exist_and_give_a_reason():
    for path, reason in EXCLUDED_FILES.items():
        assert (ROOT / path).is_file(), f"EXCLUDED_FILES names {path}, which is not in the repository"
        assert len(reason.split()) >= 3, f"EXCLUDED_FILES[{path!r}]: say why it is left out"


# ---------------------------------------------------------------------------------------------
# Python functions

def python_functions(source):
    """(qualified name, first line, lines) of every def in `source`: nested functions and methods
    too, each measured alone from its `def` (decorators not counted) to its last line."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                found.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_no_python_function_over_100_lines():
    offenders = []
    for path in _python_files():
        for name, line, lines in python_functions(path.read_text()):
            if lines > MAX_FUNCTION_LINES:
                offenders.append(f"{_relative(path)}:{line} {name}: {lines} lines")
    assert not offenders, _report(f"Python functions over {MAX_FUNCTION_LINES} lines", offenders)


# ---------------------------------------------------------------------------------------------
# C++ functions

def _cpp_code_only(text):
    """`text` with comments, string and character literals and preprocessor lines blanked (each
    character replaced by a space, newlines kept), so that braces and lines can be counted."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                if text.startswith("/*", j):  # a block comment may start on a directive line
                    j = text.find("*/", j + 2)
                    j = n if j < 0 else j + 2
                    continue
                j += 1
            blank(i, j)
            i = j
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t":
            i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('"', i + 1) and (i == 0 or not _ident(text[i - 1])):
            delim = text[i + 2:text.index("(", i + 2)]
            j = text.find(")" + delim + '"', i)
            j = n if j < 0 else j + len(delim) + 2
            blank(i, j)
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # (a ' after a digit or letter is a digit separator: 1'000)
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _ident(c):
    return c.isalnum() or c == "_"


_CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b|^\s*extern\s*$")
_ACCESS = re.compile(r"\b(public|private|protected)\s*:(?!:)")
_TEMPLATE = re.compile(r"^\s*template\s*<")
# After a parameter list: qualifiers, then a constructor's member initializers start with ':'.
_INIT_LIST = re.compile(r"\)\s*(?:const|noexcept|override|final|\s)*:")


def _strip_template_prefix(head):
    while _TEMPLATE.match(head):
        depth, k = 0, head.index("<")
        for k in range(k, len(head)):
            depth += {"<": 1, ">": -1}.get(head[k], 0)
            if depth == 0:
                break
        head = head[k + 1:]
    return head


def _block_kind(head):
    """What a brace opened outside any function opens, from the text before it (since the last
    ';', '{' or '}'): "container" (namespace, class, struct, union, enum, extern "C": its body
    is scanned for functions), "function" (a parameter list before it: functions, constructors,
    operators, lambdas at namespace scope, macros such as TORCH_LIBRARY_IMPL(...) or
    PYBIND11_MODULE(...)), or "initializer" (anything else: `kTable[] = {`, `x{1}`)."""
    head = _strip_template_prefix(_ACCESS.sub(" ", head).strip()).strip()
    before_paren = head.split("(", 1)[0]
    if _CONTAINER.search(before_paren.replace("::", "  ")) or head == "extern":
        return "container"
    if head.endswith("=") or "(" not in head:
        return "initializer"
    if re.search(r"\)\s*(?:const|noexcept|override|final|mutable|&|&&|\s)*"
                 r"(?:noexcept\s*\(.*\)\s*)?(?:->\s*[\w:<>,\s*&]+)?$", head, re.S):
        return "function"
    if _INIT_LIST.search(head.replace("::", "  ")):
        return "function"
    return "initializer"


def cpp_functions(text):
    """(head's first words, first line, lines) of every function in a C++ source: a brace block
    opened outside any function that is no namespace, class, struct, union, enum or initializer;
    member functions inside class bodies included. Lines are counted from the line where its
    head (the signature) starts to its closing brace."""
    code = _cpp_code_only(text)
    found = []
    stack = []  # kinds of the open blocks
    head_start = 0  # where the text before the next brace opened outside a function starts
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        in_function = "function" in stack or "initializer" in stack
        if c == "{":
            if in_function:
                stack.append("inner")
            else:
                head = code[head_start:i]
                last = head.rstrip()[-1:]
                if _INIT_LIST.search(head.replace("::", "  ")) and (_ident(last) or last == ">"):
                    # a member's brace initializer inside a constructor's initializer list:
                    # skip it, the body comes after it
                    depth = 0
                    for j in range(i, n):
                        depth += {"{": 1, "}": -1}.get(code[j], 0)
                        if depth == 0:
                            break
                    i = j + 1
                    continue
                kind = _block_kind(head)
                stack.append(kind)
                if kind == "function":
                    access = list(_ACCESS.finditer(head))  # `public:` is not the signature
                    signature = head[access[-1].end():] if access else head
                    start = i - len(signature.lstrip())
                    found.append([" ".join(signature.split()), code.count("\n", 0, start) + 1,
                                  None])
            head_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else None
            if kind == "function":
                entry = next(e for e in reversed(found) if e[2] is None)
                entry[2] = code.count("\n", 0, i) + 1 - entry[1] + 1
            if not ("function" in stack or "initializer" in stack):
                head_start = i + 1
        elif c == ";" and not in_function:
            head_start = i + 1
        i += 1
    return [(name, line, lines) for name, line, lines in found if lines is not None]


def _cpp_name(head):
    """The function's name for the report: the identifier before its parameter list."""
    before = head.split("(", 1)[0].split()
    return before[-1] if before else head


def test_cpp_function_scan_on_known_shapes():
    text = '''
#include <x.h>
#define BLOCK(x) { x; }
namespace a { namespace {
constexpr Row kTable[] = {
    {"add", 1}, {"mul", 2},
};
struct S : Base<int> {
  int member{0};
  S() : member{1}, other_(2) {
    f("}{");
  }
  int get() const { return '}'; }
 public:
  template <class T> T twice(T x) noexcept { return x + x; }
};
}  // namespace
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("x", [](int y) { return y; });
  /* } */
}
auto lambda = [](int x) -> int {
  return x;
};
enum class E : int { a, b };
int f(int x) {
  if (x) { return 1'000; }
  return R"(})";
}
}  // namespace a
'''
    found = {_cpp_name(name): (line, lines) for name, line, lines in cpp_functions(text)}
    assert found == {
        "S": (10, 3), "get": (13, 1), "twice": (15, 1), "TORCH_LIBRARY_IMPL": (18, 4),
        "[]": (22, 3), "f": (26, 4)}, found


def test_no_cpp_function_over_100_lines():
    offenders = []
    for path in _cpp_files():
        for head, line, lines in cpp_functions(path.read_text(errors="replace")):
            if lines > MAX_FUNCTION_LINES:
                offenders.append(f"{_relative(path)}:{line} {_cpp_name(head)}: {lines} lines")
    assert not offenders, _report(f"C++ functions over {MAX_FUNCTION_LINES} lines", offenders)


# ---------------------------------------------------------------------------------------------
# Python imports

# Compiled extension modules of the package: leaves of the graph (they import no Python module
# of the package).
_EXTENSION_MODULES = {"torchtpu._C"}


def _package_modules():
    """{dotted name: (path, is a package)} of every module of torchtpu."""
    modules = {}
    for path in _source_files(("torchtpu",), (".py",)):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _imported_modules(node, module, is_package, modules):
    """The package's modules an import statement names: for `from P import n`, P.n where that is
    a module, else P (n is a name P defines); for `import a.b.c`, the longest of a.b.c, a.b, a
    that is a module."""
    def longest(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    if isinstance(node, ast.Import):
        return {longest(alias.name) for alias in node.names} - {""}
    base = module.split(".")
    if node.level:
        base = base if is_package else base[:-1]
        base = base[:len(base) - (node.level - 1)]
        base = ".".join(base + ([node.module] if node.module else []))
    else:
        base = node.module
    found = set()
    for alias in node.names:
        full = f"{base}.{alias.name}"
        if full in _EXTENSION_MODULES:
            continue
        found.add(full if full in modules else longest(base))
    return found - {""}


def import_graph():
    """{module: {imported module: (line, kind)}} among torchtpu's modules, kind "module" for
    imports run when the module is imported and "local" for imports inside functions.

    Both kinds count for cycles: a function-local import is still a dependency, and two modules
    that import each other inside functions are one unit cut in two, whose halves cannot be read
    or tested apart. Left out: imports under `if TYPE_CHECKING:` (never
    run), and a function-local import of the module's own package or an ancestor of it
    (`import torchtpu` in torchtpu.tpu's shutdown hook): at call time that is a lookup of the
    package already imported, not a dependency between two modules of it."""
    modules = _package_modules()
    graph = {}
    for module, (path, is_package) in modules.items():
        edges = {}

        def visit(node, local):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _imported_modules(child, module, is_package, modules):
                        if target == module:
                            continue
                        if local and (module + ".").startswith(target + "."):
                            continue
                        if target not in edges or edges[target][1] == "local":
                            edges[target] = (child.lineno, "local" if local else "module")
                visit(child, local or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(path.read_text()), False)
        graph[module] = edges
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return components


def test_import_graph_sees_the_package():
    graph = import_graph()
    assert "torchtpu.tpu" in graph["torchtpu"], graph["torchtpu"]
    assert len(graph) > 50


def test_no_import_cycle_in_torchtpu():
    graph = import_graph()
    offenders = []
    for component in _cycles(graph):
        inside = set(component)
        edges = [f"{m} -> {t} (line {line}, {kind})" for m in component
                 for t, (line, kind) in sorted(graph[m].items()) if t in inside]
        offenders.append(" <-> ".join(component) + ":\n    " + "\n    ".join(edges))
    assert not offenders, (
        f"{len(offenders)} import cycles among torchtpu's modules (a module imported by the "
        "other's functions counts: docs/design.md, \"Layers\"):\n  " + "\n  ".join(offenders))


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


# ---------------------------------------------------------------------------------------------
# C++ include direction

CPP_LAYERS = ("runtime", "sim", "aten", "defer", "api", "python")  # bottom to top
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]((?:torchtpu|runtime|sim|aten|defer|api|python)/[^">]+)[">]',
                      re.M)


def _layer_rank(name):
    # (csrc/pytorch/ is PyTorch's internals behind one header, no torchtpu code: below every layer)
    return -1 if name in ("include", "torchtpu", "pytorch") else CPP_LAYERS.index(name)


def test_cpp_includes_point_down():
    offenders = []
    for path in _cpp_files():
        layer = path.relative_to(ROOT / "csrc").parts[0]
        text = path.read_text(errors="replace")
        for match in _INCLUDE.finditer(text):
            included = match.group(1)
            target = included.split("/")[0]
            line = text.count("\n", 0, match.start()) + 1
            if _layer_rank(target) > _layer_rank(layer):
                offenders.append(f"{_relative(path)}:{line} ({layer}) includes {included}")
            elif layer == "python" and included not in ("torchtpu/torchtpu.h", "api/Control.h"):
                offenders.append(f"{_relative(path)}:{line} includes {included}: the bindings "
                                 "include the public header and api/Control.h alone")
    assert not offenders, (
        f"{len(offenders)} includes pointing up the layers (python -> api -> defer -> aten -> "
        "sim -> runtime, the public header below all; docs/design.md, \"Layers\"):\n  "
        + "\n  ".join(offenders))


# ---------------------------------------------------------------------------------------------
# PyTorch's internals behind one header

TORCH_INTERNALS_HEADER = "csrc/pytorch/Internals.h"
_TORCH_INTERNAL = re.compile(r'^\s*#\s*include\s*[<"]((?:ATen/native|c10/core/impl|torch/csrc)/[^">]+)[">]',
                             re.M)
# Headers under those folders that are PyTorch's public extension API (the device-guard interface
# PyTorch's PrivateUse1 documentation and OpenReg use; the Python binding headers torch/extension.h
# brings and the device module's): any file may include them.
TORCH_PUBLIC_HEADERS = {
    "c10/core/impl/DeviceGuardImplInterface.h",
    "torch/csrc/utils/pybind.h", "torch/csrc/autograd/python_variable.h",
    "torch/csrc/Exceptions.h", "torch/csrc/Generator.h", "torch/csrc/Event.h",
    "torch/csrc/utils/device_lazy_init.h",
}


def test_pytorch_internals_only_through_one_header():
    assert (ROOT / TORCH_INTERNALS_HEADER).is_file(), TORCH_INTERNALS_HEADER
    offenders = []
    for path in _cpp_files():
        if _relative(path) == TORCH_INTERNALS_HEADER:
            continue
        text = path.read_text(errors="replace")
        for match in _TORCH_INTERNAL.finditer(text):
            if match.group(1) not in TORCH_PUBLIC_HEADERS:
                line = text.count("\n", 0, match.start()) + 1
                offenders.append(f"{_relative(path)}:{line} includes {match.group(1)}")
    assert not offenders, (
        f"{len(offenders)} includes of PyTorch internals outside {TORCH_INTERNALS_HEADER} "
        "(include that header; add the internal there, with what it is used for):\n  "
        + "\n  ".join(offenders))


@pytest.mark.parametrize("minor", [13, 14])
def test_pytorch_internals_header_refuses_another_torch(tmp_path, minor):
    """The header's version check: with torch 2.13's version header it preprocesses; with a
    version header saying 2.14 first on the include path it stops with the message that says
    what to do."""
    import shutil
    import torch.utils.cpp_extension as cpp_extension

    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    fake = tmp_path / "torch" / "headeronly"
    fake.mkdir(parents=True)
    if minor != 13:
        (fake / "version.h").write_text(
            f"#pragma once\n#define TORCH_VERSION_MAJOR 2\n#define TORCH_VERSION_MINOR {minor}\n")
    includes = [f"-I{tmp_path}"] + [f"-I{d}" for d in cpp_extension.include_paths()]
    proc = subprocess.run([compiler, "-std=c++17", "-E", "-o", "/dev/null", *includes,
                           str(ROOT / TORCH_INTERNALS_HEADER)], capture_output=True, text=True)
    if minor == 13:
        assert proc.returncode == 0, proc.stderr[-2000:]
    else:
        assert proc.returncode != 0
        assert "written against PyTorch 2.13's internals" in proc.stderr, proc.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# Tests apart from their helpers

def test_python_tests_folder_holds_tests_only():
    offenders = [_relative(p) for p in _source_files(("test/python",), (".py",))
                 if not p.name.startswith("test_") and p.name != "conftest.py"]
    assert not offenders, (
        f"{len(offenders)} modules in test/python/ that are not test files (move them to "
        "test/helpers/, on sys.path through conftest.py):\n  " + "\n  ".join(offenders))
