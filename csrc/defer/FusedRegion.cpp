// The run of a fused region (FusedRegion.h): blocks handed out to the threads of
// runtime::parallel_blocks, each block through the region's ops in order.
#include "defer/FusedRegion.h"
#include "defer/LoopSelection.h"
#include "runtime/BlockPool.h"
#include "runtime/Env.h"
#include "runtime/Errors.h"
#include "runtime/OpenMP.h"
#include "sim/CostModel.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/ParallelGuard.h>
#include <c10/util/flat_hash_map.h>

#include <algorithm>
#include <cstdlib>

namespace torchtpu::defer {
namespace {

using runtime::parallel_blocks;

// Elements per block of a fused region (the block of every operand stays in L2);
// TORCHTPU_FUSED_BLOCK sets it for every region (for experiments).
const bool kBlockSet = runtime::env::get("TORCHTPU_FUSED_BLOCK").has_value();
const int64_t kBlockElements =
    std::max<int64_t>(1, runtime::env::int_value("TORCHTPU_FUSED_BLOCK"));

// The block buffers of the thread running a fused region's blocks, kept for its next region
// (up to kKeptBufferBytes: a small region's run would otherwise spend much of its time
// allocating them).
constexpr int64_t kKeptBufferBytes = int64_t(8) << 20;
thread_local std::vector<at::Tensor> t_block_buffers;

}  // namespace

at::Tensor host_view(const c10::Storage& storage, c10::ScalarType dtype, int64_t offset,
                     c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
      c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return t;
}

std::string error_context(const std::string& name, const std::string& location) {
  return name + (location.empty() ? std::string() : " (recorded at " + location + ")") +
         ", run from a recorded graph (fused eager, or a compiled program): ";
}

namespace {

// How a region's iteration shape is cut into blocks: the dimensions after `d` whole, dimension
// `d` in chunks of `chunk` elements, the dimensions before it one index at a time.
struct Blocking {
  int64_t dims = 0;
  int64_t d = 0;
  int64_t chunk = 1;
  int64_t chunks = 1;
  int64_t blocks = 1;
  int64_t max_block = 1;  // elements of the largest block
};

Blocking blocking_of(const Dims& shape, int64_t numel, size_t ops) {
  const int64_t dims = static_cast<int64_t>(shape.size());
  // Blocks small enough to keep a block of every operand in L2 pay off where ops read what the
  // op before them wrote. A region with one element-wise op (a matmul's epilogue, the op before a
  // reduction) reads nothing back, and each block costs its kernel's boxed call and
  // TensorIterator (docs/host-speed.md, "A cached region's run"): there, a few blocks per thread.
  const int64_t block_elements =
      ops == 1 && !kBlockSet
          ? std::max<int64_t>(kBlockElements, numel / (4 * at::get_num_threads()))
          : kBlockElements;
  int64_t d = std::max<int64_t>(dims - 1, 0), inner = 1;
  while (d > 0 && inner * shape[d] <= block_elements) inner *= shape[d--];
  const int64_t len_d = dims == 0 ? 1 : shape[d];
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(len_d, block_elements / inner));
  const int64_t chunks = (len_d + chunk - 1) / chunk;
  int64_t outer = 1;
  for (int64_t j = 0; j < d; ++j) outer *= shape[j];
  Blocking b;
  b.dims = dims;
  b.d = d;
  b.chunk = chunk;
  b.chunks = chunks;
  b.blocks = dims == 0 ? 1 : outer * chunks;
  b.max_block = dims == 0 ? 1 : chunk * inner;
  return b;
}

// The block buffers of the thread for one region's run: `slots` buffers of at least `bytes`
// each, taken from the thread (a kernel that runs a region inside a block finds none and
// allocates its own) and given back to it at the end, up to kKeptBufferBytes.
struct ThreadBuffers {
  std::vector<at::Tensor> buffers = std::move(t_block_buffers);
  ThreadBuffers(int slots, int64_t bytes) {
    if (static_cast<int>(buffers.size()) < slots) buffers.resize(slots);
    for (int i = 0; i < slots; ++i) {
      if (!buffers[i].defined() || buffers[i].numel() < bytes) {
        buffers[i] = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
      }
    }
  }
  ~ThreadBuffers() {
    int64_t kept = 0;
    for (const at::Tensor& b : buffers) kept += b.defined() ? b.numel() : 0;
    if (kept <= kKeptBufferBytes && t_block_buffers.empty()) t_block_buffers = std::move(buffers);
  }
};

// One thread's share of a region's run: the blocks it is handed, each through the region's ops
// in order (a run of loop instructions in one pass, every other op through its CPU kernel).
class BlockRunner {
 public:
  BlockRunner(const FusedRegion& region, const Blocking& blocking,
              std::vector<at::Tensor>& buffers)
      : r_(region), ops_(region.t->ops), shape_(region.t->shape), b_(blocking),
        buffers_(buffers), values_(region.t->slots) {
    instrs_.reserve(ops_.size());
    ptrs_.reserve(3 * ops_.size());
    scalars_.reserve(3 * ops_.size());
    flags_.reserve(3 * ops_.size());
  }

  void run_block(int64_t b) {
    locate(b);
    std::fill(values_.begin(), values_.end(), at::Tensor());
    for (size_t k = 0; k < ops_.size(); ++k) {
      if (r_.simple[k]) {
        k = run_loop(k) - 1;
        continue;
      }
      run_kernel(k);
    }
  }

 private:
  // Block b: the index of the dimensions before d, and a chunk of d (its sizes, contiguous
  // strides in a block buffer).
  void locate(int64_t b) {
    const int64_t d = b_.d;
    index_.assign(std::max<int64_t>(d, 0), 0);
    start_ = 0;
    if (b_.dims > 0) {
      int64_t o = b / b_.chunks;
      for (int64_t j = d - 1; j >= 0; --j) {
        index_[j] = o % shape_[j];
        o /= shape_[j];
      }
      start_ = (b % b_.chunks) * b_.chunk;
      const int64_t len = std::min(b_.chunk, shape_[d] - start_);
      bsizes_.assign(1, len);
      bsizes_.append(shape_.begin() + d + 1, shape_.end());
      contiguous_.assign(bsizes_.size(), 1);
      for (int64_t j = static_cast<int64_t>(bsizes_.size()) - 2; j >= 0; --j) {
        contiguous_[j] = contiguous_[j + 1] * bsizes_[j + 1];
      }
    } else {
      bsizes_.clear();
      contiguous_.clear();
    }
  }

  // The element of a mapped operand where this block starts.
  int64_t mapped_offset(const Source& s) const {
    int64_t offset = s.g.offset;
    if (b_.dims > 0) {
      for (int64_t j = 0; j < b_.d; ++j) offset += index_[j] * s.g.smap[j];
      offset += start_ * s.g.smap[b_.d];
    }
    return offset;
  }

  // The operand `s` of an op over this block, as a host tensor.
  at::Tensor view(const Source& s) {
    switch (s.kind) {
      case Source::undefined: return at::Tensor();
      case Source::whole: return r_.wholes[s.bind];
      case Source::mapped: {
        const int64_t offset = mapped_offset(s);
        if (b_.dims > 0) {
          bstrides_.assign(s.g.smap.begin() + b_.d, s.g.smap.end());
        } else {
          bstrides_.clear();
        }
        return host_view(r_.hosts[s.bind], s.g.dtype, offset, bsizes_, bstrides_);
      }
      case Source::block: {
        at::Tensor& v = values_[s.slot];
        if (s.first || !v.defined()) {
          v = host_view(buffers_[s.slot].storage(), s.g.dtype, 0, bsizes_, contiguous_);
        }
        return v;
      }
    }
    return at::Tensor();
  }

  // An entry of the loop's operand table for `s`: a scalar, or a pointer to this block's data.
  int entry(const Source& s) {
    ptrs_.push_back(nullptr);
    scalars_.push_back(0.f);
    flags_.push_back(false);
    const int e = static_cast<int>(ptrs_.size()) - 1;
    if (s.kind == Source::whole) {
      flags_[e] = true;
      scalars_[e] = scalar_value(r_.wholes[s.bind]);
    } else if (s.kind == Source::block) {
      ptrs_[e] = static_cast<float*>(buffers_[s.slot].data_ptr());
      values_[s.slot] = at::Tensor();  // (written here: views are remade)
    } else {
      ptrs_[e] = static_cast<float*>(r_.hosts[s.bind].mutable_data()) + mapped_offset(s);
    }
    return e;
  }

  // The run of loop instructions from op k, in one pass over the block; returns the op after it.
  size_t run_loop(size_t k) {
    size_t end = k;
    instrs_.clear();
    ptrs_.clear();
    scalars_.clear();
    flags_.clear();
    for (; end < ops_.size() && r_.simple[end]; ++end) {
      const FusedOp& g = ops_[end];
      loop::Instr in = *r_.simple[end];
      in.out = entry(g.operands[in.out]);
      in.a = entry(g.operands[in.a]);
      if (in.op == loop::Op::clamp_min) {
        ptrs_.push_back(nullptr);
        scalars_.push_back(static_cast<float>(r_.args[end][1].toScalar().toDouble()));
        flags_.push_back(true);
        in.b = static_cast<int>(ptrs_.size()) - 1;
      } else if (in.b >= 0) {
        in.b = entry(g.operands[in.b]);
      }
      if (in.c >= 0) in.c = entry(g.operands[in.c]);
      instrs_.push_back(in);
    }
    int64_t block_numel = 1;
    for (int64_t x : bsizes_) block_numel *= x;
    loop::run(instrs_.data(), static_cast<int>(instrs_.size()), ptrs_.data(), scalars_.data(),
              reinterpret_cast<const bool*>(flags_.data()), block_numel);
    return end;
  }

  // Op k through its CPU kernel on this block's views; its new results to their block buffers
  // or (copied) to memory. Errors name the op and its recorded line.
  void run_kernel(size_t k) {
    const FusedOp& f = ops_[k];
    try {
      torch::jit::Stack stack = r_.args[k];
      size_t i = 0;
      for_each_tensor_slot(stack, [&](at::Tensor& t) { t = view(f.operands[i++]); });
      if (f.copy) {
        stack[1].toTensor().copy_(stack[0].toTensor());
        return;
      }
      {
        std::optional<aten::QuietWarnings> quiet;
        if (f.warned_at_call) quiet.emplace();
        const aten::DeterministicAlgorithms deterministic(f.deterministic);
        f.op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
      }
      for (size_t r = 0; r < f.results.size(); ++r) {
        const Source& s = f.results[r];
        if (s.kind == Source::block) {
          values_[s.slot] = stack[r].toTensor();
        } else if (s.kind == Source::mapped) {
          view(s).copy_(stack[r].toTensor());
        }
      }
    } catch (const c10::Error&) {
      runtime::rethrow_with_context(std::current_exception(),
                                    error_context(*f.name, r_.locations[k]));
    }
  }

  const FusedRegion& r_;
  const std::vector<FusedOp>& ops_;
  const Dims& shape_;
  const Blocking& b_;
  std::vector<at::Tensor>& buffers_;
  std::vector<at::Tensor> values_;  // per slot: the view of its value in this block
  std::vector<loop::Instr> instrs_;
  std::vector<float*> ptrs_;
  std::vector<float> scalars_;
  std::vector<char> flags_;
  Dims index_, bsizes_, bstrides_, contiguous_;
  int64_t start_ = 0;
};

}  // namespace

void FusedRegion::run() const {
  if (t->numel == 0) return;
  const Blocking blocking = blocking_of(t->shape, t->numel, t->ops.size());
  parallel_blocks(blocking.blocks, t->numel, [&](const auto& next_block) {
    // Kernels run on one block each: no nested intra-op parallelism (it would oversubscribe).
    const c10::ParallelGuard serial(true);
    const runtime::SerialOpenMP serial_omp;
    ThreadBuffers buffers(t->slots, blocking.max_block * t->block_item);
    BlockRunner runner(*this, blocking, buffers.buffers);
    for (int64_t b; (b = next_block()) >= 0;) runner.run_block(b);
  });
}

// ---------------------------------------------------------------------------------------------
// The template of a region

namespace {

double value_bytes(const Operand& o) {
  return sim::CostModel::padded_bytes(o.sizes, static_cast<int>(c10::elementSize(o.dtype)));
}

// Makes the template of one fused region, node by node: how each op reaches its operands
// (Source), the host storages and 0-dim values it binds at a run, and its cost.
class TemplateBuilder {
 public:
  TemplateBuilder(const Region& region, const std::vector<Node>& nodes, const Keys& keys,
                  const Plan& plan)
      : region_(region), nodes_(nodes), keys_(keys), plan_(plan),
        t_(std::make_shared<RegionTemplate>()) {}

  std::shared_ptr<RegionTemplate> build() {
    t_->shape = region_.shape;
    for (int64_t s : region_.shape) t_->numel *= s;
    t_->launch_name = "fused region of " + std::to_string(region_.nodes.size()) + " ops (" +
                      *nodes_[region_.nodes[0]].name + ", ...)";
    for (int i : region_.nodes) {
      if (region_.reduction_last && i == region_.nodes.back()) {
        reduction_epilogue(i);
      } else if (region_.matmul_first && i == region_.nodes[0]) {
        matmul_prologue(i);
      } else {
        FusedOp f = fused_op(i);
        charge(i);
        t_->ops.push_back(std::move(f));
      }
    }
    return t_;
  }

 private:
  // How an operand of node `node` (its operand `index`, or result ~index) is reached in a block:
  // a block buffer, a whole 0-dim value, or a strided view of a host storage.
  Source source(const Operand& o, int key, int node, int index) {
    Source s;
    if (!o.defined()) return s;
    s.g = geometry_of(o, region_.shape);
    if (key >= 0 && !plan_.memory[key] && !plan_.host_buffer[key]) {
      s.kind = Source::block;
      s.slot = plan_.slot[key];
      s.first = seen_blocks_.insert(key).second;
      t_->slots = std::max(t_->slots, s.slot + 1);
      t_->block_item =
          std::max<int64_t>(t_->block_item, static_cast<int64_t>(c10::elementSize(o.dtype)));
      return s;
    }
    s.bind = static_cast<int>(t_->wholes.size());
    if (key == INT32_MIN) {  // a CPU scalar
      s.kind = Source::whole;
      t_->wholes.push_back({node, index, -1, 0, o.dtype});
      return s;
    }
    const auto [it, fresh] = host_of_.emplace(key, static_cast<int>(t_->hosts.size()));
    if (fresh) t_->hosts.push_back({key, node, index, 0});
    int64_t& reach = t_->hosts[it->second].reach;
    const int64_t item = static_cast<int64_t>(c10::elementSize(o.dtype));
    if (s.g.whole) {
      s.kind = Source::whole;
      t_->wholes.push_back({node, index, it->second, o.offset, o.dtype});
      reach = std::max(reach, (o.offset + 1) * item);
      return s;
    }
    s.kind = Source::mapped;
    s.bind = it->second;
    // Every element the region's loop reaches lies in the storage (a plan that mapped an
    // operand wrongly would otherwise write past it: memory corruption far from its cause);
    // checked against the storage's size at each run.
    int64_t lo = s.g.offset, hi = s.g.offset;
    for (size_t j = 0; j < region_.shape.size() && j < s.g.smap.size(); ++j) {
      if (region_.shape[j] == 0) return s;
      (s.g.smap[j] < 0 ? lo : hi) += (region_.shape[j] - 1) * s.g.smap[j];
    }
    TORCH_INTERNAL_ASSERT(lo >= 0, "fused eager: an operand of a fused region over ",
                          c10::IntArrayRef(region_.shape), " reaches element ", lo,
                          " of its storage (sizes ", c10::IntArrayRef(o.sizes), ", strides ",
                          c10::IntArrayRef(o.strides), ", offset ", o.offset,
                          "); please report it");
    reach = std::max(reach, (hi + 1) * item);
    return s;
  }

  // The reduction that ends the region runs through its kernel after the launch, reading the
  // region's value in its buffer.
  void reduction_epilogue(int i) {
    const Node& n = nodes_[i];
    for (size_t j = 0; j < n.operands.size(); ++j) {
      const int key = keys_.operands[i][j];
      if (!n.operands[j].written && key >= 0 && plan_.host_buffer[key]) {
        t_->reduction_input_bytes = value_bytes(n.operands[j]);
      }
    }
  }

  // The matmul that starts the region runs through its kernel before the launch; charged with it.
  void matmul_prologue(int i) {
    const Node& n = nodes_[i];
    t_->conv_in_host_memory = is_convolution(n) && keys_.results[i][0] >= 0 &&
                              plan_.host_buffer[keys_.results[i][0]];
    if (t_->conv_in_host_memory) t_->prologue_result_bytes = value_bytes(n.results[0]);
    for (size_t j = 0; j < n.operands.size(); ++j) {
      const int key = keys_.operands[i][j];
      if (n.operands[j].written && key >= 0 && plan_.host_buffer[key]) {
        t_->prologue_result_bytes = value_bytes(n.operands[j]);
      }
      if (n.operands[j].written) counted_[key] = true;  // charged with the matmul
    }
  }

  // Node i as an op of the region: its sources, the op run (relu as clamp_min.out), whether it
  // is an out= overload (what the loop can run).
  FusedOp fused_op(int i) {
    const Node& n = nodes_[i];
    FusedOp f(n.op);
    f.name = n.name;
    f.node = i;
    f.copy = n.capture == aten::Capture::copy;
    f.warned_at_call = n.warned_at_call;
    f.deterministic = n.deterministic;
    f.operands.reserve(n.operands.size() + 1);  // (relu below adds one)
    f.results.reserve(n.results.size());
    for (size_t j = 0; j < n.operands.size(); ++j) {
      f.operands.push_back(source(n.operands[j], keys_.operands[i][j], i, static_cast<int>(j)));
    }
    for (size_t j = 0; j < n.results.size(); ++j) {
      f.results.push_back(source(n.results[j], keys_.results[i][j], i, ~static_cast<int>(j)));
    }
    const aten::OpTraits& traits = traits_of(n);
    f.fn = traits.fn;
    if (traits.fn == aten::PointwiseFn::relu && n.capture == aten::Capture::new_results &&
        f.results.size() == 1) {
      // relu is clamp_min(x, 0) in ATen's CPU kernel: its out= form writes the block in place
      // of allocating a new one.
      static const c10::OperatorHandle clamp_min_out =
          c10::Dispatcher::singleton().findSchemaOrThrow("aten::clamp_min", "out");
      f.op = clamp_min_out;
      f.own_args = torch::jit::Stack{at::Tensor(), c10::Scalar(0), at::Tensor()};
      f.operands.push_back(f.results[0]);
      f.results.clear();
      f.fn = aten::PointwiseFn::clamp_min;
    }
    const std::string& overload = f.op.schema().overload_name();
    f.out_overload = overload == "out" || overload == "Scalar_out";  // (lerp.Scalar_out)
    return f;
  }

  // Cost: VPU work per op; HBM bytes once per storage that is not a block buffer.
  // float64 / complex: emulated, as in the unfused VPU executor (aten/HostExecution.cpp).
  void charge(int i) {
    const Node& n = nodes_[i];
    const aten::OpTraits& traits = traits_of(n);
    bool foreign = false;
    for (const auto& o : n.operands) {
      if (o.tensor.defined() && o.tensor.is_cpu()) continue;  // a host scalar
      foreign = foreign || o.dtype == c10::kDouble || c10::isComplexType(o.dtype);
    }
    if (foreign) {
      t_->emulated.push_back(n.name);
      t_->emulated_units += traits.vpu_units;
    } else {
      t_->units += traits.vpu_units;
    }
    for_each_access(nodes_, keys_, i, [&](const Operand& o, int key) {
      if (key == INT32_MIN || (key >= 0 && !plan_.memory[key]) || counted_[key]) return;
      counted_[key] = true;
      t_->bytes += value_bytes(o);
    });
  }

  const Region& region_;
  const std::vector<Node>& nodes_;
  const Keys& keys_;
  const Plan& plan_;
  std::shared_ptr<RegionTemplate> t_;
  ska::flat_hash_map<int, int> host_of_;   // key -> index in t_->hosts
  ska::flat_hash_set<int> seen_blocks_;    // block values met so far
  ska::flat_hash_map<int, bool> counted_;  // storages whose bytes are counted
};

}  // namespace

std::shared_ptr<const RegionTemplate> make_template(const Region& region,
                                                    const std::vector<Node>& nodes,
                                                    const Keys& keys, const Plan& plan) {
  return TemplateBuilder(region, nodes, keys, plan).build();
}

}  // namespace torchtpu::defer
