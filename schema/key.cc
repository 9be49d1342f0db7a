#include "schema/key.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel {
namespace {

// "name=value,name=value". Appended piece by piece: keys and configs are formatted on every
// lookup and job view, and a format string parsed per pair cost more than the appends.
template <typename Items>
std::string JoinPairs(const Items& items) {
  std::string out;
  for (const auto& [name, value] : items) {
    if (!out.empty()) out += ',';
    out += name;
    out += '=';
    if constexpr (std::is_integral_v<std::decay_t<decltype(value)>>) {
      const fmt::format_int digits(value);
      out.append(digits.data(), digits.size());
    } else {
      out += value;
    }
  }
  return out;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseKeyValues(
    std::string_view text, std::string_view what) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string_view trimmed = StripWhitespace(text);
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(
        StrCat("empty ", what, "; expected NAME=VALUE pairs separated by commas"));
  }
  for (std::string_view piece : StrSplit(trimmed, ',')) {
    piece = StripWhitespace(piece);
    size_t eq = piece.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(
          StrCat("malformed ", what, " element '", piece, "': expected NAME=VALUE"));
    }
    std::string_view name = StripWhitespace(piece.substr(0, eq));
    std::string_view value = StripWhitespace(piece.substr(eq + 1));
    if (!IsIdentifier(name)) {
      return absl::InvalidArgumentError(
          StrCat("malformed ", what, " element '", piece, "': bad name '", name, "'"));
    }
    if (value.empty()) {
      return absl::InvalidArgumentError(
          StrCat("malformed ", what, " element '", piece, "': missing value"));
    }
    for (const auto& [seen, unused] : out) {
      if (seen == name) {
        return absl::InvalidArgumentError(StrCat(what, " names '", name, "' more than once"));
      }
    }
    out.emplace_back(std::string(name), std::string(value));
  }
  return out;
}

Dims::Dims(std::initializer_list<std::pair<std::string, int64_t>> dims) {
  for (const auto& [name, value] : dims) Set(name, value);
}

absl::StatusOr<Dims> Dims::Parse(std::string_view text) {
  TESSEL_ASSIGN_OR_RETURN(const auto pairs, ParseKeyValues(text, "shape"));
  Dims dims;
  for (const auto& [name, value] : pairs) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || ptr != value.data() + value.size()) {
      return absl::InvalidArgumentError(
          StrCat("shape dim ", name, "=", value, " is not an integer"));
    }
    // Zero is a value (conv2d's padding); each kernel says which of its dims must be positive.
    if (v < 0) {
      return absl::InvalidArgumentError(
          StrCat("shape dim ", name, "=", value, " must not be negative"));
    }
    dims.Set(name, v);
  }
  return dims;
}

void Dims::Set(std::string_view name, int64_t value) {
  for (auto& [n, v] : items_) {
    if (n == name) {
      v = value;
      return;
    }
  }
  items_.emplace_back(std::string(name), value);
}

std::optional<int64_t> Dims::Get(std::string_view name) const {
  for (const auto& [n, v] : items_) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::string Dims::ToString() const { return JoinPairs(items_); }

std::string Dims::Canonical() const {
  auto sorted = items_;
  std::sort(sorted.begin(), sorted.end());
  return JoinPairs(sorted);
}

Config::Config(std::initializer_list<std::pair<std::string, std::string>> items) {
  for (const auto& [name, value] : items) Set(name, value);
}

absl::StatusOr<Config> Config::Parse(std::string_view text) {
  TESSEL_ASSIGN_OR_RETURN(auto pairs, ParseKeyValues(text, "config"));
  Config config;
  for (auto& [name, value] : pairs) config.Set(name, std::move(value));
  return config;
}

void Config::Set(std::string_view name, std::string value) {
  for (auto& [n, v] : items_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::string(name), std::move(value));
}

std::optional<std::string_view> Config::Get(std::string_view name) const {
  for (const auto& [n, v] : items_) {
    if (n == name) return std::string_view(v);
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> Config::GetInt(std::string_view name) const {
  auto value = Get(name);
  if (!value) return absl::InvalidArgumentError(StrCat("config is missing '", name, "'"));
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(value->data(), value->data() + value->size(), v);
  if (ec != std::errc() || ptr != value->data() + value->size()) {
    return absl::InvalidArgumentError(
        StrCat("config value ", name, "=", *value, " is not an integer"));
  }
  return v;
}

std::string Config::ToString() const { return JoinPairs(items_); }

DimsLogs::DimsLogs(const Dims& dims) {
  auto items = dims.items();
  std::sort(items.begin(), items.end());
  for (const auto& [name, value] : items) {
    names_ += name;
    names_ += ',';
    // A zero dim (padding=0) sits one step below 1, as 1 does below 2.
    logs_.push_back(value > 0 ? std::log2(static_cast<double>(value)) : -1.0);
  }
}

double DimsLogs::DistanceTo(const DimsLogs& other) const {
  if (names_ != other.names_) return std::numeric_limits<double>::infinity();
  double distance = 0;
  for (size_t d = 0; d < logs_.size(); ++d) distance += std::abs(logs_[d] - other.logs_[d]);
  return distance;
}

double DimsDistance(const Dims& a, const Dims& b) { return DimsLogs(a).DistanceTo(DimsLogs(b)); }

}  // namespace tessel
