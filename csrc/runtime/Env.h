#pragma once
// Reading configuration from the environment: only variables of the configuration table
// (runtime/Config.h, generated from torchtpu/config.py), with one error style for bad values.
#include "runtime/Config.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <string>

namespace torchtpu::runtime::env {

// The variable's value; nullopt when unset or empty.
inline std::optional<std::string> get(const char* name) {
  const char* v = config::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// The variable's value as set, empty included; nullopt when unset.
inline std::optional<std::string> get_raw(const char* name) {
  const char* v = config::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// The variable's value, or its default in the table when unset or empty.
inline std::string value(const char* name) {
  const config::Variable& variable = config::require(name);
  const char* v = config::getenv(name);
  return v == nullptr || *v == '\0' ? std::string(variable.default_value) : std::string(v);
}

// An integer variable; a value that is not an integer is an error naming the variable.
inline std::optional<int64_t> parse_int(const char* name, const std::optional<std::string>& v) {
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

// An integer variable as set; nullopt when unset or empty.
inline std::optional<int64_t> get_int(const char* name) { return parse_int(name, get(name)); }

// An integer variable, or its default in the table.
inline int64_t int_value(const char* name) {
  auto v = parse_int(name, value(name));
  TORCH_INTERNAL_ASSERT(v.has_value(), name, " has no default in torchtpu/config.py");
  return *v;
}

// A 0/1 variable, or its default in the table; another value is an error naming it.
inline bool flag(const char* name) {
  const std::string v = value(name);
  TORCH_CHECK(v == "0" || v == "1", name, "='", v, "': expected 0 or 1");
  return v == "1";
}

}  // namespace torchtpu::runtime::env
