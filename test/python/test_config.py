"""The configuration table (torchtpu/config.py, docs/configuration.md): every environment
variable the package and the C++ core read is in it and read through its accessors, and what is
generated from it (the C++ table, the docs page) matches it."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchtpu import config

pytestmark = pytest.mark.one_tier("reads sources and the environment, not the device")

ROOT = Path(__file__).resolve().parents[2]
ACCESSORS_PY = {"torchtpu/config.py"}
ACCESSORS_CPP = {"csrc/runtime/Env.h", "csrc/runtime/Config.h", "csrc/runtime/Config.cpp"}

# Reads through the accessors, with the variable named in the call.
PY_ACCESS = re.compile(r"config\.(?:get|value|flag|raw|variable)\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']")
CPP_ACCESS = re.compile(r"(?:env::(?:get|get_raw|value|get_int|int_value|flag)|config::(?:getenv|"
                        r"require))\(\s*\"([A-Z][A-Z0-9_]+)\"")
# Reads that go around the accessors.
PY_DIRECT = re.compile(r"os\.getenv\(|environ\.get\(|environ\[[^\]]+\](?!\s*=[^=])|"
                       r"\bin\s+(?:_?os\.)?environ\b")
CPP_DIRECT = re.compile(r"\bgetenv\s*\(")


def sources(pattern):
    return [p for p in ROOT.glob(pattern) if "__pycache__" not in p.parts]


def py_files():
    return sources("torchtpu/**/*.py")


def cpp_files():
    return sources("csrc/**/*.cpp") + sources("csrc/**/*.h")


def rel(p):
    return str(p.relative_to(ROOT))


def test_every_variable_the_code_reads_is_in_the_table():
    missing = []
    for path, pattern in [(p, PY_ACCESS) for p in py_files()] + [(p, CPP_ACCESS) for p in cpp_files()]:
        for name in pattern.findall(path.read_text()):
            if name not in {v.name for v in config.VARIABLES}:
                missing.append(f"{rel(path)}: {name}")
    assert not missing, missing


def test_the_cpp_core_reads_only_variables_marked_as_read_by_it():
    cpp = {v.name for v in config.VARIABLES if v.read_by == "C++"}
    read = {name for p in cpp_files() for name in CPP_ACCESS.findall(p.read_text())
            if rel(p) not in ACCESSORS_CPP}
    assert read <= cpp, sorted(read - cpp)
    assert cpp <= read, f"marked as read by C++ but read nowhere there: {sorted(cpp - read)}"
    py = {v.name for v in config.VARIABLES if v.read_by == "Python"}
    read_py = {name for p in py_files() for name in PY_ACCESS.findall(p.read_text())}
    assert py <= read_py, f"marked as read by Python but read nowhere there: {sorted(py - read_py)}"


def test_no_code_reads_the_environment_around_the_accessors():
    direct = []
    for path in py_files():
        if rel(path) in ACCESSORS_PY:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if PY_DIRECT.search(line):
                direct.append(f"{rel(path)}:{n}: {line.strip()}")
    for path in cpp_files():
        if rel(path) in ACCESSORS_CPP:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if CPP_DIRECT.search(line) and "config::getenv" not in line:
                direct.append(f"{rel(path)}:{n}: {line.strip()}")
    assert not direct, "\n".join(direct)


def test_the_generated_cpp_table_and_docs_page_match_the_table():
    for path, text in config.generated_files(str(ROOT)).items():
        assert Path(path).read_text() == text, (
            f"{os.path.relpath(path, ROOT)} differs from torchtpu/config.py: run "
            f"`python -m torchtpu config --write`")


def test_every_row_is_complete_and_names_an_existing_page():
    names = [v.name for v in config.VARIABLES]
    assert len(names) == len(set(names))
    for v in config.VARIABLES:
        assert v.type in ("flag", "int", "number", "text", "choice"), v
        assert v.read_by in ("C++", "Python") and v.meaning.endswith("."), v
        assert (ROOT / "docs" / v.doc).exists(), v
        if v.type == "flag" and v.default:
            assert v.default in ("0", "1"), v


def test_the_accessors(monkeypatch):
    monkeypatch.setenv("TORCHTPU_DEFER_MAX_OPS", "")
    assert config.get("TORCHTPU_DEFER_MAX_OPS") is None
    assert config.value("TORCHTPU_DEFER_MAX_OPS") == "4096"  # the table's default
    assert config.raw("TORCHTPU_DEFER_MAX_OPS") == ""
    monkeypatch.setenv("TORCHTPU_METRICS_REPORT", "yes")
    with pytest.raises(ValueError, match="TORCHTPU_METRICS_REPORT='yes': expected 0 or 1"):
        config.flag("TORCHTPU_METRICS_REPORT")
    with pytest.raises(KeyError, match="not in torchtpu's configuration table"):
        config.get("TORCHTPU_NO_SUCH_VARIABLE")
    monkeypatch.setenv("TORCHTPU_CHIP", "v6e")
    assert config.settings()["TORCHTPU_CHIP"] == "v6e"


def test_the_cpp_core_takes_its_defaults_from_the_table():
    # TORCHTPU_DEFER_MAX_OPS empty: the C++ core's limit is the table's default, not a second
    # copy of it.
    code = ("import torchtpu, torch; torchtpu.set_eager_mode('fused'); "
            "x = torch.ones(2, device='tpu')\n"
            "for _ in range(4100): x = x + 1\n"
            "print(torchtpu.metrics.materializations().get('graph size limit'))")
    env = dict(os.environ, TORCHTPU_DEFER_MAX_OPS="", TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS="off")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "{'<unknown>': 1}", out.stdout
