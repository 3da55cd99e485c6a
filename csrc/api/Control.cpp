// The bindings' controls (api/Control.h) over the layers below.
#include "api/Control.h"

#include "aten/Collectives.h"
#include "aten/DryRun.h"
#include "aten/Fallback.h"
#include "defer/Defer.h"
#include "defer/Inspect.h"
#include "defer/Program.h"
#include "runtime/Allocator.h"
#include "runtime/DeferredWork.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"
#include "sim/CostModel.h"
#include "sim/Ledger.h"
#include "sim/Mxu.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/StringUtil.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include "pytorch/Internals.h"

namespace torchtpu::api {

void install_host_hooks(const HostHooks& hooks) {
  defer::set_location_provider(hooks.location);
  runtime::set_without_gil_hook(hooks.without_gil);
  runtime::set_interrupt_hook(hooks.check_interrupt);
  runtime::set_gil_held_hook(hooks.holds_gil);
  runtime::set_stops_program_hook(hooks.stops_program);
}

const at::Generator& default_generator(int device) {
  return runtime::default_generator(static_cast<c10::DeviceIndex>(device));
}
int current_device() { return runtime::current_device(); }
void set_device(int device) {
  if (device >= 0) runtime::set_device(static_cast<c10::DeviceIndex>(device));
}
int exchange_device(int device) {
  if (device < 0) return -1;
  return runtime::exchange_device(static_cast<c10::DeviceIndex>(device));
}
void empty_cache(int device) {
  runtime::allocator().empty_cache(static_cast<c10::DeviceIndex>(device));
}

void sync_all() {
  runtime::materialize_deferred_work(runtime::FlushReason::explicit_sync);
  for (c10::DeviceIndex i = 0; i < runtime::device_count(); ++i) runtime::synchronize_device(i);
}
struct ForeignOpState {
  runtime::SynchronousScope synchronous;
};

ForeignOp::ForeignOp() {
  runtime::materialize_deferred_work(runtime::FlushReason::foreign_op);
  for (c10::DeviceIndex i = 0; i < runtime::device_count(); ++i) runtime::synchronize_device(i);
  state_ = std::make_unique<ForeignOpState>();
}
ForeignOp::~ForeignOp() = default;

bool interrupted_once() { return runtime::interrupted_once(); }
size_t cancel_queued_work() { return runtime::cancel_all_queued_work(); }

void set_check_nans(bool on) { runtime::set_check_nans(on); }
bool check_nans() { return runtime::check_nans(); }
void set_inline_work(int level) { runtime::set_inline_work(level); }
int inline_work() { return runtime::inline_work(); }

int64_t pending_ops() { return defer::pending_ops(); }
bool is_pending(const at::Tensor& t) { return t.has_storage() && defer::is_pending(t.storage()); }
std::map<std::string, std::map<std::string, int64_t>> materializations() {
  return defer::materializations();
}
void reset_materializations() { defer::reset_materializations(); }
void set_dump_path(const std::string& path) { defer::set_dump_path(path); }
std::string cached_plans_text() { return defer::cached_plans_text(); }
void clear_plan_cache() { defer::clear_cache(); }

std::vector<std::tuple<int64_t, int64_t, int64_t>> plan_cache_entries() {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out;
  for (const auto& e : defer::plan_cache_entries()) {
    out.emplace_back(e.reads, e.planning_ns,
                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                         e.last_read.time_since_epoch())
                         .count());
  }
  return out;
}
void set_plan_cache_policy(std::optional<bool> allow, std::optional<bool> only,
                           std::optional<bool> dump_on_miss) {
  defer::set_plan_cache_policy(allow, only, dump_on_miss);
}
bool plan_cache_dumps_on_miss() { return defer::plan_cache_dumps_on_miss(); }
void set_record_locations(bool on) { defer::set_record_locations(on); }
bool record_locations() { return defer::record_locations(); }
void set_max_pending_ops(int64_t n) { defer::set_max_pending_ops(n); }
void set_repeated_ops(const std::string& mode) {
  defer::set_repeated_ops(mode == "safe"         ? defer::RepeatedOps::safe
                          : mode == "aggressive" ? defer::RepeatedOps::aggressive
                                                 : defer::RepeatedOps::off);
}
std::string repeated_ops() {
  switch (defer::repeated_ops()) {
    case defer::RepeatedOps::safe: return "safe";
    case defer::RepeatedOps::aggressive: return "aggressive";
    default: return "off";
  }
}

namespace {
GraphTensor from_defer(const defer::GraphTensor& t) {
  return {t.argument, t.value,   t.writes, t.constant, t.wrapped_number, t.sizes,
          t.strides,  t.offset,  t.dtype,  t.read,     t.written,        t.defined};
}
std::vector<GraphTensor> from_defer(const std::vector<defer::GraphTensor>& ts) {
  std::vector<GraphTensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(from_defer(t));
  return out;
}
}  // namespace

PendingGraph describe_pending(const std::vector<at::Tensor>& tensors,
                              const std::vector<at::Tensor>& labelled) {
  defer::PendingGraphView view = defer::describe_pending(tensors, labelled);
  PendingGraph g;
  g.pending_ops = view.pending_ops;
  for (const auto& n : view.nodes) {
    g.nodes.push_back({n.index, n.name, n.overload, from_defer(n.operands), from_defer(n.results),
                       n.arguments, n.precision, n.location});
  }
  for (const auto& v : view.values) {
    g.values.push_back(
        {v.node, v.storage, v.updates, v.input_pending, v.sizes, v.strides, v.offset, v.dtype});
  }
  g.outputs = from_defer(view.outputs);
  g.labelled = from_defer(view.labelled);
  return g;
}

void set_precision_override(const std::optional<std::string>& name) {
  sim::set_precision_override(name ? std::optional<sim::Precision>(sim::precision_from_name(*name))
                                   : std::nullopt);
}
std::optional<std::string> precision_override() {
  const auto p = sim::precision_override();
  if (!p) return std::nullopt;
  return std::string(sim::name(*p));
}
std::string current_precision() { return sim::name(sim::current_precision()); }
void set_full_precision(bool on) { sim::set_full_precision(on); }
bool full_precision_forced() { return sim::full_precision_forced(); }
void set_default_precision(const std::string& name) {
  sim::set_default_precision(sim::precision_from_name(name));
}
std::string default_precision() { return sim::name(sim::default_precision()); }
void set_highest_algorithm(const std::string& name) {
  const sim::HighestAlgorithm algorithm = sim::highest_algorithm_from_name(name);
  if (algorithm == sim::highest_algorithm()) return;
  sync_all();
  sim::set_highest_algorithm(algorithm);
}
std::string highest_algorithm() { return sim::name(sim::highest_algorithm()); }

namespace {
std::shared_ptr<c10::GatheredContext> gather_python_stack() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}
}  // namespace

void record_memory_history(bool on, size_t max_entries) {
  runtime::record_memory_history(on ? &gather_python_stack : nullptr, max_entries);
}

MemoryState memory_state() {
  runtime::MemorySnapshot snap = runtime::memory_snapshot();
  MemoryState out;
  for (size_t d = 0; d < snap.blocks.size(); ++d) {
    for (auto& b : snap.blocks[d]) {
      out.blocks.push_back({int(d), b.allocated, b.dry, b.address, b.size, b.requested, 0,
                            std::move(b.context)});
    }
  }
  for (size_t d = 0; d < snap.events.size(); ++d) {
    for (auto& e : snap.events[d]) {
      out.events.push_back({int(d), e.alloc, false, e.address, e.size, e.size, e.time_us,
                            std::move(e.context)});
    }
  }
  return out;
}

at::Tensor host_view(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_privateuseone(), "host_view: expected a tpu tensor, got ",
              t.device());
  const c10::DeviceGuard guard(t.device());
  runtime::materialize_deferred_work(runtime::FlushReason::collective);
  runtime::synchronize_device(t.device().index());
  aten::check_has_values(t, "A collective");
  if (t.numel() == 0) return at::empty(t.sizes(), t.options().device(at::kCPU));
  return at::from_blob(
      t.data_ptr(), t.sizes(), t.strides(), [keep = t.storage()](void*) mutable { keep = {}; },
      t.options().device(at::kCPU));
}

uint64_t charge_collective(const std::string& kind, double bytes, int64_t chips) {
  return aten::charge_collective(kind, bytes, chips);
}

void collective_waited(uint64_t id) { sim::collective_waited(id); }

void register_collective_group(int64_t id, const c10::intrusive_ptr<c10d::Backend>& backend,
                               bool check) {
  aten::register_collective_group(id, backend, check);
}

void check_same_across_ranks(int64_t group, const std::string& kind,
                             const std::vector<at::Tensor>& tensors) {
  aten::check_same(group, kind, tensors);
}

void recorded_collective_waited(int64_t group, uint64_t sequence) {
  aten::recorded_collective_waited(group, sequence);
}

void run_recorded_collectives() {
  runtime::flush_deferred_work(runtime::FlushReason::collective);
  for (c10::DeviceIndex i = 0; i < runtime::device_count(); ++i) runtime::synchronize_device(i);
}

std::map<std::string, double> charge_kernel(const std::string& op,
                                            const std::vector<KernelMatmul>& matmuls,
                                            double vpu_units, double hbm_bytes) {
  sim::Work work;
  for (const KernelMatmul& m : matmuls) {
    TORCH_CHECK(m.rate >= 0 && m.rate <= 2, "charge_kernel: rate must be 0, 1 or 2");
    if (m.batch <= 0 || m.M <= 0 || m.K <= 0 || m.N <= 0) continue;
    sim::MatmulWork mm;
    mm.batch = m.batch;
    mm.M = m.M;
    mm.K = m.K;
    mm.N = m.N;
    mm.passes = std::max<int32_t>(m.passes, 1);
    mm.element_bytes = m.element_bytes;
    mm.rate = static_cast<sim::MxuRate>(m.rate);
    work.matmuls.push_back(mm);
  }
  work.vpu_units = std::max(vpu_units, 0.0);
  work.hbm_bytes = std::max(hbm_bytes, 0.0);
  work.launches = 1;
  const sim::Estimate e = sim::cost_model().price(work);
  sim::record(op, e);
  runtime::metrics::count("custom_kernels.launches");
  return {{"mxu_s", e.mxu_s}, {"vpu_s", e.vpu_s}, {"hbm_s", e.hbm_s},
          {"launch_s", e.launch_s}, {"seconds", e.seconds()}, {"flops", e.flops},
          {"mxu_flops", e.mxu_flops}, {"hbm_bytes", e.hbm_bytes}};
}

void swap_memory(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.device().is_privateuseone() && a.device() == b.device(),
              "swap_memory: expected two tensors on the same tpu device, got ", a.device(),
              " and ", b.device());
  c10::StorageImpl* sa = a.storage().unsafeGetStorageImpl();
  c10::StorageImpl* sb = b.storage().unsafeGetStorageImpl();
  TORCH_CHECK(sa->nbytes() == sb->nbytes(), "swap_memory: storages of ", sa->nbytes(), " and ",
              sb->nbytes(), " bytes");
  if (sa == sb) return;
  c10::DataPtr pb = sb->set_data_ptr(c10::DataPtr(nullptr, b.device()));
  c10::DataPtr pa = sa->set_data_ptr(std::move(pb));
  sb->set_data_ptr(std::move(pa));
}

std::map<std::string, int64_t> host_memory_stats() {
  const at::HostStats stats = at::getHostAllocator(at::kPrivateUse1)->get_stats();
  std::map<std::string, int64_t> out;
  auto stat = [&](const std::string& name, const c10::CachingAllocator::Stat& s) {
    out[name + ".current"] = s.current;
    out[name + ".peak"] = s.peak;
    out[name + ".allocated"] = s.allocated;
    out[name + ".freed"] = s.freed;
  };
  auto duration = [&](const std::string& name, const c10::CachingAllocator::DurationStat& s) {
    out[name + ".total"] = s.total;
    out[name + ".max"] = s.max;
    out[name + ".min"] = s.min;
    out[name + ".count"] = s.count;
    out[name + ".avg"] = s.count > 0 ? s.total / s.count : 0;
  };
  stat("active_requests", stats.active_requests);
  stat("active_bytes", stats.active_bytes);
  stat("allocations", stats.allocations);
  stat("allocated_bytes", stats.allocated_bytes);
  duration("host_alloc_time", stats.host_alloc_time);
  duration("host_free_time", stats.host_free_time);
  out["num_host_alloc"] = stats.num_host_alloc;
  out["num_host_free"] = stats.num_host_free;
  return out;
}

void reset_host_memory_stats(bool peak) {
  at::HostAllocator* a = at::getHostAllocator(at::kPrivateUse1);
  peak ? a->reset_peak_stats() : a->reset_accumulated_stats();
}

void set_dry_run(bool on) {
  if (on && !runtime::dry_run()) {
    // What fused eager recorded runs first (with values); a dry run records nothing.
    runtime::materialize_deferred_work(runtime::FlushReason::mode_switch);
  }
  runtime::set_dry_run(on);
}
bool dry_run() { return runtime::dry_run(); }

double clock_hz() { return sim::cost_model().clock_hz(); }
double launch_seconds() { return sim::cost_model().launch_seconds(); }

PricedRun price_run(const std::string& chip_name, double launch_us) {
  const runtime::ChipSpec& chip =
      chip_name.empty() ? runtime::current_chip() : runtime::chip_by_name(chip_name);
  const sim::LedgerTotals totals = sim::ledger_totals(chip);
  PricedRun out;
  out.chip = chip.name;
  const sim::CostOptions options = sim::CostOptions::from_environment(chip.name);
  out.topology = c10::Join("x", options.topology);
  out.launch_seconds = launch_us >= 0 ? launch_us * 1e-6 : options.launch_seconds;
  const sim::Priced& a = totals.all;
  out.busy_s = a.busy_s;
  out.seconds = a.busy_s + double(a.launches) * out.launch_seconds;
  out.mxu_s = a.mxu_s;
  out.vpu_s = a.vpu_s;
  out.hbm_s = a.hbm_s;
  out.ici_s = a.ici_s;
  out.bound_ici = a.bound_ici;
  out.flops = a.flops;
  out.peak_s = a.peak_s;
  out.mxu_flops = a.mxu_flops;
  out.hbm_bytes = a.hbm_bytes;
  out.launches = a.launches;
  out.bound_mxu = a.bound_mxu;
  out.bound_vpu = a.bound_vpu;
  out.bound_hbm = a.bound_hbm;
  out.priced_as_native = a.priced_as_native;
  for (const auto& [op, p] : totals.per_op) {
    out.op_seconds[op] = p.busy_s + double(p.launches) * out.launch_seconds;
    out.op_launches[op] = p.launches;
    out.op_flops[op] = p.flops;
    out.op_hbm_bytes[op] = p.hbm_bytes;
    out.op_mxu_s[op] = p.mxu_s;
  }
  out.priced_as_native_ops = totals.priced_as_native;
  for (const auto& [device, p] : totals.per_device) {
    out.device_seconds[device] = p.busy_s + double(p.launches) * out.launch_seconds;
  }
  out.hidden_ici_seconds = sim::hidden_ici_seconds(chip);
  return out;
}

std::map<std::string, int64_t> metrics(const std::string& category) {
  using runtime::metrics::Category;
  static const std::map<std::string, Category> categories = {
      {"op", Category::op},
      {"fallback", Category::fallback},
      {"host_time", Category::host_time},
      {"counter", Category::counter}};
  const auto it = categories.find(category);
  TORCH_CHECK(it != categories.end(), "unknown metrics category '", category,
              "' (op, fallback, host_time or counter)");
  return runtime::metrics::snapshot(it->second);
}

void count(const std::string& name, int64_t delta) { runtime::metrics::count(name, delta); }

bool set_fallback_mode(const std::string& mode) {
  if (mode == "warn") {
    aten::set_fallback_mode(aten::FallbackMode::warn);
  } else if (mode == "error") {
    aten::set_fallback_mode(aten::FallbackMode::error);
  } else if (mode == "silent") {
    aten::set_fallback_mode(aten::FallbackMode::silent);
  } else {
    return false;
  }
  return true;
}
std::string fallback_mode() {
  switch (aten::fallback_mode()) {
    case aten::FallbackMode::warn: return "warn";
    case aten::FallbackMode::error: return "error";
    case aten::FallbackMode::silent: return "silent";
  }
  return "warn";
}

bool begin_program(const std::vector<at::Tensor>& inputs) {
  return defer::begin_program(inputs);
}

CapturedProgram end_program(const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& outputs, const std::string& name,
                            bool bucket, const Program& charged_as) {
  defer::Captured c = defer::end_program(inputs, outputs, name, bucket, charged_as.get());
  return CapturedProgram{std::move(c.program), std::move(c.outputs), std::move(c.failure)};
}

void abort_program() { defer::abort_program(); }
bool capturing_program() { return defer::capturing_program(); }

std::optional<std::vector<at::Tensor>> run_program(const Program& program,
                                                   const std::vector<at::Tensor>& inputs) {
  return defer::run_program(*program, inputs);
}

ProgramStats program_stats(const Program& program) {
  defer::ProgramInfo i = defer::program_info(*program);
  return ProgramStats{i.name, i.ops, i.regions, i.fused_regions, i.ops_eliminated, i.runs,
                      i.estimated_seconds, i.own_seconds, i.charged_as, i.vmem_kept_bytes,
                      i.vmem_peak_bytes, i.ir};
}

void charge_program(const Program& program) { defer::charge_run(*program); }

namespace {
thread_local std::vector<std::unique_ptr<sim::RecordCollector>> t_uncharged;
}  // namespace

void begin_uncharged() { t_uncharged.push_back(std::make_unique<sim::RecordCollector>()); }

double end_uncharged() {
  TORCH_CHECK(!t_uncharged.empty(), "end_uncharged() without begin_uncharged()");
  defer::flush(runtime::FlushReason::compiled_graph);  // (fused eager's recorded ops too)
  const double seconds = t_uncharged.back()->total.seconds();
  t_uncharged.pop_back();
  return seconds;
}

}  // namespace torchtpu::api
