"""TorchRec's DistributedModelParallel on "tpu" (docs/torchrec.md): a DLRM (EmbeddingBagCollection
of 4 tables with fused optimizers, dense MLPs) sharded over 2 ranks (backend "tpu_dist", one
simulated chip each) trained against the same sharded training on the CPU over Gloo
(run_dlrm.py): every rank's loss at every step, the trained tables (assembled from all shards)
and dense parameters. With TORCHTPU_FALLBACK=error: no op runs through the CPU fallback; the
embedding lookups are charged to the cost model (torchtpu.torchrec.embedding_costs()).

- table-wise and column-wise shards, SGD, strict eager: equal to the CPU's;
- rowwise Adagrad with per-sample weights, fused eager: equal to the CPU's;
- row-wise shards (TorchRec offers them on accelerators only) against the CPU's table-wise
  training of the same model: the same math, equal;
- data-parallel tables (fbgemm's dense TBE) beside sharded ones: equal to the CPU's;
- without a plan: TorchRec's planner for the simulated chips, no fallback;
- an EmbeddingCollection (sequence embeddings) with rowwise Adagrad, row-wise on tpu against
  table-wise on the CPU: equal;
- Adam (fbgemm's CPU mode has none) with per-sample weights and row-wise shards against the
  training written in plain PyTorch on one process (run_dlrm.py's reference, which also equals
  the CPU's DMP for SGD);
- examples/torchrec_dlrm.py runs and reports.

Runs where TorchRec is installed (scripts/test_torchrec.sh makes build/venv-rec); skipped
otherwise. Each training is a process of its own (two with mp.spawn).
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torchrec")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run_dlrm.py")
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "torchrec_dlrm.py")
# Both devices compute the embeddings with fbgemm's summation order and the MLPs with the CPU's
# float32 GEMM (conftest.py): measured, the losses are bit-equal and the tables within 2e-9
# (the backward's per-row gradient sums in another order). A missed gradient, a wrong shard or
# a skipped update differ by 1e-3 or more.
ATOL = 1e-6
_cache = {}


def train(tmp_path, device, mode="strict", **kw):
    key = (device, mode, tuple(sorted(kw.items())))
    if key in _cache:
        return _cache[key]
    out = tmp_path / f"{device}-{mode}-{abs(hash(key))}.json"
    cmd = [sys.executable, RUN, "--device", device, "--out", str(out)]
    for k, v in kw.items():
        cmd += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TORCHTPU_FALLBACK="error")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600,
                       cwd=str(tmp_path))
    assert r.returncode == 0 and out.exists(), r.stdout[-2000:] + r.stderr[-4000:]
    _cache[key] = json.loads(out.read_text())
    return _cache[key]


def assert_same(tpu, ref):
    for rank, (a, b) in enumerate(zip(tpu["losses"], ref["losses"])):
        assert a == pytest.approx(b, abs=ATOL), f"rank {rank}'s losses: {a} against {b}"
    for name in ref["tables"]:
        torch.testing.assert_close(torch.tensor(tpu["tables"][name]),
                                   torch.tensor(ref["tables"][name]), atol=ATOL, rtol=0)
    for name in ref["dense"]:
        torch.testing.assert_close(torch.tensor(tpu["dense"][name]),
                                   torch.tensor(ref["dense"][name]), atol=ATOL, rtol=0)


def assert_native_and_charged(tpu):
    assert tpu["fallbacks"] == [{}, {}]
    for rank_costs in tpu["charged"]:
        for op in ("torchtpu_tbe::forward", "torchtpu_tbe::backward"):
            assert rank_costs[op]["launches"] > 0 and rank_costs[op]["hbm_bytes"] > 0
            assert rank_costs[op]["estimated_s"] > 0


def test_table_wise_sgd(tmp_path):
    tpu = train(tmp_path, "tpu", optimizer="sgd", sharding="tw")
    cpu = train(tmp_path, "cpu", optimizer="sgd", sharding="tw")
    assert_same(tpu, cpu)
    assert_native_and_charged(tpu)
    # (the training moved the tables: the comparison is not of untouched weights)
    start = train(tmp_path, "reference", optimizer="sgd", sharding="tw", steps=0)
    moved = max((torch.tensor(tpu["tables"][n]) - torch.tensor(start["tables"][n])).abs().max()
                for n in start["tables"])
    assert moved > 100 * ATOL


def test_rowwise_adagrad_weighted_fused_eager(tmp_path):
    tpu = train(tmp_path, "tpu", mode="fused", optimizer="rowwise_adagrad", sharding="tw",
                weighted=True)
    cpu = train(tmp_path, "cpu", optimizer="rowwise_adagrad", sharding="tw", weighted=True)
    assert_same(tpu, cpu)
    assert_native_and_charged(tpu)


def test_row_wise_shards_equal_the_cpu_table_wise_training(tmp_path):
    tpu = train(tmp_path, "tpu", optimizer="sgd", sharding="rw")
    assert_same(tpu, train(tmp_path, "cpu", optimizer="sgd", sharding="tw"))
    assert_native_and_charged(tpu)


def test_data_parallel_tables(tmp_path):
    """Data-parallel tables (replicated, fbgemm's dense TBE, gradients all-reduced by DDP) beside
    table-wise and column-wise ones: equal to the CPU's."""
    tpu = train(tmp_path, "tpu", optimizer="sgd", sharding="dp")
    assert_same(tpu, train(tmp_path, "cpu", optimizer="sgd", sharding="dp"))
    assert_native_and_charged(tpu)


def test_default_plan(tmp_path):
    """DistributedModelParallel without a plan: TorchRec's planner for the simulated chips (these
    small tables: data-parallel), every shard on tpu, no fallback."""
    tpu = train(tmp_path, "tpu", optimizer="rowwise_adagrad", sharding="auto")
    assert tpu["fallbacks"] == [{}, {}]
    assert "tpu:0" in tpu["plan"][0] or "data_parallel" in tpu["plan"][0]
    assert "cuda" not in tpu["plan"][0]
    assert all(0 < loss < 10 for losses in tpu["losses"] for loss in losses)


def test_sequence_embeddings(tmp_path):
    """An EmbeddingCollection (one row per index: fbgemm's pooling "none", the input
    distribution's invert_permute) with rowwise Adagrad, row-wise shards on tpu against the CPU's
    table-wise ones: every step's loss and the tables equal."""
    tpu = train(tmp_path, "tpu", model="sequence", optimizer="rowwise_adagrad", sharding="rw")
    cpu = train(tmp_path, "cpu", model="sequence", optimizer="rowwise_adagrad", sharding="tw")
    assert_same(tpu, cpu)
    assert_native_and_charged(tpu)


def test_adam_row_wise_weighted_against_plain_pytorch(tmp_path):
    tpu = train(tmp_path, "tpu", optimizer="adam", sharding="rw", weighted=True)
    assert_same(tpu, train(tmp_path, "reference", optimizer="adam", weighted=True))
    assert_native_and_charged(tpu)


def test_reference_equals_the_cpu_dmp(tmp_path):
    """The plain-PyTorch reference Adam is checked against is itself TorchRec's training: with
    SGD it equals the CPU's DistributedModelParallel over Gloo."""
    assert_same(train(tmp_path, "reference", optimizer="sgd", weighted=True),
                train(tmp_path, "cpu", optimizer="sgd", sharding="tw", weighted=True))


def test_example(tmp_path):
    env = dict(os.environ, TORCHTPU_FALLBACK="error")
    r = subprocess.run([sys.executable, EXAMPLE, "--steps", "3"], env=env, capture_output=True,
                       text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "torchtpu_tbe::forward" in r.stdout and "CPU fallbacks: 0" in r.stdout
