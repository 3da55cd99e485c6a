"""The CI tier of the model-zoo sweep: three architectures (a dense causal LM, an encoder, a
mixture-of-experts causal LM) through the same steps as `python test/models/zoo.py`, each in
its own subprocess."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ZOO = Path(__file__).resolve().parent / "zoo.py"


@pytest.mark.parametrize("model_type,causal", [("llama", True), ("bert", False), ("afmoe", True)])
def test_model_matches_cpu(model_type, causal):
    cmd = [sys.executable, str(ZOO), "--one", model_type] + (["--causal"] if causal else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    assert lines, proc.stderr[-2000:]
    row = json.loads(lines[-1])
    assert row["status"] == "pass", row
    assert not row.get("fallbacks"), row  # the whole run is native
