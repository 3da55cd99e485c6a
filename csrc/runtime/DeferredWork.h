#pragma once
// Work that is recorded but not run yet (fused eager's pending graph, docs/design.md 3.1) as the
// runtime sees it: one interface, which the defer layer registers when it loads. The runtime
// calls it at every synchronization point and before memory statistics are read, always with a
// FlushReason; the reason's policy says how it is labelled in torchtpu.metrics and whether the
// host waits for the device right after (so that the graph may wait for released memory too).
#include <cstdint>

namespace torchtpu::runtime {

enum class FlushReason : uint8_t {
  // ops that run at once and read or write what the graph holds
  host_read,
  host_to_device_copy,
  random_op,
  cpu_fallback,
  unknown_op,
  out_sized_by_kernel,
  matmul_at_once,
  no_meta_kernel,
  argument_check,  // an op whose arguments its meta kernel refused runs at once (its error)
  unsigned_at_once,  // a call on uint16/32/64 that may need int64 runs at once (aten/Unsigned.h)
  foreign_op,      // an op torchtpu has no kernel for, which may read device memory itself
  // the graph itself
  graph_size_limit,
  // the op stream repeated a sequence (defer/RepeatedOps.cpp); the host waits for the graph, a
  // loop body, before recording the next: recorded while the graph runs, the next body only
  // competes with its kernels for the host's cores (benchmarks/loop_detection.py)
  repeated_ops,
  memory_pressure,
  storage_access,
  storage_resize,
  // synchronization points of the runtime and the API
  memory_statistics,
  mode_switch,
  explicit_sync,
  device_synchronize,
  stream_synchronize,
  stream_change,
  event_record,
  // a collective the process group runs on the host (torchtpu/distributed.py): its tensors'
  // values, and every collective recorded before it run first (Gloo pairs collectives by order)
  collective,
  // a compiled graph runs as one program after the eager work recorded before it
  compiled_graph,
};

struct FlushPolicy {
  const char* label;  // the materialization reason in torchtpu.metrics
  bool names_op;      // the label is followed by ": <op name>"
  bool host_waits;    // the host waits for the device right after the flush
};
const FlushPolicy& policy(FlushReason reason);

class DeferredWork {
 public:
  virtual ~DeferredWork() = default;
  // Enqueues the recorded work on the streams.
  virtual void flush(FlushReason reason) = 0;
  // flush(), then gives memory to every pending tensor still referenced.
  virtual void materialize_all(FlushReason reason) = 0;
};

void register_deferred_work(DeferredWork* work);
// Through the registered interface; nothing without one.
void flush_deferred_work(FlushReason reason);
void materialize_deferred_work(FlushReason reason);

}  // namespace torchtpu::runtime
