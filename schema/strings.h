// Small string helpers that work with std::string_view.
//
// Debian 12's abseil is built with ABSL_OPTION_USE_STD_STRING_VIEW=0, so absl::StrCat, StrSplit
// and friends take absl::string_view and do not accept std::string_view. Use these instead; pass
// std::string (or const char*) to absl::Status constructors, and copy status.message() with
// std::string(status.message()).
#ifndef TESSEL_SCHEMA_STRINGS_H_
#define TESSEL_SCHEMA_STRINGS_H_

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"

namespace tessel {

// Concatenates the arguments' fmt "{}" renderings (into an inline buffer first, so a result is
// allocated once rather than grown piece by piece).
template <typename... Args>
std::string StrCat(const Args&... args) {
  fmt::memory_buffer out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return fmt::to_string(out);
}

// Joins a range with `sep`, rendering each element with "{}".
template <typename Range>
std::string StrJoin(const Range& range, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& item : range) {
    if (!first) out += sep;
    first = false;
    fmt::format_to(std::back_inserter(out), "{}", item);
  }
  return out;
}

// Splits on every `sep`; "" gives one empty piece.
inline std::vector<std::string_view> StrSplit(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(text.substr(start));
      return out;
    }
    out.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

// Removes leading and trailing ASCII whitespace.
inline std::string_view StripWhitespace(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// `s` as it may appear in a message, a log line or a table, whoever sent it: printable ASCII kept,
// every other byte written as \xNN (so no newline, escape sequence or terminal control gets
// through), and at most `max_bytes` of the input shown, with how many were left out.
inline std::string Shown(std::string_view s, size_t max_bytes = 64) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t shown = s.size() > max_bytes ? max_bytes : s.size();
  out.reserve(shown + 16);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(char(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (shown < s.size()) out += fmt::format("... ({} more bytes)", s.size() - shown);
  return out;
}

}  // namespace tessel

#endif  // TESSEL_SCHEMA_STRINGS_H_
