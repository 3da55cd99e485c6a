#pragma once
// What a host language's bindings control beyond the public C++ API (torchtpu/torchtpu.h): the
// hooks of an interpreter, devices, eager-mode switches, DeferAndFuse's controls, MXU precision,
// the cost model's clock, metrics by category and the fallback mode. The Python bindings
// (python/Module.cpp) reach the library only through these two headers, so the layers below the
// api layer stay free to change (docs/design.md, "Layers").
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace torchtpu::defer {
struct Program;
}
namespace c10d {
class Backend;
}

namespace torchtpu::api {

// Hooks an interpreter installs (runtime/HostWait.h, defer/Defer.h).
struct HostHooks {
  std::string (*location)() = nullptr;  // the user's source line, for recorded ops
  void (*without_gil)(void (*fn)(void*), void* context) = nullptr;  // rule 1 of host waits
  void (*check_interrupt)() = nullptr;  // rule 2: raises a pending interrupt
  bool (*holds_gil)() = nullptr;
  bool (*stops_program)(std::exception_ptr) = nullptr;  // a KeyboardInterrupt, a SystemExit
};
void install_host_hooks(const HostHooks& hooks);

// Devices.
const at::Generator& default_generator(int device);
int current_device();
void set_device(int device);           // (negative: ignored)
int exchange_device(int device);       // the previous device (negative: ignored, returns -1)
void empty_cache(int device);

// Waits: every recorded op runs and every device's queues drain.
void sync_all();
// An op torchtpu has no kernel for (a C++ extension's composite op, called through torch.ops)
// may read or write the memory of its tpu tensors through data_ptr() between its own ops: while
// one is alive, the work recorded or queued before it has run (every pending tensor has memory
// and values) and the ops the thread issues run synchronously (debug eager), so what it reads
// is computed and what it allocates has memory. Counted as the materialization "custom op
// without a tpu kernel". Nests. (docs/eager-modes.md, "C++ extensions".)
class ForeignOp {
 public:
  ForeignOp();
  ~ForeignOp();
  ForeignOp(const ForeignOp&) = delete;
  ForeignOp& operator=(const ForeignOp&) = delete;

 private:
  std::unique_ptr<struct ForeignOpState> state_;
};
bool interrupted_once();
size_t cancel_queued_work();           // after an interrupt, at exit: drops queued work

// NaN / Inf checks of results (TORCHTPU_CHECK_NANS).
void set_check_nans(bool on);
bool check_nans();
// Work enqueued on an idle stream runs on the enqueuing thread (runtime/Stream.h).
void set_inline_work(int level);
int inline_work();

// DeferAndFuse (docs/eager-modes.md).
int64_t pending_ops();
// Whether the tensor's storage is pending (fused eager recorded the work that writes it, which
// has not run, and it has no memory yet).
bool is_pending(const at::Tensor& t);
std::map<std::string, std::map<std::string, int64_t>> materializations();
void reset_materializations();
void set_dump_path(const std::string& path);
std::string cached_plans_text();
void clear_plan_cache();
// The plan cache's entries: (reads, planning nanoseconds, last read in nanoseconds since the
// Unix epoch), most recently used first; and its policy (defer/Defer.h).
std::vector<std::tuple<int64_t, int64_t, int64_t>> plan_cache_entries();
void set_plan_cache_policy(std::optional<bool> allow, std::optional<bool> only,
                           std::optional<bool> dump_on_miss);
bool plan_cache_dumps_on_miss();
void set_record_locations(bool on);
bool record_locations();
void set_max_pending_ops(int64_t n);
// Loop detection in fused eager (defer/Defer.h): "off", "safe" or "aggressive"; any other value
// is off, as TorchTPU reads TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS.
void set_repeated_ops(const std::string& mode);
std::string repeated_ops();
// The pending graph that tensors depend on, described without running or changing it (for
// torch_tpu._internal.sync.computation_graphviz / computation_mlir). The fields are those of
// defer/Inspect.h, which says what they mean: nodes in program order, each write of a storage a
// new value, operands as views of values (or CPU constants), inputs as values no node wrote.
struct GraphTensor {
  std::string argument;
  int64_t value = -1, writes = -1;
  std::string constant;
  bool wrapped_number = false;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  std::string dtype;
  bool read = false, written = false, defined = false;
};
struct GraphValue {
  int64_t node = -1, storage = 0, updates = -1;
  bool input_pending = false;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  std::string dtype;
};
struct GraphNode {
  int64_t index = 0;
  std::string name, overload;
  std::vector<GraphTensor> operands, results;
  std::vector<std::tuple<std::string, std::string, std::string>> arguments;  // name, type, value
  std::string precision, location;
};
struct PendingGraph {
  std::vector<GraphNode> nodes;
  std::vector<GraphValue> values;
  std::vector<GraphTensor> outputs, labelled;
  int64_t pending_ops = 0;
};
PendingGraph describe_pending(const std::vector<at::Tensor>& tensors,
                              const std::vector<at::Tensor>& labelled);

// Compiled programs: the graphs of torch.compile(backend="tpu") captured once and replayed as one
// program (defer/Program.h, docs/compiled-mode.md). Tensors: undefined where the graph's input
// or output is not a tensor.
using Program = std::shared_ptr<defer::Program>;
bool begin_program(const std::vector<at::Tensor>& inputs);
struct CapturedProgram {
  Program program;                  // null when the capture failed
  std::vector<at::Tensor> outputs;  // the program's outputs
  std::string failure;
};
// `bucket`, `charged_as`: buckets of dynamic sizes (defer/Program.h).
CapturedProgram end_program(const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& outputs, const std::string& name,
                            bool bucket = false, const Program& charged_as = nullptr);
void abort_program();
bool capturing_program();  // this thread captures a program now
std::optional<std::vector<at::Tensor>> run_program(const Program& program,
                                                   const std::vector<at::Tensor>& inputs);
struct ProgramStats {
  std::string name;
  int64_t ops = 0, regions = 0, fused_regions = 0, ops_eliminated = 0, runs = 0;
  double estimated_seconds = 0, own_seconds = 0;
  std::string charged_as;
  double vmem_kept_bytes = 0;
  int64_t vmem_peak_bytes = 0;
  std::string ir;
};
ProgramStats program_stats(const Program& program);
// Launches made on this thread between begin_uncharged() and end_uncharged() (nested in pairs)
// are not charged to the cost model's ledger; end_uncharged() returns their estimated seconds.
// (A bucket of dynamic sizes is priced this way: docs/compiled-mode.md, "Buckets".)
// (Fused eager's recorded ops are flushed first, so they are not charged either.)
void begin_uncharged();
double end_uncharged();
// Charges one run of `program` (its last estimate, as one launch) without running it: a call of
// its bucket run op by op, uncharged (docs/compiled-mode.md, "Buckets").
void charge_program(const Program& program);

// float32 matmul precision on the MXU, by torch's names ("highest", "high", "medium").
void set_precision_override(const std::optional<std::string>& name);
std::optional<std::string> precision_override();
std::string current_precision();
// libtpu's --xla_jf_conv_full_precision (sim::set_full_precision).
void set_full_precision(bool on);
bool full_precision_forced();
// The precision outside scopes (sim::default_precision), by torch's names.
void set_default_precision(const std::string& name);
std::string default_precision();
// What "highest" computes (sim::highest_algorithm): "bf16_6x" (the chip's six passes) or
// "float32" (the host's float32 GEMM). Setting it first runs every recorded and queued op
// (sync_all), so work issued before keeps the algorithm it was issued under.
void set_highest_algorithm(const std::string& name);
std::string highest_algorithm();

// Memory history (torch.tpu.memory._record_memory_history, docs/insight.md): every allocation
// and free of every device, with the stack (a torch::CapturedTraceback: Python frames, gathered
// on threads that can) of each; the live and cached blocks with the stack of their allocation.
void record_memory_history(bool on, size_t max_entries);
struct MemoryRecord {
  int device = 0;
  bool alloc = true;       // events: an allocation, else a free; blocks: allocated, else cached
  bool dry = false;        // blocks: a dry run's
  uint64_t address = 0;
  size_t size = 0, requested = 0;
  int64_t time_us = 0;     // events
  std::shared_ptr<c10::GatheredContext> context;
};
struct MemoryState {
  std::vector<MemoryRecord> blocks, events;
};
MemoryState memory_state();

// The pinned host memory allocator's statistics (torch.tpu.host_memory_stats(), in the keys of
// torch.cuda.host_memory_stats()), and its resets.
std::map<std::string, int64_t> host_memory_stats();
void reset_host_memory_stats(bool peak);

// A CPU tensor over the memory of a TPU tensor (same sizes, strides, offset; device memory is host
// memory), keeping its storage alive, after the work queued on its device has run (and, in fused
// eager, after its storage has memory): what the collective backend hands to Gloo
// (torchtpu/distributed.py). Raises for a dry run's tensor.
at::Tensor host_view(const at::Tensor& tensor);
// Charges a collective to the cost model: `kind` ("all_reduce", "all_gather", ...), the bytes of
// the whole (gathered) array, the number of chips in the group (sim/CostModel.cpp, "ICI"), on
// the ICI of the current device and stream; returns its id for collective_waited(), which makes
// the current stream wait for it (sim/Ledger.h, "Overlap of communication with compute").
uint64_t charge_collective(const std::string& kind, double bytes, int64_t chips);
void collective_waited(uint64_t id);
// The collectives recorded inside fused eager's graphs (aten/Collectives.h): a process group's
// Gloo backend under the id its recorded ops take (held weakly); the cross-rank check of the
// tensors' shapes and dtypes (a ValueError on every rank); Work.wait() of the group's
// `sequence`-th recorded collective; and what the group does before a collective it runs on the
// host: the recorded work runs and the host waits for every device (recorded collectives call
// Gloo first, in program order).
void register_collective_group(int64_t id, const c10::intrusive_ptr<c10d::Backend>& backend,
                               bool check);
void check_same_across_ranks(int64_t group, const std::string& kind,
                             const std::vector<at::Tensor>& tensors);
void recorded_collective_waited(int64_t group, uint64_t sequence);
void run_recorded_collectives();

// Charges one launch of a user's kernel (a Pallas or JAX kernel run through torchtpu.pallas,
// docs/custom-kernels.md) from what the caller counted: its matmuls (batch, M, K, N, passes,
// operand bytes, rate: 0 bf16, 1 int8, 2 fp8), VPU units x vregs and HBM bytes, priced by the
// cost model of the current chip and recorded in the ledger under `op` (so estimate(chip=...)
// re-prices it). Returns the estimate's terms in seconds (mxu, vpu, hbm, launch, total).
struct KernelMatmul {
  int64_t batch, M, K, N;
  int32_t passes, element_bytes, rate;
};
std::map<std::string, double> charge_kernel(const std::string& op,
                                            const std::vector<KernelMatmul>& matmuls,
                                            double vpu_units, double hbm_bytes);
// Swaps the device memory of two tpu tensors' storages of the same size (their values go with
// it): a kernel's output written into a donated input's memory takes that memory, and the
// donated input the output's (docs/custom-kernels.md, "Donation").
void swap_memory(const at::Tensor& a, const at::Tensor& b);

// Dry runs (docs/insight.md): tensors without values, ops charged without running.
void set_dry_run(bool on);
bool dry_run();

// The cost model of the current chip.
double clock_hz();
double launch_seconds();

// The launches since the last reset of the metrics priced for a chip (docs/insight.md): the
// simulated one (chip empty) or any known one, after the fact. launch_us < 0: that chip's
// launch cost (TORCHTPU_LAUNCH_US or the default).
struct PricedRun {
  std::string chip;
  std::string topology;       // the slice's topology ("4x4"; empty: none set)
  double launch_seconds = 0;  // the launch cost used
  double seconds = 0, busy_s = 0, mxu_s = 0, vpu_s = 0, hbm_s = 0, ici_s = 0;
  double flops = 0, mxu_flops = 0, hbm_bytes = 0;
  double peak_s = 0;  // the matmuls' time at the peak of the dtype each ran in
  int64_t launches = 0, bound_mxu = 0, bound_vpu = 0, bound_hbm = 0, bound_ici = 0;
  int64_t priced_as_native = 0;
  std::map<std::string, double> op_seconds;         // per op, launch costs included
  std::map<std::string, int64_t> op_launches;
  std::map<std::string, double> op_flops, op_hbm_bytes, op_mxu_s;
  std::map<std::string, int64_t> priced_as_native_ops;
  std::map<int, double> device_seconds;  // per device (devices run in parallel)
  std::map<int, double> hidden_ici_seconds;  // per device: ICI time hidden behind compute
};
PricedRun price_run(const std::string& chip, double launch_us);


// Metrics by category: "op", "fallback", "host_time" or "counter".
std::map<std::string, int64_t> metrics(const std::string& category);
// Adds to a counter of the "counter" category (events counted above the C++ layers: compiled
// graphs, ...).
void count(const std::string& name, int64_t delta);

// The CPU fallback's mode: "warn", "error" or "silent". false: not a mode name.
bool set_fallback_mode(const std::string& mode);
std::string fallback_mode();

// Backend tensor metadata (api/BackendMeta.cpp): gives `dst` the c10::BackendMeta of `src` (what
// torch._utils.set_tensor_metadata set on it); nothing when `src` has none.
void copy_backend_meta(const at::Tensor& src, const at::Tensor& dst);

}  // namespace torchtpu::api
