"""fbgemm's sparse-feature ops that TorchRec's input distribution calls, on "tpu" (docs/torchrec.md,
"How it works"): tpu kernels written as torch ops on tpu tensors, so each runs, is charged and is
counted as those ops (torchtpu's native kernels), with fbgemm's CPU kernels' results; fbgemm has
kernels for the CPU and CUDA only, and without these they would run through the CPU fallback.

- ``asynchronous_complete_cumsum(t)``: the inclusive prefix sum with a 0 in front (per row of a
  2-D tensor), in t's dtype: bags' offsets from their lengths.
- ``permute_2D_sparse_data(permute, lengths, values, weights, permuted_lengths_sum)``: lengths is
  (features, batch); feature permute[i] of the result is feature permute[i] of the input, its
  lengths row and its run of values (and weights) moved along: regrouping a KeyedJaggedTensor's
  features by the rank (or table group) they go to.
- ``invert_permute(p)``: the inverse permutation (result[p[i]] = i), as TorchRec's sequence
  embeddings restore their order.
- ``block_bucketize_sparse_features(...)``: row-wise sharding's split of each bag by the rank
  owning its rows: index i of feature t goes to bucket i // block_sizes[t] as i % block_sizes[t]
  (an index past block_sizes[t] * buckets to bucket i % buckets as i // buckets); the result's
  lengths are (bucket, feature, bag), its values ordered by bucket, feature, bag and original
  position; with ``sequence`` the position of each input value in the result
  (unbucketize_permute), with ``bucketize_pos`` each value's position in its bag.

Variable batch sizes per feature, variable bucket boundaries (``block_bucketize_pos``),
``total_num_blocks`` and ``keep_orig_idx`` are refused with NotImplementedError: TorchRec's
fixed-batch row-wise sharding uses none of them.
"""
from __future__ import annotations

import torch


def _exclusive_cumsum(x: torch.Tensor) -> torch.Tensor:
    """[0, x0, x0 + x1, ...] in int64 (one element more than x)."""
    out = torch.zeros(x.numel() + 1, dtype=torch.long, device=x.device)
    out[1:] = x.reshape(-1).cumsum(0)
    return out


def asynchronous_complete_cumsum(t_in: torch.Tensor) -> torch.Tensor:
    if t_in.dim() not in (1, 2):
        raise ValueError("asynchronous_complete_cumsum: a 1-D or 2-D tensor")
    shape = list(t_in.shape)
    shape[-1] += 1
    out = torch.zeros(shape, dtype=t_in.dtype, device=t_in.device)
    out[..., 1:] = t_in.cumsum(-1, dtype=t_in.dtype)
    return out


def _segments(starts: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """The positions starts[k] .. starts[k] + sizes[k] - 1 of every segment k, in order."""
    sizes = sizes.long()
    total = int(sizes.sum())  # (a host read: the result's size depends on the lengths)
    out_starts = _exclusive_cumsum(sizes)[:-1]
    within = torch.arange(total, device=sizes.device) - torch.repeat_interleave(out_starts, sizes,
                                                                                output_size=total)
    return within + torch.repeat_interleave(starts.long(), sizes, output_size=total)


def permute_2D_sparse_data(permute, lengths, values, weights=None, permuted_lengths_sum=None):
    if lengths.dim() != 2:
        raise ValueError("permute_2D_sparse_data: lengths is (features, batch)")
    permute = permute.long()
    permuted_lengths = lengths.index_select(0, permute)
    row_sizes = lengths.long().sum(1)
    row_starts = _exclusive_cumsum(row_sizes)[:-1]
    positions = _segments(row_starts.index_select(0, permute), row_sizes.index_select(0, permute))
    permuted_values = values.index_select(0, positions)
    permuted_weights = weights.index_select(0, positions) if weights is not None else None
    return permuted_lengths, permuted_values, permuted_weights


def block_bucketize_sparse_features(lengths, indices, bucketize_pos, sequence, block_sizes,
                                    my_size, weights=None, batch_size_per_feature=None, max_B=-1,
                                    block_bucketize_pos=None, keep_orig_idx=False,
                                    total_num_blocks=None, keep_orig_idx_per_feature=None):
    if (batch_size_per_feature is not None or block_bucketize_pos is not None or keep_orig_idx
            or total_num_blocks is not None or keep_orig_idx_per_feature is not None):
        raise NotImplementedError(
            "block_bucketize_sparse_features on tpu: variable batch sizes, variable bucket "
            "boundaries, total_num_blocks and keep_orig_idx are not supported")
    device, n = indices.device, indices.numel()
    T = block_sizes.numel()
    bags = lengths.numel()
    # The bag (feature * B + b) of every value, and its feature.
    bag_of = torch.repeat_interleave(torch.arange(bags, device=device), lengths.long(),
                                     output_size=n)
    feature_of = torch.div(bag_of, bags // T, rounding_mode="floor")
    idx = indices.long()
    block = block_sizes.long().index_select(0, feature_of)
    inside = idx < block * my_size
    bucket = torch.where(inside, torch.div(idx, block, rounding_mode="floor"), idx % my_size)
    new_idx = torch.where(inside, idx % block, torch.div(idx, my_size, rounding_mode="floor"))
    # Stable order by (bucket, bag): the values of one new bag keep their order.
    key = bucket * bags + bag_of
    order = torch.sort(key, stable=True).indices
    new_lengths = torch.zeros(my_size * bags, dtype=lengths.dtype, device=device)
    new_lengths.index_add_(0, key, torch.ones(n, dtype=lengths.dtype, device=device))
    new_indices = new_idx.index_select(0, order).to(indices.dtype)
    new_weights = weights.index_select(0, order) if weights is not None else None
    new_pos = None
    if bucketize_pos:
        bag_start = _exclusive_cumsum(lengths.long())[:-1].index_select(0, bag_of)
        new_pos = (torch.arange(n, device=device) - bag_start).index_select(0, order)
        new_pos = new_pos.to(indices.dtype)
    unbucketize_permute = None
    if sequence:  # position in the result of each input value: the inverse of `order`
        unbucketize_permute = torch.empty(n, dtype=torch.long, device=device)
        unbucketize_permute.scatter_(0, order, torch.arange(n, device=device))
        unbucketize_permute = unbucketize_permute.to(indices.dtype)
    return new_lengths, new_indices, new_weights, new_pos, unbucketize_permute


def invert_permute(permute: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(permute)
    out.scatter_(0, permute.long(), torch.arange(permute.numel(), dtype=permute.dtype,
                                                   device=permute.device))
    return out


def register(library) -> None:
    """Registers the tpu kernels on `library` (a torch.library.Library("fbgemm", "IMPL"))."""
    for fn in (asynchronous_complete_cumsum, permute_2D_sparse_data,
               block_bucketize_sparse_features, invert_permute):
        library.impl(fn.__name__, fn, "PrivateUse1")
