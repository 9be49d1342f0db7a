#include "schema/logging.h"

#include <memory>

#include "fmt/format.h"
#include "schema/strings.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/spdlog.h"

namespace tessel {
namespace {

// %* in a pattern: the message, escaped for a JSON string.
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string escaped =
        JsonEscape(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessage>();
  }
};

}  // namespace

std::string JsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

absl::Status ConfigureLogging(const std::string& format, const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        StrCat("--log-level '", Shown(level, 32),
               "' is not one of trace, debug, info, warn, error, critical, off"));
  }
  if (format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","logger":"%n","msg":"%*"})");
    spdlog::set_formatter(std::move(formatter));
  } else if (format != "text") {
    return absl::InvalidArgumentError(
        StrCat("--log-format '", Shown(format, 32), "' is not text or json"));
  }
  spdlog::set_level(parsed);
  return absl::OkStatus();
}

}  // namespace tessel
