#pragma once
// Fused regions (docs/design.md 3.1): what a fused element-wise region is made of that depends on
// its plan alone (RegionTemplate, made at its first run and kept with the plan, Plan::executable),
// and one run of it bound to a graph's storages and arguments (FusedRegion). A run is a blocked
// loop over the region's output: every block goes through the whole chain while it is in cache,
// in parallel over blocks; each op runs PyTorch's own CPU kernel on the block, or the
// register-level loop (FusedLoop.h) where LoopSelection.h picks an instruction for it.
// Intermediates that die inside the region live only in per-thread block buffers.
#include "aten/Entry.h"
#include "defer/FusedLoop.h"
#include "defer/Plan.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torchtpu::defer {

// A CPU tensor over `storage` (host memory) with this geometry; no dispatch.
at::Tensor host_view(const c10::Storage& storage, c10::ScalarType dtype, int64_t offset,
                     c10::IntArrayRef sizes, c10::IntArrayRef strides);

// The one prefix of an error raised by a recorded op when its graph runs, whether the op runs
// through its kernel or inside a fused region.
std::string error_context(const std::string& name, const std::string& location);

// How a fused op reaches one operand in a block. (What it reaches at a run is bound then:
// FusedRegion::hosts and ::wholes.)
struct Source {
  enum Kind { undefined, whole, mapped, block } kind = undefined;
  int bind = -1;         // whole: the index in FusedRegion::wholes; mapped: in ::hosts
  Geometry g;
  int slot = -1;         // block
  bool first = false;    // block: the first access of its value in the region (a write)
};

struct FusedOp {
  c10::OperatorHandle op;
  const std::string* name = &kUnnamed;  // (Node::name)
  int node = -1;
  // The arguments of the op run when they are not its node's (relu run as clamp_min.out).
  std::optional<torch::jit::Stack> own_args;
  std::vector<Source> operands;
  std::vector<Source> results;
  bool copy = false;
  bool warned_at_call = false;  // (Node::warned_at_call)
  aten::DeterministicAlgorithms::Setting deterministic;  // (Node::deterministic)
  bool out_overload = false;  // the op run is an ".out" (or ".Scalar_out") overload
  aten::PointwiseFn fn = aten::PointwiseFn::none;  // of the op run (OpTraits)
  explicit FusedOp(const c10::OperatorHandle& h) : op(h) {}
};

// What a fused region is made of that depends on its plan alone: its ops and how they reach
// their operands, its cost. Made at the region's first run and kept with the plan
// (Plan::executable), so that a cached plan's later runs only bind storages and arguments.
struct RegionTemplate {
  Dims shape;
  int64_t numel = 1;
  std::vector<FusedOp> ops;
  int slots = 0;  // block buffers per thread
  int64_t block_item = 1;  // the largest element size of a block value (complex128: 16)
  std::vector<char> not_in_buffer;  // per slot: holds a kernel's new result (not the loop's)
  // The device storages the region reads or writes in memory, in order of first use: pending
  // key (or external key, found through the operand `index` of `node`: ~j for result j), and
  // the bytes its operands reach.
  struct Host {
    int key = 0;
    int node = 0;
    int index = 0;
    int64_t reach = 0;
  };
  std::vector<Host> hosts;
  // 0-dim operands passed whole: a CPU scalar (host -1, the operand's own tensor) or a view of
  // element `offset` of a host storage.
  struct Whole {
    int node = 0;
    int index = 0;
    int host = -1;
    int64_t offset = 0;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
  };
  std::vector<Whole> wholes;
  // Cost: VPU units of the ops, HBM bytes of the storages in memory (each once), the bytes of
  // a matmul prologue's or a reduction epilogue's value kept in the region.
  double units = 0, emulated_units = 0, bytes = 0;
  double prologue_result_bytes = 0, reduction_input_bytes = 0;
  bool conv_in_host_memory = false;  // the prologue is a convolution writing host memory
  std::vector<const std::string*> emulated;  // ops run emulated (float64, complex)
  std::string launch_name;
};

// One run of a fused region: its template bound to this graph's storages and arguments.
struct FusedRegion {
  std::shared_ptr<const RegionTemplate> t;
  std::vector<torch::jit::Stack> args;              // per op
  std::vector<std::optional<loop::Instr>> simple;   // per op: its loop instruction, if any
  std::vector<std::string> locations;               // per op (Node::location)
  std::vector<c10::Storage> hosts;                  // host storages over t->hosts' memory
  std::vector<at::Tensor> wholes;                   // per t->wholes
  std::vector<c10::Storage> keep;  // device storages whose memory the region uses
  void run() const;
};

// The template of fused region `region` of `plan` (over `nodes` and their `keys`).
std::shared_ptr<const RegionTemplate> make_template(const Region& region,
                                                    const std::vector<Node>& nodes,
                                                    const Keys& keys, const Plan& plan);

}  // namespace torchtpu::defer
