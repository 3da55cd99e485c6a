// The configuration table (Config.h), generated from torchtpu/config.py. Constant-initialized,
// so it can be read while other translation units' statics are initialized.
#include "runtime/Config.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace torchtpu::runtime::config {
namespace {

constexpr Variable kVariables[] = {
#include "runtime/ConfigTable.inc"
};

}  // namespace

const Variable* find(std::string_view name) {
  for (const Variable& v : kVariables) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

const Variable& require(const char* name) {
  const Variable* v = find(name);
  if (v == nullptr || !v->read_by_cpp) {
    throw std::logic_error(std::string("the environment variable ") + name +
                           " is read by the C++ core but is not in its configuration table: add "
                           "it to torchtpu/config.py (read_by=\"C++\") and run `python -m "
                           "torchtpu config --write-cpp`");
  }
  return *v;
}

const char* getenv(const char* name) {
  require(name);
  return std::getenv(name);
}

}  // namespace torchtpu::runtime::config
