// Execution of a planned graph (Plan.h, docs/design.md 3.1): each region is enqueued on the
// stream its ops were recorded on; a fused element-wise region runs as a blocked loop over its
// output in which every block goes through the whole chain while it is in cache (the host
// analogue of VMEM tiles), in parallel over blocks (FusedRegion.h); each op of the chain runs
// PyTorch's own CPU kernel on the block (or the register-level loop, FusedLoop.h, for exact
// float32 ops), so fused results are those of the unfused kernels. Intermediates that die inside
// a fused region live only in per-thread block buffers and never take HBM. Every other op runs
// through its kernel.
#include "aten/Entry.h"
#include "aten/Launch.h"
#include "defer/FusedRegion.h"
#include "defer/LoopSelection.h"
#include "defer/Plan.h"
#include "runtime/Allocator.h"
#include "runtime/Errors.h"
#include "runtime/HostBufferPool.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"
#include "sim/CostModel.h"

#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace torchtpu::defer {
namespace {

using runtime::HostBufferPool;

c10::Storage host_storage_over(const c10::Storage& device_storage) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), device_storage.nbytes(),
      c10::DataPtr(const_cast<void*>(device_storage.data()), c10::Device(c10::kCPU)), nullptr,
      /*resizable=*/false));
}


std::string where(const Node& n) {
  return n.location.empty() ? std::string() : " (recorded at " + n.location + ")";
}

class Executor {
 public:
  Executor(std::vector<Node>& nodes, const Keys& keys, const Plan& plan,
           const std::vector<char>& alive_keys, bool blocking)
      : nodes_(nodes), keys_(keys), plan_(plan), alive_(alive_keys),
        memory_(keys.pending.size()), blocking_(blocking) {
    for (const Node& n : nodes) {
      single_place_ = single_place_ && n.device == nodes[0].device && n.stream == nodes[0].stream;
    }
  }

  void run() {
    for (size_t r = 0; r < plan_.regions.size(); ++r) {
      const Region& region = plan_.regions[r];
      enter_stream_of(region);
      if (region.fused) {
        run_fused(r);
      } else {
        replay(region.nodes[0]);
      }
      for (size_t k = 0; k < memory_.size(); ++k) {
        if (plan_.last_region[k] == static_cast<int>(r) && !alive_[k] && memory_[k]) {
          release(k);
        }
      }
    }
    for (const auto& previous : entered_) runtime::exchange_stream(previous);
  }

 private:
  // Device memory of pending key k (materializing the tensors' own storage when alive).
  const c10::Storage& storage(int k) {
    if (!memory_[k] && plan_.host_buffer[k]) {
      // A matmul result that only its fused epilogue reads: host memory, not HBM.
      PendingStorage& p = *keys_.pending[k];
      c10::DataPtr data = HostBufferPool::get().allocate(p.nbytes, p.device);
      memory_[k] = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
          c10::StorageImpl::use_byte_size_t(), p.nbytes, std::move(data), nullptr,
          /*resizable=*/false));
    }
    if (!memory_[k]) {
      PendingStorage& p = *keys_.pending[k];
      c10::intrusive_ptr<c10::StorageImpl> impl;
      before_fresh_memory(p.device, p.nbytes);
      if (alive_[k] && materialize(p)) impl = p.impl->lock();
      if (impl) {
        memory_[k] = c10::Storage(std::move(impl));
      } else {
        memory_[k] = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
            c10::StorageImpl::use_byte_size_t(), p.nbytes,
            runtime::allocator().allocate_on(p.device.index(), p.nbytes), &runtime::allocator(),
            /*resizable=*/false));
      }
    }
    return memory_[k];
  }

  // A temporary whose last use has been enqueued goes back to the caching allocator once that
  // work has run. When the graph runs at a point where the host waits anyway (a host read, a
  // synchronization), the host waits for the device before taking fresh memory while such
  // temporaries are pending, so that the graph's peak is its live memory, not everything the
  // host issued ahead of the device. (Elsewhere it runs ahead, as strict eager does.)
  void release(int k) {
    released_ += memory_[k].nbytes();
    memory_[k] = c10::Storage();
  }

  // (Waiting is worth it when the released memory could serve this request and is not small.)
  void before_fresh_memory(c10::Device device, size_t nbytes) {
    if (blocking_ && !debug_flag("nowait") && released_ >= std::max<size_t>(nbytes, size_t(1) << 20)) {
      aten::wait_for_device(device);
      released_ = 0;
      TORCHTPU_COUNT("defer.memory_waits");
    }
  }

  at::Tensor tensor_of(const Operand& o, int key) {
    if (key >= 0) return device_view(storage(key), o);
    return o.tensor;
  }

  // An operand of an op replayed: a tensor the graph does not hold (key < 0) with the geometry
  // it was recorded with (an in-place metadata op, such as unsqueeze_ then squeeze_ around an
  // in-place op, may have changed it since). A tensor the op takes twice is one tensor (`seen`),
  // as it was at the call (self and out= of an in-place call through an out= variant).
  at::Tensor replayed_operand(const Operand& o, int key,
                              c10::SmallVector<std::pair<const Operand*, at::Tensor>, 4>& seen) {
    if (key >= 0 || !o.tensor.defined() || !o.tensor.device().is_privateuseone() ||
        (o.tensor.sizes() == c10::IntArrayRef(o.sizes) &&
         o.tensor.strides() == c10::IntArrayRef(o.strides) &&
         o.tensor.storage_offset() == o.offset)) {
      return tensor_of(o, key);
    }
    for (const auto& [other, view] : seen) {
      if (other->tensor.unsafeGetTensorImpl() == o.tensor.unsafeGetTensorImpl() &&
          other->sizes == o.sizes && other->strides == o.strides && other->offset == o.offset) {
        return view;
      }
    }
    seen.emplace_back(&o, device_view(o.tensor.storage(), o));
    return seen.back().second;
  }

  void replay(int i) {
    Node& n = nodes_[i];
    torch::jit::Stack stack = n.args;
    size_t j = 0;
    c10::SmallVector<std::pair<const Operand*, at::Tensor>, 4> seen;
    for_each_tensor_slot(stack, [&](at::Tensor& t) {
      t = replayed_operand(n.operands[j], keys_.operands[i][j], seen);
      ++j;
    });
    const c10::DeviceGuard guard(n.device);
    // The float32 matmul precision in force when the op was recorded.
    const auto previous = sim::precision_override();
    sim::set_precision_override(n.precision);
    try {
      // (Work the kernel enqueues is named with the recorded line too, for errors reported at
      // synchronization.)
      const aten::LaunchNote note(n.location.empty() ? std::string() : where(n));
      std::optional<aten::QuietWarnings> quiet;
      if (n.warned_at_call) quiet.emplace();
      const aten::DeterministicAlgorithms deterministic(n.deterministic);
      n.op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
      sim::set_precision_override(previous);
    } catch (const c10::Error&) {
      sim::set_precision_override(previous);
      runtime::rethrow_with_context(std::current_exception(), error_context(*n.name, n.location));
    }
    for (size_t r = 0; r < n.results.size(); ++r) {
      const int key = keys_.results[i][r];
      if (key < 0 || !(plan_.memory[key] || plan_.host_buffer[key]) || !stack[r].isTensor()) {
        continue;
      }
      adopt(n.results[r], key, stack[r].toTensor());
    }
  }

  // Gives a kernel's new result to pending key k: its memory when the layout is the one
  // recorded, else a copy.
  void adopt(const Operand& o, int k, const at::Tensor& real) {
    PendingStorage& p = *keys_.pending[k];
    const bool same = real.sizes() == c10::IntArrayRef(o.sizes) &&
                      real.strides() == c10::IntArrayRef(o.strides) &&
                      real.storage_offset() == o.offset && real.scalar_type() == o.dtype &&
                      real.storage().nbytes() == p.nbytes &&
                      real.storage().use_count() == 1 && !memory_[k];
    if (same) {
      c10::StorageImpl* from = real.storage().unsafeGetStorageImpl();
      c10::intrusive_ptr<c10::StorageImpl> impl;
      if (alive_[k]) impl = p.impl->lock();
      if (impl) {
        give_memory(p, *impl, from->set_data_ptr(c10::DataPtr(nullptr, real.device())));
        memory_[k] = c10::Storage(std::move(impl));
      } else {
        memory_[k] = real.storage();
      }
      return;
    }
    TORCHTPU_COUNT("defer.result_copies");
    if (real.scalar_type() != o.dtype || real.sizes() != c10::IntArrayRef(o.sizes)) {
      // The op's meta kernel (which sized the recorded result) disagrees with the kernel.
      TORCHTPU_COUNT("defer.meta_mismatches");
      TORCH_WARN_ONCE("fused eager: the meta kernel of ", nodes_[0].name->empty() ? "" : "an op",
                      " gave ", c10::toString(o.dtype), c10::IntArrayRef(o.sizes),
                      " where the kernel returned ", c10::toString(real.scalar_type()),
                      real.sizes(), "; the result is converted (please report it)");
    }
    device_view(storage(k), o).copy_(real);
  }

  const Operand& operand_at(int node, int index) const {
    const Node& n = nodes_[node];
    return index >= 0 ? n.operands[index] : n.results[~index];
  }

  // The template of fused region r (RegionTemplate): the plan's, or made now and kept with it.
  std::shared_ptr<const RegionTemplate> template_of(size_t r) {
    {
      std::lock_guard<std::mutex> lock(plan_.executable_mutex);
      if (r < plan_.executable.size() && plan_.executable[r]) return plan_.executable[r];
    }
    std::shared_ptr<const RegionTemplate> made =
        make_template(plan_.regions[r], nodes_, keys_, plan_);
    TORCHTPU_COUNT("defer.region_templates");
    std::lock_guard<std::mutex> lock(plan_.executable_mutex);
    if (plan_.executable.size() < plan_.regions.size()) {
      plan_.executable.resize(plan_.regions.size());
    }
    if (!plan_.executable[r]) plan_.executable[r] = std::move(made);
    return plan_.executable[r];
  }

  void run_fused(size_t r) {
    const Region& region = plan_.regions[r];
    std::shared_ptr<const RegionTemplate> t = template_of(r);
    sim::Estimate prologue;
    if (region.matmul_first) {
      // The matmul runs through its kernel (enqueued before the epilogue on the stream); its
      // charge joins the region's single launch.
      sim::RecordCollector collect;
      if (t->conv_in_host_memory) {
        aten::ResultInHostMemory scope;
        replay(region.nodes[0]);
      } else {
        replay(region.nodes[0]);
      }
      prologue = collect.total;
    }
    // Bind: the memory of the storages, the 0-dim operands, the arguments of this graph's ops.
    auto fused = std::make_shared<FusedRegion>();
    fused->t = t;
    fused->hosts.reserve(t->hosts.size());
    fused->keep.reserve(t->hosts.size());
    for (const RegionTemplate::Host& h : t->hosts) {
      c10::Storage device_storage =
          h.key >= 0 ? storage(h.key) : operand_at(h.node, h.index).tensor.storage();
      TORCH_INTERNAL_ASSERT(h.reach <= static_cast<int64_t>(device_storage.nbytes()),
                            "fused eager: an operand of a fused region over ",
                            c10::IntArrayRef(t->shape), " reaches ", h.reach,
                            " bytes of a storage of ", device_storage.nbytes(),
                            " bytes; please report it");
      fused->hosts.push_back(host_storage_over(device_storage));
      fused->keep.push_back(std::move(device_storage));
    }
    fused->wholes.reserve(t->wholes.size());
    for (const RegionTemplate::Whole& w : t->wholes) {
      fused->wholes.push_back(w.host < 0 ? operand_at(w.node, w.index).tensor
                                         : host_view(fused->hosts[w.host], w.dtype, w.offset,
                                                     {}, {}));
    }
    const size_t ops = t->ops.size();
    fused->args.reserve(ops);
    fused->simple.reserve(ops);
    fused->locations.resize(ops);
    std::vector<char> not_in_buffer(t->slots, 0);  // block slots holding a kernel's new result
    for (size_t k = 0; k < ops; ++k) {
      const FusedOp& f = t->ops[k];
      const Node& n = nodes_[f.node];
      fused->args.push_back(f.own_args ? *f.own_args : n.args);
      if (!n.location.empty()) fused->locations[k] = n.location;
      // (Per run: the loop takes an add's alpha and a clamp's bound, Scalar arguments, which
      // are values of the run.)
      fused->simple.push_back(loop_instruction(f, fused->args.back(), t->shape, not_in_buffer));
      for (const Source& s : f.results) {
        if (s.kind == Source::block) not_in_buffer[s.slot] = 1;
      }
      if (fused->simple.back()) TORCHTPU_COUNT("defer.ops_in_loop");
      runtime::metrics::add_lasting(runtime::metrics::Category::op, *f.name);  // (no kernel)
    }
    for (const std::string* name : t->emulated) runtime::metrics::count("emulated." + *name);
    // TORCHTPU_CHECK_NANS: the values the region writes to memory are checked after it runs
    // (the region is named; debug eager names the op).
    std::vector<at::Tensor> written;
    if (runtime::check_nans()) {
      for (const FusedOp& f : t->ops) {
        for_each_access(nodes_, keys_, f.node, [&](const Operand& o, int key) {
          if (o.written && key != INT32_MIN && (key < 0 || plan_.memory[key])) {
            written.push_back(tensor_of(o, key));
          }
        });
      }
    }
    const sim::CostModel& model = sim::cost_model();
    sim::Estimate e =
        model.vector(t->numel, t->units + model.units(t->emulated_units, true), t->bytes);
    if (region.matmul_first) {
      // One launch: the matmul's MXU time and operand bytes (without writing a result that
      // stays in the region), the epilogue's VPU time and bytes.
      e = model.combine(prologue, e, t->prologue_result_bytes);
    }
    const c10::Device device = nodes_[region.nodes[0]].device;
    aten::launch(device, t->launch_name, [fused] { fused->run(); }, std::move(written),
                 region.matmul_first || t->numel >= aten::kParallelElements);
    if (region.reduction_last) {
      // The reduction runs through its kernel after the element-wise work, reading the value
      // from the region buffer; its charge joins the region's single launch.
      sim::RecordCollector collect;
      replay(region.nodes.back());
      e = model.combine(e, collect.total, t->reduction_input_bytes);
      TORCHTPU_COUNT("defer.fused_reduction_regions");
    }
    sim::record(region.matmul_first ? "defer::fused_matmul_region" : "defer::fused_region", e);
    TORCHTPU_COUNT("defer.fused_regions");
    TORCHTPU_COUNT("defer.ops_fused", static_cast<int64_t>(region.nodes.size()));
    if (region.matmul_first) TORCHTPU_COUNT("defer.fused_matmul_regions");
  }

  // Each region is enqueued on the stream its ops were recorded on (Node::stream), whichever
  // thread flushes the graph. When a region uses a storage that a region on another stream of
  // its device used before it in this graph, its stream first waits for that stream's work so
  // far (an event), so that the graph's order holds across streams.
  void enter_stream_of(const Region& region) {
    const Node& first = nodes_[region.nodes[0]];
    const c10::DeviceIndex device = first.device.index();
    const c10::Stream stream(c10::Stream::UNSAFE, first.device, first.stream);
    if (single_place_) {  // one stream for the whole graph: entered at the first region
      if (!entered_single_ && runtime::current_stream(device) != stream) {
        entered_.push_back(runtime::exchange_stream(stream));  // (no flush: in a kernel)
      }
      entered_single_ = true;
      return;
    }
    if (runtime::current_stream(device) != stream) {
      const c10::Stream previous = runtime::exchange_stream(stream);  // (no flush: in a kernel)
      if (std::none_of(entered_.begin(), entered_.end(),
                       [&](const c10::Stream& e) { return e.device_index() == device; })) {
        entered_.push_back(previous);
      }
    }
    std::vector<c10::StreamId> waits;
    for (int i : region.nodes) {
      for_each_access(nodes_, keys_, i, [&](const Operand&, int key) {
        if (key == INT32_MIN) return;
        auto [it, fresh] = last_stream_.emplace(key, std::make_pair(device, first.stream));
        if (!fresh && it->second.first == device && it->second.second != first.stream &&
            std::find(waits.begin(), waits.end(), it->second.second) == waits.end()) {
          waits.push_back(it->second.second);
        }
        it->second = std::make_pair(device, first.stream);
      });
    }
    for (c10::StreamId other : waits) {
      void* event = nullptr;
      runtime::event::record(&event, c10::Stream(c10::Stream::UNSAFE, first.device, other),
                             c10::EventFlag::PYTORCH_DEFAULT);
      runtime::event::block(event, stream);
      runtime::event::destroy(event);
      TORCHTPU_COUNT("defer.stream_waits");
    }
  }

  // Every node of the graph on one device and stream (the common case: no waits to track).
  bool single_place_ = true;
  bool entered_single_ = false;
  std::vector<c10::Stream> entered_;  // the streams current before the graph, to restore
  std::unordered_map<int, std::pair<c10::DeviceIndex, c10::StreamId>> last_stream_;
  std::vector<Node>& nodes_;
  const Keys& keys_;
  const Plan& plan_;
  const std::vector<char>& alive_;
  std::vector<c10::Storage> memory_;
  bool blocking_ = false;  // the host waits after this graph anyway
  size_t released_ = 0;  // bytes of temporaries released since the last wait
};

}  // namespace

at::Tensor device_view(const c10::Storage& storage, const Operand& o) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(o.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides, o.offset);
  if (o.conj) t.unsafeGetTensorImpl()->_set_conj(true);
  if (o.neg) t.unsafeGetTensorImpl()->_set_neg(true);
  return t;
}

void execute(std::vector<Node>& nodes, const Keys& keys, const Plan& plan,
             const std::vector<char>& alive_keys, bool blocking) {
  // A graph is enqueued whole: a Ctrl-C during one of its waits for memory is taken at the next
  // wait after it, never halfway through (which would leave pending tensors without producers).
  const runtime::NoInterrupt whole;
  // The host waits for a blocking graph next: its small work runs here on an idle stream, with
  // no hand-off to the worker, and its parallel work goes to the worker. Any other graph's work
  // all goes to the worker (Stream.h).
  std::optional<runtime::HostWaitsNext> here;
  std::optional<runtime::WorkerOnly> on_the_worker;
  if (blocking) {
    here.emplace();
  } else {
    on_the_worker.emplace();
  }
  Executor(nodes, keys, plan, alive_keys, blocking).run();
  if (here) here->run_kept_work();  // (the host waits next: it runs what it kept, here)
}

}  // namespace torchtpu::defer
