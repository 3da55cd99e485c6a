#pragma once
// What happens to an aten op that has no native TPU kernel.

#include <string>

namespace torchtpu::aten {

enum class FallbackMode {
  warn,    // run it on the CPU, count it, warn once per op (default)
  error,   // raise NotImplementedError naming the op
  silent,  // run it on the CPU and count it, without the warning
};

// Initially from TORCHTPU_FALLBACK ("warn", "error", "silent").
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);

// The bookkeeping of one op run on the host for want of a TPU kernel: raises in error mode,
// otherwise counts it in torchtpu.metrics and warns once per name in warn mode. The boxed
// fallback calls it, and so do native kernels that hand a case the TPU does not support (say,
// a float64 matmul) to the host.
void note_fallback(const std::string& name);

}  // namespace torchtpu::aten
