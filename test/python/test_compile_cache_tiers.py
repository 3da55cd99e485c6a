"""Google TorchTPU's tier-2 and tier-3 compilation caches over compiled mode's disk cache
(torchtpu/compile/cache_location.py, docs/compiled-mode.md "The compilation cache"): which variables turn
them on and where, entries read from the tier-3 directory when the tier-2 one lacks them and
written to both, and processes of one host compiling a graph once."""
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from torchtpu.compile import cache_location as _cache_location

pytestmark = pytest.mark.one_tier("the disk cache keeps AOTAutograd's graphs, which do not depend "
                                  "on the eager mode")

CHILD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers", "compile_cache_child.py")
VARIABLES = ("TORCHTPU_CACHE_DIR", "TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE",
             "TORCH_TPU_TIER2_COMPILATION_CACHE", "TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT",
             "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", "WORLD_SIZE")


@pytest.fixture
def clean_env(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def tier2_name():
    name = f"pytest-{uuid.uuid4().hex[:12]}"
    yield name
    shutil.rmtree(os.path.join(_cache_location.TIER2_ROOT, name), ignore_errors=True)


def test_which_variables_turn_the_tiers_on(clean_env, tmp_path):
    loc = _cache_location.location
    assert loc() == _cache_location.Location(None, None)  # nothing set: off
    clean_env.setenv("WORLD_SIZE", "2")  # as TorchTPU: on with the name "default" for 2+ ranks
    assert loc() == _cache_location.Location(f"{_cache_location.TIER2_ROOT}/default", None, True)
    clean_env.setenv("TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE", "disabled")
    assert loc() == _cache_location.Location(None, None)
    clean_env.setenv("TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE", "")
    clean_env.setenv("WORLD_SIZE", "1")
    clean_env.setenv("TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT", str(tmp_path))
    # a tier-3 root turns tier-2 on
    assert loc() == _cache_location.Location(f"{_cache_location.TIER2_ROOT}/default",
                                             str(tmp_path), True)
    clean_env.setenv("TORCH_TPU_TIER2_COMPILATION_CACHE", "mine")  # (the notebooks' name)
    assert loc().working == f"{_cache_location.TIER2_ROOT}/mine"
    clean_env.setenv("TORCHTPU_CACHE_DIR", str(tmp_path / "own"))  # torchtpu's directory first
    assert loc().kept == str(tmp_path / "own")
    clean_env.setenv("TORCH_TPU_TIER2_COMPILATION_CACHE", "../escape")
    with pytest.raises(ValueError, match="one directory name"):
        loc()


def test_a_cloud_storage_root_is_ignored_with_a_warning(clean_env):
    clean_env.setenv("TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT", "gs://bucket/cache")
    clean_env.setattr(_cache_location, "_warned_gs", False)
    with pytest.warns(UserWarning, match="Cloud Storage"):
        assert _cache_location.location() == _cache_location.Location(None, None)


def run_child(env, batch=16):
    out = subprocess.run([sys.executable, CHILD, str(batch)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tier3_entries_fill_an_empty_tier2_cache_and_new_ones_reach_both(tmp_path, tier2_name):
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE=tier2_name,
               TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT=str(tmp_path))
    cold = run_child(env)
    # four Dynamo graphs (compile_cache_child.py), compiled and saved in tier-2, copied to tier-3
    assert cold["cache"]["misses"] == 4 and cold["cache"]["saved"] == 4, cold["cache"]
    assert cold["cache"]["kept_writes"] == 4 and cold["cache"]["kept_reads"] == 0, cold["cache"]
    assert cold["cache"]["directory"].startswith(
        os.path.join(_cache_location.TIER2_ROOT, tier2_name))
    assert len(list(tmp_path.glob("build-*/aotautograd/*/*"))) == 4
    # the host's shared memory cleared (a reboot, another host): tier-3 fills tier-2 again
    shutil.rmtree(os.path.join(_cache_location.TIER2_ROOT, tier2_name))
    warm = run_child(env)
    assert warm["cache"]["hits"] == 4 and warm["cache"]["misses"] == 0, warm["cache"]
    assert warm["cache"]["kept_reads"] == 4 and warm["cache"]["kept_writes"] == 0, warm["cache"]
    hot = run_child(env)  # tier-2 has them: nothing read from tier-3
    assert hot["cache"]["hits"] == 4 and hot["cache"]["kept_reads"] == 0, hot["cache"]
    assert warm["losses"] == cold["losses"] == hot["losses"] and warm["out"] == cold["out"]


def test_two_processes_of_a_host_compile_each_graph_once(tier2_name):
    """The tier-2 cache locks a key while it is compiled: of two processes compiling the same
    graphs at once, one compiles each graph and the other waits, then loads it."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env["TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE"] = tier2_name
    procs = [subprocess.Popen([sys.executable, CHILD, "16"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    caches = [r["cache"] for r in results]
    assert sum(c["misses"] for c in caches) == 4 and sum(c["hits"] for c in caches) == 4, caches
    assert results[0]["losses"] == results[1]["losses"]
