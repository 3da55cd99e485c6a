// The run of a fused region (FusedRegion.h): blocks handed out to the threads of
// runtime::parallel_blocks, each block through the region's ops in order.
#include "defer/FusedRegion.h"
#include "defer/LoopSelection.h"
#include "runtime/BlockPool.h"
#include "runtime/Errors.h"
#include "runtime/OpenMP.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/ParallelGuard.h>

#include <algorithm>
#include <cstdlib>

namespace torchtpu::defer {
namespace {

using runtime::parallel_blocks;

// Elements per block of a fused region (the block of every operand stays in L2);
// TORCHTPU_FUSED_BLOCK sets it for every region (for experiments).
const char* const kBlockSetting = std::getenv("TORCHTPU_FUSED_BLOCK");
const int64_t kBlockElements =
    kBlockSetting != nullptr ? std::max<int64_t>(1, std::atoll(kBlockSetting)) : int64_t(32768);

// The block buffers of the thread running a fused region's blocks, kept for its next region
// (up to kKeptBufferBytes: allocating them was a fifth of a small region's run).
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

}  // namespace torchtpu::defer
