#pragma once
// Logging for torchtpu. The implementation uses spdlog; this header deliberately includes nothing
// of spdlog or fmt, so translation units that include torch's headers (which bring their own fmt)
// can log without mixing the two. Level from TORCHTPU_LOG_LEVEL: trace, debug, info, warn
// (default), error, off.
#include <string>

namespace torchtpu::runtime::log {

enum class Level { trace, debug, info, warn, error, off };

bool enabled(Level level);
void write(Level level, const std::string& message);

inline void debug(const std::string& m) { if (enabled(Level::debug)) write(Level::debug, m); }
inline void info(const std::string& m) { if (enabled(Level::info)) write(Level::info, m); }
inline void warn(const std::string& m) { if (enabled(Level::warn)) write(Level::warn, m); }

}  // namespace torchtpu::runtime::log
