#pragma once
// Reading configuration from the environment, with one error style for bad values.
#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace torchtpu::runtime::env {

inline std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// An integer variable; a value that is not an integer is an error naming the variable.
inline std::optional<int64_t> get_int(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  size_t used = 0;
  int64_t out = 0;
  try {
    out = std::stoll(*v, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  TORCH_CHECK(used == v->size(), name, "='", *v, "' is not an integer");
  return out;
}

}  // namespace torchtpu::runtime::env
