#pragma once
// Collectives of the c10d backend "tpu_dist" as ops of their own (docs/distributed.md,
// "Collectives inside fused eager's graphs"): `tpu_dist::all_reduce_`,
// `tpu_dist::all_gather_into_tensor_`, `tpu_dist::reduce_scatter_tensor_` and
// `tpu_dist::broadcast_`, whose PrivateUse1 kernels run the collective through the group's Gloo
// backend from C++ (no Python, no GIL: on the stream's worker, in stream order), on CPU views of
// the device memory. Fused eager records them like any op (OpTraits::collective: never
// eliminated, never fused), so the ops around a collective fuse into one graph. The Python group
// (torchtpu/distributed.py) hands its Gloo backend over once, under an integer id the ops take.
//
// Also here, shared with the collectives the Python group runs itself: the charge of a
// collective to the cost model and the cross-rank check of the tensors' shapes and dtypes.
#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <string>
#include <vector>

namespace c10d {
class Backend;
}

namespace torchtpu::aten {

// Registers `backend` (held weakly: the Python group owns it) as process group `id`; `check`:
// every collective of the group first compares its tensors across the ranks (check_same).
void register_collective_group(int64_t id, const c10::intrusive_ptr<c10d::Backend>& backend,
                               bool check);

// Raises a ValueError on every rank when the ranks' tensors differ in shape or dtype (one small
// all-gather of a fingerprint per call), naming what this rank passed. `kind` names the
// collective in the message. Blocks until every rank of the group has called it.
void check_same(int64_t group, const std::string& kind, const std::vector<at::Tensor>& tensors);

// Charges a collective to the cost model on the ICI of the current device and stream: `kind`
// ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
// "send_recv", "barrier"), the bytes of the whole (gathered) array, the chips of the group.
// Counted as collectives.<kind> and collectives.<kind>_bytes; returns its id for the ledger's
// collective_waited (sim/Ledger.h).
uint64_t charge_collective(const std::string& kind, double bytes, int64_t chips);

// Work.wait() of the `sequence`-th recorded collective of `group` (0, 1, ... in the order the
// Python group issued them): when its kernel has run, the current stream waits for it in the
// cost model's clocks (sim/Ledger.h); before, it is still in the graph, on the stream it was
// recorded on, and nothing is to be done.
void recorded_collective_waited(int64_t group, uint64_t sequence);

}  // namespace torchtpu::aten
