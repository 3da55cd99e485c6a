#include "runtime/Log.h"
#include "runtime/Config.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>

namespace torchtpu::runtime::log {
namespace {

spdlog::level::level_enum level_from_env() {
  const char* set = config::getenv("TORCHTPU_LOG_LEVEL");
  const std::string v = set != nullptr && *set != '\0'
                            ? set
                            : config::require("TORCHTPU_LOG_LEVEL").default_value;
  auto level = spdlog::level::from_str(v);  // "trace", "debug", "info", "warn", "err", "off"
  if (v == "error") level = spdlog::level::err;
  return level;
}

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("torchtpu");
    l->set_level(level_from_env());
    l->set_pattern("[torchtpu %L %H:%M:%S.%e] %v");
    return l;
  }();
  return *instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::trace: return spdlog::level::trace;
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    case Level::off: return spdlog::level::off;
  }
  return spdlog::level::off;
}

}  // namespace

bool enabled(Level level) { return logger().should_log(to_spdlog(level)); }

void write(Level level, const std::string& message) { logger().log(to_spdlog(level), message); }

}  // namespace torchtpu::runtime::log
