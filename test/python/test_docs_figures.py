"""The documentation's figures and links: benchmarks/README.md is what benchmarks/readme.py writes
from benchmarks/results/*.json (no figure typed by hand, none left behind by a rerun), the
results' estimates are the current cost model's (benchmarks/reprice.py), and every relative link
of the pages a newcomer starts from points to a file that exists."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.one_tier("reads the docs and the committed results, not the device")

# The pages whose relative links are checked.
PAGES = ["README.md", "docs/features.md", "benchmarks/README.md"]


def _generator():
    spec = importlib.util.spec_from_file_location("benchmarks_readme", ROOT / "benchmarks" / "readme.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def _full_history() -> bool:
    """Whether git can give each result file its last commit's date (a clone with its history)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == "false"


def test_the_benchmarks_page_is_generated_from_the_results():
    generated = _generator().render()
    committed = (ROOT / "benchmarks" / "README.md").read_text()
    if not _full_history():
        # Without git history the dates of results that do not record one are unknown here.
        date = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
        generated, committed = date.sub("DATE", generated), date.sub("DATE", committed)
    assert committed == generated, (
        "benchmarks/README.md is not what benchmarks/readme.py writes from benchmarks/results/: "
        "run python benchmarks/readme.py")


def test_the_benchmarks_page_covers_every_result():
    text = (ROOT / "benchmarks" / "README.md").read_text()
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        assert f"(results/{path.name})" in text, f"{path.name} has no section in benchmarks/README.md"


def relative_links(page: str) -> list[str]:
    """The relative link targets of a markdown page (no URLs, no in-page anchors), without their
    anchors."""
    text = (ROOT / page).read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)      # code blocks hold no links
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    return [t.split("#", 1)[0] for t in targets
            if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def broken_links(page: str) -> list[str]:
    base = (ROOT / page).parent
    return [t for t in relative_links(page) if not (base / t).exists()]


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_points_to_a_file(page):
    assert (ROOT / page).exists(), page
    assert relative_links(page), f"{page} has no relative link: the check would prove nothing"
    assert broken_links(page) == [], f"{page}: links to files that do not exist"


def test_the_link_check_finds_a_broken_link(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](missing.md#part) [web](https://pytorch.org) [here](#top)\n"
                    "```\n[in code](not-a-link.md)\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert relative_links("page.md") == ["page.md", "missing.md"]
    assert broken_links("page.md") == ["missing.md"]


# -- the calibration (docs/insight.md, "Calibration against published measurements") -------------

def _calibration():
    spec = importlib.util.spec_from_file_location("benchmarks_calibration",
                                                  ROOT / "benchmarks" / "calibration.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _calibration_payload() -> dict:
    import json

    return json.loads((ROOT / "benchmarks" / "results" / "calibration.json").read_text())


def _insight_table(text: str, cal) -> str:
    return text.split(cal.BEGIN, 1)[1].split(cal.END, 1)[0].lstrip("\n")


def test_the_calibration_table_is_generated_from_the_results():
    cal = _calibration()
    payload = _calibration_payload()
    table = _insight_table((ROOT / "docs" / "insight.md").read_text(), cal)
    assert table == cal.markdown(payload), (
        "docs/insight.md's calibration table is not benchmarks/results/calibration.json's: run "
        "python benchmarks/calibration.py --write-docs")
    # A ratio that drifts is caught.
    payload["rows"][0]["ratio"] += 0.1
    assert table != cal.markdown(payload)
    # At least 15 runs, training on every chip from v5e to v7, MoE and serving among them.
    rows = payload["rows"]
    assert payload["summary"]["runs"] == len(rows) >= 15
    assert {r["chip"] for r in rows if r["kind"] == "training"} >= {"v5e", "v5p", "v6e", "v7"}
    assert sum(r["model"].startswith(("mixtral", "deepseek", "llama4", "qwen3")) for r in rows) >= 2
    assert any(r["kind"] == "inference-decode" for r in rows)


def test_the_shipped_error_band_is_the_calibrations():
    import json

    cal = _calibration()
    shipped = json.loads((ROOT / "torchtpu" / "calibration.json").read_text())
    assert shipped == cal.package_summary(_calibration_payload()), (
        "torchtpu/calibration.json is not the summary of benchmarks/results/calibration.json: "
        "run python benchmarks/calibration.py")


# -- the results' estimates are the current cost model's (benchmarks/reprice.py) ------------------

def _benchmark(name: str, monkeypatch):
    """benchmarks/<name>.py imported as a module (the benchmarks import each other by name)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The results whose estimates are cheap to recompute here (dry runs, the ICI model): each repriced
# by its benchmark's own reprice() and compared with the committed JSON.
CHEAP_REPRICES = {"gemm": "gemm", "vpu-strict": "vpu", "vpu-debug": "vpu", "seed": "seed",
                  "collectives": "collectives"}


@pytest.mark.parametrize("result", sorted(CHEAP_REPRICES))
def test_the_results_estimates_are_the_current_cost_models(result, monkeypatch):
    """A cost-model change that moves an estimate a result holds fails here until the result is
    repriced (python benchmarks/reprice.py), so benchmarks/README.md never prints a figure of an
    older model."""
    import json

    reprice = _benchmark("reprice", monkeypatch)
    stored = json.loads((ROOT / "benchmarks" / "results" / f"{result}.json").read_text())
    current = _benchmark(CHEAP_REPRICES[result], monkeypatch).reprice(json.loads(json.dumps(stored)))
    assert reprice.moved(stored, current) == [], (
        f"benchmarks/results/{result}.json holds estimates of an older cost model: run "
        f"python benchmarks/reprice.py, then python benchmarks/readme.py")


def test_the_reprice_check_finds_a_moved_estimate(monkeypatch):
    reprice = _benchmark("reprice", monkeypatch)
    stored = {"machine": {"commit": "a"}, "rows": [{"case": "float32 high", "n": 512, "cpu_s": 1.0,
                                                    "estimated_v5e_s": 2e-6}]}
    current = {"machine": {"commit": "b"}, "rows": [{"case": "float32 high", "n": 512, "cpu_s": 1.0,
                                                     "estimated_v5e_s": 2.2e-6}]}
    assert reprice.moved(stored, current) == [
        ("rows[float32 high n=512].estimated_v5e_s", "rows.estimated_v5e_s", 2e-6, 2.2e-6)]
    current["rows"][0]["estimated_v5e_s"] = 2e-6 * (1 + 1e-9)   # (rounding is not a move)
    assert reprice.moved(stored, current) == []
