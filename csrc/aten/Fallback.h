#pragma once
// What happens to an aten op that has no native TPU kernel.

namespace torchtpu::aten {

enum class FallbackMode {
  warn,    // run it on the CPU, count it, warn once per op (default)
  error,   // raise NotImplementedError naming the op
  silent,  // run it on the CPU and count it, without the warning
};

// Initially from TORCHTPU_FALLBACK ("warn", "error", "silent").
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);

}  // namespace torchtpu::aten
