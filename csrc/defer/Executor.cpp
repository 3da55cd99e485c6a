// Execution of a planned graph (Plan.h, docs/design.md 3.1): each region is enqueued on the
// stream its ops were recorded on; a fused element-wise region runs as a blocked loop over its
// output in which every block goes through the whole chain while it is in cache (the host
// analogue of VMEM tiles), in parallel over blocks; each op of the chain runs PyTorch's own CPU
// kernel on the block (or the register-level loop, FusedLoop.h, for exact float32 ops), so fused
// results are those of the unfused kernels. Intermediates that die inside a fused region live
// only in per-thread block buffers and never take HBM. Every other op runs through its kernel.
#include "aten/Entry.h"
#include "aten/Launch.h"
#include "defer/FusedLoop.h"
#include "defer/Plan.h"
#include "runtime/Allocator.h"
#include "runtime/Env.h"
#include "runtime/Errors.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/OpenMP.h"
#include "runtime/Stream.h"
#include "sim/CostModel.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/ParallelGuard.h>
#include <c10/util/flat_hash_map.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace torchtpu::defer {
namespace {


// Elements per block of a fused region (the block of every operand stays in L2);
// TORCHTPU_FUSED_BLOCK sets it for every region (for experiments).
const char* const kBlockSetting = std::getenv("TORCHTPU_FUSED_BLOCK");
const int64_t kBlockElements =
    kBlockSetting != nullptr ? std::max<int64_t>(1, std::atoll(kBlockSetting)) : int64_t(32768);

// S-mapped geometry of an operand: its strides for each dimension of the iteration shape


at::Tensor host_view(const c10::Storage& storage, c10::ScalarType dtype, int64_t offset,
                     c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
      c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return t;
}

c10::Storage host_storage_over(const c10::Storage& device_storage) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), device_storage.nbytes(),
      c10::DataPtr(const_cast<void*>(device_storage.data()), c10::Device(c10::kCPU)), nullptr,
      /*resizable=*/false));
}


std::string where(const Node& n) {
  return n.location.empty() ? std::string() : " (recorded at " + n.location + ")";
}

// The one prefix of an error raised by a recorded op when its graph runs, whether the op runs
// through its kernel or inside a fused region.
std::string error_context(const std::string& name, const std::string& location) {
  return name + (location.empty() ? std::string() : " (recorded at " + location + ")") +
         ", run from a recorded graph (fused eager, or a compiled program): ";
}

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

bool loop_available() {
#if defined(__x86_64__) && defined(TORCHTPU_FUSED_LOOP)
  // TORCHTPU_FUSED_LOOP=0 turns it off (every op then runs its ATen kernel per block).
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          runtime::env::get("TORCHTPU_FUSED_LOOP").value_or("1") != "0";
  return yes;
#else
  return false;
#endif
}

// A float32 tensor operand the loop can address as contiguous memory in every block.
bool loop_tensor(const Source& s, c10::IntArrayRef shape) {
  if (s.g.dtype != c10::kFloat) return false;
  if (s.kind == Source::block) return true;
  if (s.kind != Source::mapped || s.g.whole) return false;
  int64_t expected = 1;
  for (int64_t j = static_cast<int64_t>(shape.size()) - 1; j >= 0; --j) {
    if (shape[j] != 1 && s.g.smap[j] != expected) return false;
    expected *= shape[j];
  }
  return true;
}

// A 0-dim operand passed whole, of a real dtype scalar_value() reads.
bool loop_scalar(const Source& s) {
  if (s.kind != Source::whole || !s.g.smap.empty()) return false;
  switch (s.g.dtype) {
    case c10::kFloat: case c10::kDouble: case c10::kHalf: case c10::kBFloat16:
    case c10::kByte: case c10::kChar: case c10::kShort: case c10::kInt: case c10::kLong:
      return true;
    default:
      return false;
  }
}

// The value of a 0-dim host tensor (a CPU scalar, or a 0-dim operand over device memory, which
// only holds its value when the region runs), as the loop takes it.
float scalar_value(const at::Tensor& t) {
  float v = 0;
  AT_DISPATCH_ALL_TYPES_AND2(c10::kHalf, c10::kBFloat16, t.scalar_type(), "scalar_value", [&] {
    v = static_cast<float>(*t.const_data_ptr<scalar_t>());
  });
  return v;
}

// A Scalar argument as the float ATen's kernels convert it to, when that conversion is exact
// or a plain rounding of a finite double (an integer beyond 2^24, a complex number or a double
// beyond float's range is left to the kernel, which may raise).
std::optional<float> loop_float_argument(const c10::IValue& v) {
  if (v.isDouble()) {
    const double d = v.toDouble();
    if (std::isfinite(d) && std::fabs(d) <= std::numeric_limits<float>::max()) {
      return static_cast<float>(d);
    }
    return std::nullopt;
  }
  if (v.isInt() && std::llabs(v.toInt()) <= (int64_t(1) << 24)) return static_cast<float>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.f : 0.f;
  return std::nullopt;
}

// The loop instruction of an op run with `args`, when it has one: (op, a, b, out) over operand
// indices. `not_in_buffer`: per block slot, whether it holds a kernel's new result.
std::optional<loop::Instr> loop_instruction(const FusedOp& f, const torch::jit::Stack& args,
                                            c10::IntArrayRef shape,
                                            const std::vector<char>& not_in_buffer) {
  if (!loop_available() || f.copy || !f.results.empty()) return std::nullopt;
  auto tensor_ok = [&](const Source& s) {
    return loop_tensor(s, shape) && !(s.kind == Source::block && not_in_buffer[s.slot]);
  };
  auto alpha = [&](size_t i) {
    return args.size() > i && args[i].isScalar() ? args[i].toScalar().toDouble() : 1.0;
  };
  const auto& o = f.operands;
  // The ".out" overloads: operands are (inputs..., out). (By the op run, not the op recorded:
  // relu runs as clamp_min.out.)
  if (!f.out_overload) return std::nullopt;
  using Fn = aten::PointwiseFn;
  const Fn fn = f.fn;
  switch (fn) {
    case Fn::add:
    case Fn::sub: {
      if (o.size() != 3) return std::nullopt;
      const double a = alpha(2);
      if (a != 1.0 && a != -1.0) return std::nullopt;
      if (loop_scalar(o[0]) || !tensor_ok(o[0]) || !tensor_ok(o[2])) return std::nullopt;
      if (!tensor_ok(o[1]) && !loop_scalar(o[1])) return std::nullopt;
      const bool plus = (fn == Fn::add) == (a == 1.0);
      return loop::Instr{plus ? loop::Op::add : loop::Op::sub, 2, 0, 1};
    }
    case Fn::mul:
    case Fn::div:
    case Fn::maximum:
    case Fn::minimum: {
      if (o.size() != 3 || !tensor_ok(o[0]) || !tensor_ok(o[2])) return std::nullopt;
      const bool scalar_b = loop_scalar(o[1]);
      // (ATen divides by a host scalar through its reciprocal: not an exact division.)
      if (!(tensor_ok(o[1]) || (scalar_b && fn == Fn::mul))) return std::nullopt;
      const loop::Op op = fn == Fn::mul       ? loop::Op::mul
                          : fn == Fn::div     ? loop::Op::div
                          : fn == Fn::maximum ? loop::Op::maximum
                                              : loop::Op::minimum;
      return loop::Instr{op, 2, 0, 1};
    }
    case Fn::neg:
    case Fn::abs:
      if (o.size() != 2 || !tensor_ok(o[0]) || !tensor_ok(o[1])) return std::nullopt;
      return loop::Instr{fn == Fn::neg ? loop::Op::neg : loop::Op::abs, 1, 0, -1};
    case Fn::clamp_min: {  // clamp_min.out(self, Scalar min, out), and relu
      if (o.size() != 2 || args.size() != 3 || !args[1].isScalar()) return std::nullopt;
      const double m = args[1].toScalar().toDouble();
      if (!std::isfinite(m) || !tensor_ok(o[0]) || !tensor_ok(o[1])) return std::nullopt;
      return loop::Instr{loop::Op::clamp_min, 1, 0, 2};  // b = 2: the scalar entry (see run)
    }
    case Fn::lerp: {  // lerp.Scalar_out(self, end, Scalar weight, out)
      const std::optional<float> w =
          o.size() == 3 && args.size() == 4 ? loop_float_argument(args[2]) : std::nullopt;
      if (!w || !tensor_ok(o[0]) || !tensor_ok(o[1]) || !tensor_ok(o[2])) return std::nullopt;
      loop::Instr in{loop::Op::lerp, 2, 0, 1};
      in.s = *w;
      return in;
    }
    case Fn::addcmul:
    case Fn::addcdiv: {  // addcmul.out(self, tensor1, tensor2, Scalar value, out)
      const std::optional<float> v =
          o.size() == 4 && args.size() == 5 ? loop_float_argument(args[3]) : std::nullopt;
      if (!v) return std::nullopt;
      for (const Source& s : o) {
        if (!tensor_ok(s)) return std::nullopt;
      }
      loop::Instr in{fn == Fn::addcmul ? loop::Op::addcmul : loop::Op::addcdiv, 3, 0, 1};
      in.c = 2;
      in.s = *v;
      return in;
    }
    default:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

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

namespace {

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

// The helper threads of fused regions: one persistent pool of ATen's intra-op thread count minus
// one, started on first use and kept for the process (fused regions used to start fresh threads
// for every region). Each helper sets its OpenMP team to one thread: the kernels inside a block
// run serially. (A small pool of its own rather than c10::ThreadPool, whose lock lives in
// libc10, which is not instrumented: ThreadSanitizer must see every lock of this code.)
class BlockPool {
 public:
  explicit BlockPool(int helpers) {
    for (int i = 0; i < helpers; ++i) {
      std::thread([this] {
        if (omp_set_num_threads != nullptr) omp_set_num_threads(1);
        for (;;) {
          std::function<void()> task;
          {
            std::unique_lock<std::mutex> lock(mutex_);
            ready_.wait(lock, [&] { return !tasks_.empty(); });
            task = std::move(tasks_.front());
            tasks_.pop_front();
          }
          task();
        }
      }).detach();  // (the pool lives for the process, like the stream workers)
    }
  }
  void run(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
};

BlockPool& block_pool() {
  static auto* pool = new BlockPool(std::max(1, at::get_num_threads() - 1));  // (leaked)
  return *pool;
}

// Hands out the blocks of [0, blocks) one at a time, to whichever thread asks first; -1 when
// none is left (or after stop()).
struct BlockCounter {
  std::atomic<int64_t> next{0};
  int64_t blocks = 0;
  explicit BlockCounter(int64_t n) : blocks(n) {}
  int64_t operator()() {
    const int64_t b = next.fetch_add(1, std::memory_order_relaxed);
    return b < blocks ? b : -1;
  }
  void stop() { next.store(blocks, std::memory_order_relaxed); }
};

// Runs fn(next) on the calling thread and on up to ATen's intra-op thread count minus one other
// threads; each runs the blocks next() hands out (BlockCounter). The other threads are the
// calling thread's OpenMP team, where torch's OpenMP runtime is loaded: the team that runs
// ATen's and MKL's parallel loops, so the region does not compete for the cores with that
// team's threads, which spin for a while after each parallel loop (with threads of its own, a
// fused gelu_backward over [1024, 256] after a copy took 2.5-3x the strict kernel's time,
// docs/host-speed.md). Elsewhere, and under ThreadSanitizer (which does not see OpenMP's
// synchronization), the pool's helpers. (at::parallel_for is an inline OpenMP template that this
// library, built without OpenMP, would run serially.) The blocks are at most one ATen grain
// each, so the kernels inside run serially.
template <typename F>
void parallel_blocks(int64_t blocks, int64_t numel, const F& fn) {
  BlockCounter counter(blocks);
  auto next = [&counter] { return counter(); };
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), blocks);
  if (threads <= 1 || numel < (int64_t(1) << 16)) {
    fn(next);
    return;
  }
  std::mutex mutex;
  std::exception_ptr error;
  auto run = [&] {  // (nothing may leave an OpenMP region or a pool task by an exception)
    try {
      fn(next);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
      counter.stop();  // the others stop at their next block
    }
  };
#if !defined(__SANITIZE_THREAD__)
  if (GOMP_parallel != nullptr && omp_in_parallel != nullptr && !omp_in_parallel()) {
    GOMP_parallel([](void* data) { (*static_cast<decltype(run)*>(data))(); }, &run,
                  static_cast<unsigned>(threads), 0);
    if (error) std::rethrow_exception(error);
    return;
  }
#endif
  std::condition_variable done;
  int64_t pending = threads - 1;
  for (int64_t t = 1; t < threads; ++t) {
    block_pool().run([&] {
      run();
      std::lock_guard<std::mutex> lock(mutex);
      if (--pending == 0) done.notify_all();
    });
  }
  run();
  {
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
  }
  if (error) std::rethrow_exception(error);
}

// The block buffers of the thread running a fused region's blocks, kept for its next region
// (up to kKeptBufferBytes: allocating them was a fifth of a small region's run).
constexpr int64_t kKeptBufferBytes = int64_t(8) << 20;
thread_local std::vector<at::Tensor> t_block_buffers;

void FusedRegion::run() const {
  const Dims& shape = t->shape;
  const std::vector<FusedOp>& ops = t->ops;
  const int slots = t->slots;
  const int64_t dims = static_cast<int64_t>(shape.size());
  const int64_t numel = t->numel;
  if (numel == 0) return;
  // Blocks small enough to keep a block of every operand in L2 pay off where ops read what the
  // op before them wrote. A region with one element-wise op (a matmul's epilogue, the op before a
  // reduction) reads nothing back: each block costs its kernel's boxed call and TensorIterator
  // (5-9 us), which made a fused gelu_backward over [2048, 2048] 1.3x strict eager's single
  // kernel (docs/host-speed.md, "A cached region's run"). There, a few blocks per thread.
  const int64_t block_elements =
      ops.size() == 1 && kBlockSetting == nullptr
          ? std::max<int64_t>(kBlockElements, numel / (4 * at::get_num_threads()))
          : kBlockElements;
  // Blocking: dimensions after `d` whole, dimension `d` in chunks, dimensions before it one
  // index at a time.
  int64_t d = std::max<int64_t>(dims - 1, 0), inner = 1;
  while (d > 0 && inner * shape[d] <= block_elements) inner *= shape[d--];
  const int64_t len_d = dims == 0 ? 1 : shape[d];
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(len_d, block_elements / inner));
  const int64_t chunks = (len_d + chunk - 1) / chunk;
  int64_t outer = 1;
  for (int64_t j = 0; j < d; ++j) outer *= shape[j];
  const int64_t blocks = dims == 0 ? 1 : outer * chunks;
  const int64_t max_block = dims == 0 ? 1 : chunk * inner;

  parallel_blocks(blocks, numel, [&](const auto& next_block) {
    // Kernels run on one block each: no nested intra-op parallelism (it would oversubscribe).
    const c10::ParallelGuard serial(true);
    const runtime::SerialOpenMP serial_omp;
    // (Taken from the thread for the region's run: a kernel that runs a region inside a block
    // would find none and allocate its own.)
    std::vector<at::Tensor> buffers = std::move(t_block_buffers);
    const int64_t buffer_bytes = max_block * t->block_item;
    if (static_cast<int>(buffers.size()) < slots) buffers.resize(slots);
    for (int i = 0; i < slots; ++i) {
      if (!buffers[i].defined() || buffers[i].numel() < buffer_bytes) {
        buffers[i] = at::empty({buffer_bytes}, at::TensorOptions().dtype(at::kByte));
      }
    }
    struct GiveBack {
      std::vector<at::Tensor>& buffers;
      ~GiveBack() {
        int64_t kept = 0;
        for (const at::Tensor& b : buffers) kept += b.defined() ? b.numel() : 0;
        if (kept <= kKeptBufferBytes && t_block_buffers.empty()) t_block_buffers = std::move(buffers);
      }
    } give_back{buffers};
    std::vector<at::Tensor> values(slots);
    std::vector<loop::Instr> instrs;
    std::vector<float*> ptrs;
    std::vector<float> scalars;
    std::vector<char> flags;
    instrs.reserve(ops.size());
    ptrs.reserve(3 * ops.size());
    scalars.reserve(3 * ops.size());
    flags.reserve(3 * ops.size());
    Dims bsizes, bstrides, contiguous;
    for (int64_t b; (b = next_block()) >= 0;) {
      // This block: index of the dimensions before d, and a chunk of d.
      Dims index(std::max<int64_t>(d, 0), 0);
      int64_t start = 0, len = 1;
      if (dims > 0) {
        int64_t o = b / chunks;
        for (int64_t j = d - 1; j >= 0; --j) {
          index[j] = o % shape[j];
          o /= shape[j];
        }
        start = (b % chunks) * chunk;
        len = std::min(chunk, shape[d] - start);
        bsizes.assign(1, len);
        bsizes.append(shape.begin() + d + 1, shape.end());
        contiguous.assign(bsizes.size(), 1);
        for (int64_t j = static_cast<int64_t>(bsizes.size()) - 2; j >= 0; --j) {
          contiguous[j] = contiguous[j + 1] * bsizes[j + 1];
        }
      } else {
        bsizes.clear();
        contiguous.clear();
      }
      std::fill(values.begin(), values.end(), at::Tensor());
      auto view = [&](const Source& s) -> at::Tensor {
        switch (s.kind) {
          case Source::undefined: return at::Tensor();
          case Source::whole: return wholes[s.bind];
          case Source::mapped: {
            int64_t offset = s.g.offset;
            if (dims > 0) {
              for (int64_t j = 0; j < d; ++j) offset += index[j] * s.g.smap[j];
              offset += start * s.g.smap[d];
              bstrides.assign(s.g.smap.begin() + d, s.g.smap.end());
            } else {
              bstrides.clear();
            }
            return host_view(hosts[s.bind], s.g.dtype, offset, bsizes, bstrides);
          }
          case Source::block: {
            at::Tensor& v = values[s.slot];
            if (s.first || !v.defined()) {
              v = host_view(buffers[s.slot].storage(), s.g.dtype, 0, bsizes, contiguous);
            }
            return v;
          }
        }
        return at::Tensor();
      };
      for (size_t k = 0; k < ops.size(); ++k) {
        const FusedOp& f = ops[k];
        if (simple[k]) {
          // A run of loop instructions, in one pass over the block.
          size_t end = k;
          instrs.clear();
          ptrs.clear();
          scalars.clear();
          flags.clear();
          auto entry = [&](const Source& s) -> int {
            ptrs.push_back(nullptr);
            scalars.push_back(0.f);
            flags.push_back(false);
            const int e = static_cast<int>(ptrs.size()) - 1;
            if (s.kind == Source::whole) {
              flags[e] = true;
              scalars[e] = scalar_value(wholes[s.bind]);
            } else if (s.kind == Source::block) {
              ptrs[e] = static_cast<float*>(buffers[s.slot].data_ptr());
              values[s.slot] = at::Tensor();  // (written here: views are remade)
            } else {
              int64_t offset = s.g.offset;
              if (dims > 0) {
                for (int64_t j = 0; j < d; ++j) offset += index[j] * s.g.smap[j];
                offset += start * s.g.smap[d];
              }
              ptrs[e] = static_cast<float*>(hosts[s.bind].mutable_data()) + offset;
            }
            return e;
          };
          for (; end < ops.size() && simple[end]; ++end) {
            const FusedOp& g = ops[end];
            loop::Instr in = *simple[end];
            in.out = entry(g.operands[in.out]);
            in.a = entry(g.operands[in.a]);
            if (in.op == loop::Op::clamp_min) {
              ptrs.push_back(nullptr);
              scalars.push_back(static_cast<float>(args[end][1].toScalar().toDouble()));
              flags.push_back(true);
              in.b = static_cast<int>(ptrs.size()) - 1;
            } else if (in.b >= 0) {
              in.b = entry(g.operands[in.b]);
            }
            if (in.c >= 0) in.c = entry(g.operands[in.c]);
            instrs.push_back(in);
          }
          int64_t block_numel = 1;
          for (int64_t x : bsizes) block_numel *= x;
          loop::run(instrs.data(), static_cast<int>(instrs.size()), ptrs.data(), scalars.data(),
                    reinterpret_cast<const bool*>(flags.data()), block_numel);
          k = end - 1;
          continue;
        }
        try {
          torch::jit::Stack stack = args[k];
          size_t i = 0;
          for_each_tensor_slot(stack, [&](at::Tensor& t) { t = view(f.operands[i++]); });
          if (f.copy) {
            stack[1].toTensor().copy_(stack[0].toTensor());
            continue;
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
              values[s.slot] = stack[r].toTensor();
            } else if (s.kind == Source::mapped) {
              view(s).copy_(stack[r].toTensor());
            }
          }
        } catch (const c10::Error&) {
          runtime::rethrow_with_context(std::current_exception(),
                                        error_context(*f.name, locations[k]));
        }
      }
    }
  });
}

// Host memory for matmul results that only their fused epilogue reads (Plan::host_buffer), kept
// for the next flush. A fresh allocation of many MiB is a fresh mapping: its pages fault at the
// first write and are unmapped at the free, at every flush (a 4096^2 float32 product's 64 MiB
// made its GEMM 14 ms slower than strict eager's and its free cost 7 ms more, docs/host-speed.md,
// "A cached region's run"). Up to kKeptBytes are kept; a request takes a kept buffer of at
// least its size and at most a quarter more. (Freed from whichever thread releases the last
// storage.)
class HostBufferPool {
 public:
  static HostBufferPool& get() {
    static auto* pool = new HostBufferPool();  // leaked: buffers may come back during exit
    return *pool;
  }

  c10::DataPtr allocate(size_t nbytes, c10::Device device) {
    void* ptr = nullptr;
    size_t size = nbytes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = kept_.lower_bound(nbytes);
      if (it != kept_.end() && it->first <= nbytes + nbytes / 4) {
        ptr = it->second;
        size = it->first;
        kept_bytes_ -= size;
        kept_.erase(it);
      }
    }
    if (ptr == nullptr) ptr = c10::alloc_cpu(nbytes);
    return c10::DataPtr(ptr, new Buffer{ptr, size}, &HostBufferPool::give_back, device);
  }

 private:
  static constexpr size_t kKeptBytes = size_t(256) << 20;
  struct Buffer {
    void* ptr;
    size_t size;
  };
  static void give_back(void* context) {
    std::unique_ptr<Buffer> b(static_cast<Buffer*>(context));
    get().keep(b->ptr, b->size);
  }
  void keep(void* ptr, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (kept_bytes_ + size <= kKeptBytes) {
        kept_.emplace(size, ptr);
        kept_bytes_ += size;
        return;
      }
    }
    c10::free_cpu(ptr);
  }

  std::mutex mutex_;
  std::multimap<size_t, void*> kept_;  // by size
  size_t kept_bytes_ = 0;
};

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
    std::shared_ptr<const RegionTemplate> made = make_template(plan_.regions[r]);
    TORCHTPU_COUNT("defer.region_templates");
    std::lock_guard<std::mutex> lock(plan_.executable_mutex);
    if (plan_.executable.size() < plan_.regions.size()) {
      plan_.executable.resize(plan_.regions.size());
    }
    if (!plan_.executable[r]) plan_.executable[r] = std::move(made);
    return plan_.executable[r];
  }

  std::shared_ptr<const RegionTemplate> make_template(const Region& region) {
    auto t = std::make_shared<RegionTemplate>();
    t->shape = region.shape;
    for (int64_t s : region.shape) t->numel *= s;
    t->launch_name = "fused region of " + std::to_string(region.nodes.size()) + " ops (" +
                     *nodes_[region.nodes[0]].name + ", ...)";
    ska::flat_hash_map<int, int> host_of;  // key -> index in t->hosts
    ska::flat_hash_set<int> seen_blocks;   // block values met so far
    ska::flat_hash_map<int, bool> counted;  // storages whose bytes are counted
    auto source = [&](const Operand& o, int key, int node, int index) {
      Source s;
      if (!o.defined()) return s;
      s.g = geometry_of(o, region.shape);
      if (key >= 0 && !plan_.memory[key] && !plan_.host_buffer[key]) {
        s.kind = Source::block;
        s.slot = plan_.slot[key];
        s.first = seen_blocks.insert(key).second;
        t->slots = std::max(t->slots, s.slot + 1);
        t->block_item =
            std::max<int64_t>(t->block_item, static_cast<int64_t>(c10::elementSize(o.dtype)));
        return s;
      }
      s.bind = static_cast<int>(t->wholes.size());
      if (key == INT32_MIN) {  // a CPU scalar
        s.kind = Source::whole;
        t->wholes.push_back({node, index, -1, 0, o.dtype});
        return s;
      }
      const auto [it, fresh] = host_of.emplace(key, static_cast<int>(t->hosts.size()));
      if (fresh) t->hosts.push_back({key, node, index, 0});
      int64_t& reach = t->hosts[it->second].reach;
      const int64_t item = static_cast<int64_t>(c10::elementSize(o.dtype));
      if (s.g.whole) {
        s.kind = Source::whole;
        t->wholes.push_back({node, index, it->second, o.offset, o.dtype});
        reach = std::max(reach, (o.offset + 1) * item);
        return s;
      }
      s.kind = Source::mapped;
      s.bind = it->second;
      // Every element the region's loop reaches lies in the storage (a plan that mapped an
      // operand wrongly would otherwise write past it: memory corruption far from its cause);
      // checked against the storage's size at each run.
      int64_t lo = s.g.offset, hi = s.g.offset;
      for (size_t j = 0; j < region.shape.size() && j < s.g.smap.size(); ++j) {
        if (region.shape[j] == 0) return s;
        (s.g.smap[j] < 0 ? lo : hi) += (region.shape[j] - 1) * s.g.smap[j];
      }
      TORCH_INTERNAL_ASSERT(lo >= 0, "fused eager: an operand of a fused region over ",
                            c10::IntArrayRef(region.shape), " reaches element ", lo,
                            " of its storage (sizes ", c10::IntArrayRef(o.sizes), ", strides ",
                            c10::IntArrayRef(o.strides), ", offset ", o.offset,
                            "); please report it");
      reach = std::max(reach, (hi + 1) * item);
      return s;
    };
    auto value_bytes = [](const Operand& o) {
      return sim::CostModel::padded_bytes(o.sizes, static_cast<int>(c10::elementSize(o.dtype)));
    };
    for (int i : region.nodes) {
      const Node& n = nodes_[i];
      if (region.reduction_last && i == region.nodes.back()) {
        // (Runs through its kernel after the launch, reading the region's value in its buffer.)
        for (size_t j = 0; j < n.operands.size(); ++j) {
          const int key = keys_.operands[i][j];
          if (!n.operands[j].written && key >= 0 && plan_.host_buffer[key]) {
            t->reduction_input_bytes = value_bytes(n.operands[j]);
          }
        }
        continue;
      }
      if (region.matmul_first && i == region.nodes[0]) {
        // (Runs through its kernel before the launch; charged with it.)
        t->conv_in_host_memory = is_convolution(n) && keys_.results[i][0] >= 0 &&
                                 plan_.host_buffer[keys_.results[i][0]];
        if (t->conv_in_host_memory) t->prologue_result_bytes = value_bytes(n.results[0]);
        for (size_t j = 0; j < n.operands.size(); ++j) {
          const int key = keys_.operands[i][j];
          if (n.operands[j].written && key >= 0 && plan_.host_buffer[key]) {
            t->prologue_result_bytes = value_bytes(n.operands[j]);
          }
          if (n.operands[j].written) counted[key] = true;  // charged with the matmul
        }
        continue;
      }
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
      // Cost: VPU work per op; HBM bytes once per storage that is not a block buffer.
      // float64 / complex: emulated, as in the unfused VPU executor (HostExecution.cpp).
      bool foreign = false;
      for (const auto& o : n.operands) {
        if (o.tensor.defined() && o.tensor.is_cpu()) continue;  // a host scalar
        foreign = foreign || o.dtype == c10::kDouble || c10::isComplexType(o.dtype);
      }
      if (foreign) {
        t->emulated.push_back(n.name);
        t->emulated_units += traits.vpu_units;
      } else {
        t->units += traits.vpu_units;
      }
      for_each_access(nodes_, keys_, i, [&](const Operand& o, int key) {
        if (key == INT32_MIN || (key >= 0 && !plan_.memory[key]) || counted[key]) return;
        counted[key] = true;
        t->bytes += value_bytes(o);
      });
      t->ops.push_back(std::move(f));
    }
    return t;
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
