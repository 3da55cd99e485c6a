"""fbgemm's table-batched embeddings on "tpu" (docs/torchrec.md): SplitTableBatchedEmbeddingBagsCodegen
on a tpu device against the same module on the CPU (fbgemm's CPU kernels), step by step: the pooled
output of each step, the weights and the optimizer state after each fused update; Adam (which
fbgemm's CPU mode does not have) against its formulas written in PyTorch ops; the sparse-feature
ops of TorchRec's input distribution against fbgemm's CPU kernels; the bounds check; the cost
model's charge of the lookups as HBM row gathers; no CPU fallback (TORCHTPU_FALLBACK=error).

Runs where fbgemm_gpu is installed (scripts/test_torchrec.sh makes build/venv-rec); skipped
otherwise.
"""
import pytest

pytest.importorskip("fbgemm_gpu")

import torch  # noqa: E402

import torchtpu  # noqa: E402
import torchtpu.torchrec  # noqa: E402
from fbgemm_gpu.split_embedding_configs import EmbOptimType  # noqa: E402
from fbgemm_gpu.split_table_batched_embeddings_ops_common import (  # noqa: E402
    EmbeddingLocation, PoolingMode)
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (  # noqa: E402
    ComputeDevice, SplitTableBatchedEmbeddingBagsCodegen)

TABLES = [(30, 4), (50, 8), (20, 16)]  # (rows, dim); one feature per table
FEATURES = [0, 1, 2]
BATCH = 5
# fbgemm's CPU kernels and tpu's sum a bag's rows in the same order in float32; the backward's
# per-row gradient sums may differ in order: float32 rounding of a few ulps.
ATOL = 1e-6


@pytest.fixture(autouse=True)
def _no_fallback():
    torchtpu.set_fallback_mode("error")
    torchtpu.metrics.reset()
    yield
    torchtpu.set_fallback_mode("warn")


def make(device, optimizer, pooling=PoolingMode.SUM, **kw):
    specs = [(rows, dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for rows, dim in TABLES]
    m = SplitTableBatchedEmbeddingBagsCodegen(
        specs, feature_table_map=FEATURES, optimizer=optimizer, learning_rate=0.1,
        pooling_mode=pooling, device=torch.device(device), **kw)
    g = torch.Generator().manual_seed(0)
    for w in m.split_embedding_weights():
        w.copy_(torch.randn(w.shape, generator=g))
    return m


def batch(step, weighted):
    g = torch.Generator().manual_seed(step)
    lengths = torch.randint(0, 4, (len(FEATURES) * BATCH,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    rows = [TABLES[FEATURES[f]][0] for f in range(len(FEATURES))]
    indices = torch.cat([torch.randint(0, rows[i // BATCH], (int(n),), generator=g)
                         for i, n in enumerate(lengths)])
    weights = torch.rand(indices.shape, generator=g) if weighted else None
    return indices, offsets, weights


def train(module, device, steps, weighted, grad_weights=False):
    """Each step: the output, the gradient of the per-sample weights, the tables after it."""
    trace = []
    for step in range(steps):
        indices, offsets, weights = batch(step, weighted)
        if weights is not None:
            weights = weights.to(device).requires_grad_(grad_weights)
        out = module(indices.to(device), offsets.to(device), per_sample_weights=weights)
        coef = torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device)
        (out * coef).sum().backward()
        trace.append((out.detach().cpu(),
                      weights.grad.cpu() if grad_weights else None,
                      [w.detach().cpu().clone() for w in module.split_embedding_weights()]))
    return trace


def assert_same(cpu_trace, tpu_trace):
    for (out_c, gw_c, w_c), (out_t, gw_t, w_t) in zip(cpu_trace, tpu_trace):
        torch.testing.assert_close(out_t, out_c, atol=ATOL, rtol=0)
        if gw_c is not None:
            torch.testing.assert_close(gw_t, gw_c, atol=ATOL, rtol=0)
        for a, b in zip(w_t, w_c):
            torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@pytest.mark.parametrize("optimizer, pooling, weighted, mode", [
    pytest.param(EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.SUM, True, "strict",
                 marks=pytest.mark.smoke),
    (EmbOptimType.EXACT_SGD, PoolingMode.SUM, False, "strict"),
    (EmbOptimType.EXACT_SGD, PoolingMode.MEAN, False, "fused"),
    (EmbOptimType.EXACT_ADAGRAD, PoolingMode.SUM, True, "debug"),
    (EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.MEAN, False, "fused"),
])
def test_matches_fbgemm_cpu(optimizer, pooling, weighted, mode):
    cpu = train(make("cpu", optimizer, pooling), "cpu", 3, weighted)
    with torchtpu.eager_mode(mode):
        tpu = train(make("tpu", optimizer, pooling), "tpu", 3, weighted)
    assert_same(cpu, tpu)
    assert torchtpu.metrics.fallbacks() == {}


@pytest.mark.parametrize("optimizer, atol", [
    (EmbOptimType.EXACT_ROWWISE_ADAGRAD, 0.0),
    # (fbgemm's CPU SGD on float16 tables: some rows one float16 ulp (2^-8 at 2..4) from tpu's)
    (EmbOptimType.EXACT_SGD, 2.0 ** -8),
])
def test_float16_tables(optimizer, atol):
    """float16 tables (fbgemm's CPU kernels have no bfloat16), deterministic rounding."""
    from fbgemm_gpu.split_embedding_configs import SparseType

    kw = dict(weights_precision=SparseType.FP16, stochastic_rounding=False)
    cpu, tpu = train(make("cpu", optimizer, **kw), "cpu", 3, True), \
        train(make("tpu", optimizer, **kw), "tpu", 3, True)
    for (out_c, _, w_c), (out_t, _, w_t) in zip(cpu, tpu):
        torch.testing.assert_close(out_t, out_c, atol=max(atol, ATOL), rtol=0)
        for a, b in zip(w_t, w_c):
            assert a.dtype == torch.float16
            torch.testing.assert_close(a, b, atol=atol, rtol=0)


def test_rowwise_adagrad_state():
    cpu_m = make("cpu", EmbOptimType.EXACT_ROWWISE_ADAGRAD)
    tpu_m = make("tpu", EmbOptimType.EXACT_ROWWISE_ADAGRAD)
    assert_same(train(cpu_m, "cpu", 3, False), train(tpu_m, "tpu", 3, False))
    for a, b in zip(tpu_m.split_optimizer_states(), cpu_m.split_optimizer_states()):
        torch.testing.assert_close(a[0].cpu(), b[0], atol=ATOL, rtol=0)


@pytest.mark.parametrize("mode", ["L2", "DECOUPLE"])
def test_rowwise_adagrad_weight_decay(mode):
    """Against fbgemm's formulas (its CUDA kernel's): L2 adds weight_decay * w to the gradient
    whose mean square feeds the state, then w = (1 - m * wd) * w - m * g with
    m = lr / (sqrt(state) + eps); decoupled: w = (1 - lr * wd) * w - m * g. (fbgemm-gpu-cpu
    1.8.0's CPU kernel ignores weight decay: with weight_decay=0.5 it gives the update without.)"""
    from fbgemm_gpu.tbe.config.optimizer_config import WeightDecayMode

    specs = [(4, 4, EmbeddingLocation.HOST, ComputeDevice.CPU)]
    m = SplitTableBatchedEmbeddingBagsCodegen(
        specs, optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.1, eps=1e-8,
        weight_decay=0.5, weight_decay_mode=getattr(WeightDecayMode, mode),
        device=torch.device("tpu"))
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    m.split_embedding_weights()[0].copy_(w.expand(4, 4))
    g = torch.tensor([1.0, -1.0, 2.0, 0.5])
    out = m(torch.tensor([1]).to("tpu"), torch.tensor([0, 1]).to("tpu"))
    (out * g.to("tpu")).sum().backward()
    lr, wd, eps = 0.1, 0.5, 1e-8
    state = ((g + wd * w) ** 2).mean() if mode == "L2" else (g * g).mean()
    mult = lr / (state.sqrt() + eps)
    expected = ((1 - mult * wd) if mode == "L2" else (1 - lr * wd)) * w - mult * g
    torch.testing.assert_close(m.split_embedding_weights()[0][1].cpu(), expected)
    torch.testing.assert_close(m.split_optimizer_states()[0][0][1].cpu(), state)
    torch.testing.assert_close(m.split_embedding_weights()[0][0].cpu(), w)  # (not looked up)


def test_features_sharing_a_table():
    """Two features looking up one table (feature_table_map): a row looked up by both gets one
    update with the sum of their gradients. (fbgemm's CPU rowwise Adagrad refuses this case with
    "num of rows processed by adagrad ... does not match", so SGD.)"""
    global FEATURES
    saved, FEATURES = FEATURES, [0, 1, 2, 1]
    try:
        opt = EmbOptimType.EXACT_SGD
        assert_same(train(make("cpu", opt), "cpu", 3, True), train(make("tpu", opt), "tpu", 3, True))
    finally:
        FEATURES = saved


def test_sequence_embeddings():
    """Pooling mode none (TorchRec's EmbeddingCollection): one row per index, tables of one dim."""
    global TABLES
    saved, TABLES = TABLES, [(30, 8), (50, 8), (20, 8)]
    try:
        opt, none = EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.NONE
        assert_same(train(make("cpu", opt, none), "cpu", 3, False),
                    train(make("tpu", opt, none), "tpu", 3, False))
    finally:
        TABLES = saved


def test_per_sample_weight_gradient():
    """Per-sample weights that require a gradient: fbgemm's grad_indice_weights."""
    opt = EmbOptimType.EXACT_SGD
    assert_same(train(make("cpu", opt), "cpu", 2, True, grad_weights=True),
                train(make("tpu", opt), "tpu", 2, True, grad_weights=True))


def test_dense_tbe_matches_fbgemm_cpu():
    """fbgemm's dense TBE (TorchRec's data-parallel tables): built in fbgemm's CPU mode and moved
    to tpu; the output, the weights' gradient and the per-sample weights' gradient."""
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        DenseTableBatchedEmbeddingBagsCodegen)

    results = []
    for device in ("cpu", "tpu"):
        m = DenseTableBatchedEmbeddingBagsCodegen(TABLES, use_cpu=True).to(device)
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            m.weights.copy_(torch.randn(m.weights.shape, generator=g))
        indices, offsets, weights = batch(0, True)
        weights = weights.to(device).requires_grad_()
        out = m(indices.to(device), offsets.to(device), per_sample_weights=weights)
        coef = torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device)
        (out * coef).sum().backward()
        results.append((out.detach().cpu(), m.weights.grad.cpu(), weights.grad.cpu()))
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, atol=ATOL, rtol=0)
    assert results[0][1].abs().sum() > 0


def test_adam_matches_its_formulas():
    """fbgemm's CPU mode has no Adam: tpu's against Adam's update written in PyTorch ops, on the
    rows looked up in the step (fbgemm's Adam leaves the others alone), bias-corrected at the
    module's iteration, weight decay added to the step as fbgemm does."""
    m = make("tpu", EmbOptimType.ADAM, eps=1e-8, beta1=0.9, beta2=0.999, weight_decay=0.01)
    ref = [w.cpu().clone() for w in m.split_embedding_weights()]
    m1 = [torch.zeros_like(w) for w in ref]
    m2 = [torch.zeros_like(w) for w in ref]
    for step in range(3):
        indices, offsets, _ = batch(step, False)
        out = m(indices.to("tpu"), offsets.to("tpu"))
        coef = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
        (out * coef.to("tpu")).sum().backward()
        grads = [torch.zeros_like(w) for w in ref]  # the bags' gradients summed per row
        coef_cols = torch.split(coef, [TABLES[t][1] for t in FEATURES], dim=1)
        for f, t in enumerate(FEATURES):
            for b in range(BATCH):
                lo, hi = offsets[f * BATCH + b], offsets[f * BATCH + b + 1]
                for i in indices[lo:hi]:
                    grads[t][i] += coef_cols[f][b]
        it = step + 1
        for t in range(len(TABLES)):
            rows = torch.zeros(TABLES[t][0], dtype=torch.bool)
            for f in (f for f, tt in enumerate(FEATURES) if tt == t):
                rows[indices[offsets[f * BATCH]:offsets[(f + 1) * BATCH]]] = True
            g = grads[t][rows]
            m1[t][rows] = 0.9 * m1[t][rows] + 0.1 * g
            m2[t][rows] = 0.999 * m2[t][rows] + 0.001 * g * g
            update = (m1[t][rows] / (1 - 0.9 ** it)) / (
                (m2[t][rows] / (1 - 0.999 ** it)).sqrt() + 1e-8) + 0.01 * ref[t][rows]
            ref[t][rows] = ref[t][rows] - 0.1 * update
        for a, b in zip(m.split_embedding_weights(), ref):
            torch.testing.assert_close(a.cpu(), b, atol=2e-6, rtol=0)
    assert torchtpu.metrics.fallbacks() == {}


def test_lookups_charged_as_hbm_gathers():
    """The forward's HBM bytes: each row looked up is one 128-lane sublane of the memory tile
    (128 x 4 bytes in float32 whatever its dim), plus the indices, offsets and output moved as
    tiled tensors (a few KiB each here); one launch per lookup, in the estimate's op times."""
    m = make("tpu", EmbOptimType.EXACT_SGD)
    indices, offsets, _ = batch(0, False)
    torchtpu.metrics.reset()
    m(indices.to("tpu"), offsets.to("tpu"))
    fwd = torchtpu.torchrec.embedding_costs()["torchtpu_tbe::forward"]
    assert fwd["launches"] == 1
    rows = indices.numel() * 128 * 4
    assert rows < fwd["hbm_bytes"] <= rows + 3 * 16384, (fwd, rows)
    assert fwd["estimated_s"] > 0
    assert "torchtpu_tbe::forward" in torchtpu.metrics.op_times()
    assert torchtpu.torchrec.embedding_costs(chip="v6e")["torchtpu_tbe::forward"][
        "hbm_bytes"] == fwd["hbm_bytes"]


def test_sparse_ops_match_fbgemm_cpu():
    g = torch.Generator().manual_seed(0)
    T, B = 3, 4
    lengths = torch.randint(0, 4, (T * B,), generator=g, dtype=torch.int32)
    values = torch.randint(0, 50, (int(lengths.sum()),), generator=g)
    weights = torch.rand(values.shape, generator=g)
    perm = torch.tensor([2, 0, 1, 2], dtype=torch.int32)
    block_sizes = torch.tensor([10, 7, 20])
    calls = [
        lambda d: torch.ops.fbgemm.asynchronous_complete_cumsum(lengths.to(d)),
        lambda d: torch.ops.fbgemm.asynchronous_complete_cumsum(lengths.view(T, B).to(d)),
        lambda d: torch.ops.fbgemm.permute_2D_sparse_data(
            perm.to(d), lengths.view(T, B).to(d), values.to(d), weights.to(d), None),
        lambda d: torch.ops.fbgemm.invert_permute(
            torch.randperm(9, generator=torch.Generator().manual_seed(1)).int().to(d)),
    ] + [
        (lambda d, p=pos, s=seq: torch.ops.fbgemm.block_bucketize_sparse_features(
            lengths.to(d), values.to(d), p, s, block_sizes.to(d), 2, weights.to(d)))
        for pos in (False, True) for seq in (False, True)]
    for call in calls:
        a, b = call("cpu"), call("tpu")
        a, b = (a,) if isinstance(a, torch.Tensor) else a, (b,) if isinstance(b, torch.Tensor) else b
        for x, y in zip(a, b):
            assert (x is None) == (y is None)
            if x is not None:
                assert x.dtype == y.dtype and torch.equal(x, y.cpu())
    assert torchtpu.metrics.fallbacks() == {}


def test_bounds_check_repairs_as_the_cpu_and_raises_when_fatal():
    rows = torch.tensor([5, 7])
    indices = torch.tensor([1, 9, 4, -3, 6, 2])
    offsets = torch.tensor([0, 2, 3, 4, 5])  # (the last offset short of the 6 indices)
    results = []
    for device in ("cpu", "tpu"):
        i, o = indices.clone().to(device), offsets.clone().to(device)
        warning = torch.zeros(1, dtype=torch.long, device=device)
        torch.ops.fbgemm.bounds_check_indices(rows.to(device), i, o, 2, warning)  # IGNORE
        results.append((i.cpu(), o.cpu()))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    i, o = indices.to("tpu"), torch.tensor([0, 2, 3, 4, 6]).to("tpu")
    with pytest.raises((IndexError, RuntimeError), match="bounds_check_indices"):
        torch.ops.fbgemm.bounds_check_indices(rows.to("tpu"), i, o, 0,
                                              torch.zeros(1, dtype=torch.long, device="tpu"))
