#pragma once
// The plan of a pending graph (docs/design.md 3.1): the passes that turn recorded nodes
// (Graph.h) into regions with their memory, each a function of the graph and the plan so far,
// and the executor that runs a plan. Internal to defer/.
//
//   keys_of             which storage each operand touches (pending keys 0.., external -1..)
//   eliminate_dead_ops  Plan::live
//   group_regions       Plan::regions (fused element-wise chains, matmul epilogues, reductions)
//   pin_early_allocations  ops that must keep program order (then group_regions again)
//   assign_memory       Plan::memory, host_buffer, last_region, which values are block values
//   assign_block_slots  Plan::slot: the block buffer of each block value
//   print_ir            Plan::ir
//   build_plan          all of the above
//   plan_of             the plan cache: a cached plan, or build_plan's (Lowering.cpp)
//   execute             enqueues a planned graph on the streams (Executor.cpp)
#include "defer/Graph.h"

#include <c10/util/ArrayRef.h>

#include <climits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace torchtpu::defer {

// Strided geometry of an operand over an iteration shape: its stride for each dimension of the
// shape (0 where it broadcasts), its offset and dtype. `whole`: a 0-dim operand, passed as is.
struct Geometry {
  Dims smap;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool whole = false;
  bool operator==(const Geometry& o) const {
    return smap == o.smap && offset == o.offset && dtype == o.dtype && whole == o.whole;
  }
};
Geometry geometry_of(const Operand& o, c10::IntArrayRef shape);
// Each position of `shape` maps to a distinct element.
bool non_overlapping(const Geometry& g, c10::IntArrayRef shape);

// Keys of the storages a graph touches: pending storages [0, P), external ones -1, -2, ...,
// INT32_MIN for undefined operands and CPU scalars.
struct Keys {
  using List = c10::SmallVector<int, 4>;  // (inline: no heap allocation per node)
  std::vector<std::shared_ptr<PendingStorage>> pending;  // by key
  std::vector<List> operands;                            // per node, per operand
  std::vector<List> results;                             // per node, per result
};
Keys keys_of(const std::vector<Node>& nodes);
// A pending storage that tensors still refer to (or that has memory already).
bool alive(const PendingStorage& p);

struct Region {
  bool fused = false;
  bool matmul_first = false;    // a matmul whose result the element-wise ops after it consume
  bool reduction_last = false;  // a reduction of a value the element-wise ops before it make
  std::vector<int> nodes;
  Dims shape;
};

// A fused region's ops, sources and cost, made by the executor at the region's first run
// (Executor.cpp).
struct RegionTemplate;

struct Plan {
  std::vector<char> live;         // per node: not eliminated
  std::vector<Region> regions;
  std::vector<char> memory;       // per pending key: needs device memory
  std::vector<int> last_region;   // per pending key
  std::vector<int> slot;          // per pending key: block buffer slot in its fused region, or -1
  std::vector<char> host_buffer;  // per pending key: a matmul result kept in a region buffer
  int fused_ops = 0;
  int replans = 0;                // times pin_early_allocations made group_regions run again
  std::string ir;
  // Per region: what the executor made of it at its first run, for the plan's later runs.
  mutable std::mutex executable_mutex;
  mutable std::vector<std::shared_ptr<const RegionTemplate>> executable;
};

// Parts of planning that can be turned off to bisect a wrong result
// (TORCHTPU_DEFER_DEBUG=nofuse,noreorder,noreduce,nomatmul,nodce; nowait is the executor's).
struct PlanOptions {
  bool fuse = true, reorder = true, reduce = true, matmul = true, dce = true;
  // pin_early_allocations: keep ops that would allocate a value earlier in program order (fused
  // eager, where a recorded graph spans a whole step; off for compiled programs, whose graphs
  // are AOTAutograd's forward, backward and optimizer graphs apart: docs/compiled-mode.md).
  bool pin_allocations = true;
  static const PlanOptions& from_environment();
};
bool debug_flag(const char* flag);

bool is_convolution(const Node& n);
// A matmul or convolution that can lead a fused region (one dense result).
bool matmul_prologue(const Node& n);
// A reduction that can end a fused region: it reads one tensor (the value the region makes).
bool reduction_epilogue(const Node& n);
const Operand& written_operand(const Node& n);
// Where a node runs: its device and the stream it was recorded on. Only nodes of one place fuse.
int64_t place_of(const Node& n);

// Calls f(operand, key) for the operands and the results of node i.
template <typename F>
void for_each_access(const std::vector<Node>& nodes, const Keys& keys, size_t i, F&& f) {
  for (size_t j = 0; j < nodes[i].operands.size(); ++j) {
    if (nodes[i].operands[j].defined()) f(nodes[i].operands[j], keys.operands[i][j]);
  }
  for (size_t j = 0; j < nodes[i].results.size(); ++j) {
    if (nodes[i].results[j].defined()) f(nodes[i].results[j], keys.results[i][j]);
  }
}

// The passes, in order. `alive_keys`: per pending key, whether tensors still refer to it.
std::vector<char> eliminate_dead_ops(const std::vector<Node>& nodes, const Keys& keys,
                                     const std::vector<char>& alive_keys,
                                     const PlanOptions& options);
// `pinned`: ops that may not join a region out of program order.
void group_regions(const std::vector<Node>& nodes, const Keys& keys,
                   const std::vector<char>& pinned, const PlanOptions& options, Plan& plan);
// Marks the ops whose out-of-order join made a value that takes memory live earlier; true when
// it pinned any (group_regions must run again).
bool pin_early_allocations(const Plan& plan, const std::vector<Node>& nodes, const Keys& keys,
                           std::vector<char>& pinned);
void assign_memory(const std::vector<Node>& nodes, const Keys& keys,
                   const std::vector<char>& alive_keys, Plan& plan);
void assign_block_slots(const std::vector<Node>& nodes, const Keys& keys, Plan& plan);
std::string print_ir(const std::vector<Node>& nodes, const Keys& keys, const Plan& plan);

std::shared_ptr<Plan> build_plan(const std::vector<Node>& nodes, const Keys& keys,
                                 const std::vector<char>& alive_keys,
                                 const PlanOptions& options = PlanOptions::from_environment());

// The plan cache (Lowering.cpp). The plan of `nodes`: the cached one when the graph's structure
// (with `fingerprint`, the record-time hash of its non-tensor arguments) was planned before,
// else built by the passes and cached; `planned_for` names the graph in errors and dumps.
std::shared_ptr<Plan> plan_of(const std::vector<Node>& nodes, const Keys& keys,
                              const std::vector<char>& alive_keys, uint64_t fingerprint,
                              const char* planned_for, const PlanOptions& options);
// Per pending key of `keys`: whether tensors still refer to it (alive()).
std::vector<char> alive_keys_of(const Keys& keys);

// Enqueues the planned graph on the streams its nodes were recorded on (Executor.cpp).
// `blocking`: the host waits after this graph anyway, so it may wait for the device before
// taking fresh memory.
void execute(std::vector<Node>& nodes, const Keys& keys, const Plan& plan,
             const std::vector<char>& alive_keys, bool blocking);

}  // namespace torchtpu::defer
