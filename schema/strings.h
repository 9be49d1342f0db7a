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

}  // namespace tessel

#endif  // TESSEL_SCHEMA_STRINGS_H_
