"""The sweeps' tools: tools/sweep_progress.py reads the shards' logs while they run and prints
progress, an ETA and a summary of the statuses."""
import pytest


@pytest.mark.one_tier("a tool reading log files: no device work")
def test_sweeps_show_progress_with_an_eta_and_a_summary(tmp_path):
    # The zoo sweep wrote only logs: tools/sweep_progress.py (run by scripts/zoo_sweep.sh) reads
    # the shards' "[k/N] type: mode status" lines while they run and prints done/total, the ETA
    # and, at the end, a summary of the statuses.
    import os
    import subprocess
    import sys

    a, b = tmp_path / "shard0.log", tmp_path / "shard1.log"
    a.write_text("[1/3] bert: strict pass, fused pass \n[2/3] gpt2: strict pass, fused backend bug x\n")
    b.write_text("[1/2] t5: strict pass, fused pass \n")
    shard = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.5)"])
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "sweep_progress.py")
    out = subprocess.run([sys.executable, tool, "--pids", str(shard.pid), "--every", "1",
                          "--label", "zoo", str(a), str(b)], capture_output=True, text=True,
                         timeout=60).stdout
    shard.wait()
    assert "zoo: 3/5 done (60%)" in out and "ETA" in out, out
    assert ("== zoo finished: 3/5 in" in out and "strict pass: 3" in out
            and "fused pass: 2" in out and "fused backend bug: 1" in out), out
