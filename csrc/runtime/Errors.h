#pragma once
// Rethrowing an error with context (which op, where it was recorded, when it is reported) while
// keeping its kind: an IndexError stays an IndexError in Python, an out of memory stays
// torch.OutOfMemoryError, as on CUDA (docs/runtime.md, "Errors").
#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace torchtpu::runtime {

// Throws the error in `error` again, of the same c10 kind, with `prefix` before its message.
[[noreturn]] inline void rethrow_with_context(std::exception_ptr error, const std::string& prefix) {
  try {
    std::rethrow_exception(error);
  }
#define TORCHTPU_RETHROW_AS(kind)                                              \
  catch (const c10::kind& e) {                                                 \
    TORCH_CHECK_WITH(kind, false, prefix, e.what_without_backtrace());         \
  }
  TORCHTPU_RETHROW_AS(IndexError)
  TORCHTPU_RETHROW_AS(ValueError)
  TORCHTPU_RETHROW_AS(TypeError)
  TORCHTPU_RETHROW_AS(NotImplementedError)
  TORCHTPU_RETHROW_AS(LinAlgError)
  TORCHTPU_RETHROW_AS(OutOfMemoryError)
  TORCHTPU_RETHROW_AS(EnforceFiniteError)
#undef TORCHTPU_RETHROW_AS
  catch (const c10::Error& e) {
    TORCH_CHECK(false, prefix, e.what_without_backtrace());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, prefix, e.what());
  }
  TORCH_CHECK(false, prefix, "unknown error");
}

}  // namespace torchtpu::runtime
