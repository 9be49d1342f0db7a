// How tessel-server and tessel-worker log: spdlog on stderr, as text lines or, with
// `--log-format json`, one JSON object per line ({"time", "level", "logger", "msg"}; the message
// escaped), for log shippers. Levels: trace, debug, info, warn, error, critical, off.
#ifndef TESSEL_SCHEMA_LOGGING_H_
#define TESSEL_SCHEMA_LOGGING_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessel {

// Sets the default logger's format ("text" or "json") and level. InvalidArgument naming the
// flag for an unknown value (nothing changes then).
absl::Status ConfigureLogging(const std::string& format, const std::string& level);

// A string escaped for a JSON string body (quotes, backslashes, control characters).
std::string JsonEscape(std::string_view text);

}  // namespace tessel

#endif  // TESSEL_SCHEMA_LOGGING_H_
