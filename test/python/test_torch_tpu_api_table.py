"""docs/torch-tpu-api.md, the table of Google TorchTPU's names on torchtpu, stays true: every row
marked **same** whose name is a Python attribute path (torch.tpu.X, torch_tpu.X.Y,
torch.backends.tpu.X, torch.profiler.X, or one of the short names the page defines, such as
``em`` for torch_tpu._internal.execution_mode) names something that exists, and the count line
matches the rows."""
import importlib
import os
import re

import pytest
import torch
import torch_tpu  # noqa: F401  (the twin; also registers torch.tpu)

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "torch-tpu-api.md")
STATUSES = ("same", "not honoured", "not yet")
ROOTS = ("torch.tpu", "torch_tpu", "torch.backends.tpu", "torch.profiler")
IDENT_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def _text() -> str:
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def _cells(line: str) -> list[str]:
    # A table row; "\|" inside a cell is a literal bar, not a column break.
    inner = line.strip()[1:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def _rows() -> list[dict]:
    rows = []
    for line in _text().splitlines():
        if not line.startswith("| "):
            continue
        cells = _cells(line)
        if not cells[0].isdigit():
            continue  # a header
        assert len(cells) == 5, f"row {cells[0]} has {len(cells)} columns, not 5: {line}"
        number, name, meaning, torchtpu_cell, status = cells
        match = re.fullmatch(r"\*\*(.+?)\*\*", status)
        assert match and match.group(1) in STATUSES, f"row {number}: status {status!r}"
        rows.append({"number": int(number), "name": name, "meaning": meaning,
                     "torchtpu": torchtpu_cell, "status": match.group(1)})
    return rows


def _aliases() -> dict[str, str]:
    # "`em` = `torch_tpu._internal.execution_mode`" in the page's list of short names.
    return dict(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)` =\s+`(torch_tpu[\w.]*)`", _text()))


def _attribute_paths(name_cell: str, aliases: dict[str, str]) -> list[str]:
    """The attribute paths a name cell claims: each code span starting with a root (or a short
    name), and a bare name after one of those in the same cell (it lives beside it)."""
    paths, previous = [], None
    for span in re.findall(r"`([^`]+)`", name_cell):
        head = IDENT_PATH.match(span.strip())
        if not head:
            continue
        dotted = head.group(0)
        first = dotted.split(".")[0]
        if first in aliases:
            dotted = aliases[first] + dotted[len(first):]
        if any(dotted == r or dotted.startswith(r + ".") for r in ROOTS):
            if dotted in ROOTS:
                continue  # a bare module name is not a claim about an attribute
            paths.append(dotted)
            previous = dotted
        elif previous is not None and first not in ("torch", "env") and not first.isupper():
            # e.g. `manual_seed_all(seed)` after `torch.tpu.manual_seed(seed)`
            paths.append(previous.rsplit(".", 1)[0] + "." + dotted)
    return paths


def _resolve(path: str):
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            # A submodule not imported yet (torch_tpu._internal.utils, ...).
            obj = importlib.import_module(".".join(parts[:i + 1]))
    return obj


ROWS = _rows()
CLAIMS = [(row["number"], path) for row in ROWS if row["status"] == "same"
          for path in _attribute_paths(row["name"], _aliases())]


def test_the_table_has_its_90_rows_in_order():
    # (1-76: the names of TorchTPU's documentation; 77-89: names its programs call; 90: what
    # Ray Train calls)
    assert [row["number"] for row in ROWS] == list(range(1, 91))


def test_the_count_line_matches_the_rows():
    match = re.search(r"Count: (\d+) same, (\d+) not honoured, (\d+) not yet", _text())
    assert match, "no count line"
    counted = dict(zip(STATUSES, map(int, match.groups())))
    actual = {s: sum(row["status"] == s for row in ROWS) for s in STATUSES}
    assert counted == actual


def test_rows_not_marked_same_say_why():
    for row in ROWS:
        if row["status"] == "not honoured":
            assert "Reason:" in row["torchtpu"], f"row {row['number']} gives no reason"
        elif row["status"] == "not yet":
            assert "Missing" in row["torchtpu"], f"row {row['number']} names nothing missing"


def test_the_table_claims_attribute_paths():
    # The parser must keep finding the names (a change of format would silently check nothing).
    claimed = {path for _, path in CLAIMS}
    for expected in ("torch.tpu.manual_seed_all", "torch_tpu.api.tpu_device",
                     "torch_tpu._internal.execution_mode.EagerMode.DEFER_AND_FUSE",
                     "torch_tpu._internal.utils.utils.CheckValueMode.STRICT",
                     "torch.profiler.xprof_trace_handler", "torch.tpu._get_cache_stats"):
        assert expected in claimed
    assert len(CLAIMS) >= 50


@pytest.mark.parametrize("number,path", CLAIMS, ids=[f"{n}-{p}" for n, p in CLAIMS])
def test_a_name_marked_same_exists(number, path):
    try:
        _resolve(path)
    except (AttributeError, ImportError) as error:
        pytest.fail(f"row {number} says {path} works the same, but it does not exist: {error}")
