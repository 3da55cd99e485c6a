#pragma once
// The configuration table as the C++ core sees it: every environment variable torchtpu reads is
// a row of torchtpu/config.py (name, type, default, meaning, docs), from which ConfigTable.inc
// is generated. runtime/Env.h reads variables only through this table: a name it lacks is an
// error at the read (test/python/test_config.py finds such reads in the sources). Free of torch's
// headers: the logging library below the layers reads its level through it (CMakeLists.txt).
#include <string_view>

namespace torchtpu::runtime::config {

struct Variable {
  const char* name;
  const char* default_value;  // "" when unset means nothing or depends on something else
  bool read_by_cpp;           // (the others are read by the Python package)
};

// The table's row of `name`, or null.
const Variable* find(std::string_view name);
// The row of a variable the C++ core reads; a std::logic_error naming torchtpu/config.py when
// the table lacks it.
const Variable& require(const char* name);
// The variable's value in the environment (null when unset), through its row (require()).
const char* getenv(const char* name);

}  // namespace torchtpu::runtime::config
