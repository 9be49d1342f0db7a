// Names of small enums kept as one table per enum (value, name), in place of a switch per enum:
// the name of a value, and the value of a name. Header-only, for sim/ and the folders above it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessel::sim {

template <typename Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

// The name of `value` in `table`; `fallback` when the table does not list it.
template <typename Enum, size_t N>
constexpr std::string_view NameIn(const EnumName<Enum> (&table)[N], Enum value,
                                  std::string_view fallback) {
  for (const EnumName<Enum>& row : table) {
    if (row.value == value) return row.name;
  }
  return fallback;
}

// The first value named `name` in `table`; nullopt when none is.
template <typename Enum, size_t N>
constexpr std::optional<Enum> ValueIn(const EnumName<Enum> (&table)[N], std::string_view name) {
  for (const EnumName<Enum>& row : table) {
    if (row.name == name) return row.value;
  }
  return std::nullopt;
}

// Every name in `table`, in its order, joined by ", " (for "known: ..." in error messages).
template <typename Enum, size_t N>
std::string NamesIn(const EnumName<Enum> (&table)[N]) {
  std::string names;
  for (const EnumName<Enum>& row : table) {
    if (!names.empty()) names += ", ";
    names += row.name;
  }
  return names;
}

// The value named `name` in `table`, or InvalidArgument "unknown WHAT 'NAME' (known: ...)".
template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseNameIn(const EnumName<Enum> (&table)[N], std::string_view name,
                                 std::string_view what) {
  if (std::optional<Enum> value = ValueIn(table, name)) return *value;
  return absl::InvalidArgumentError("unknown " + std::string(what) + " '" + std::string(name) +
                                    "' (known: " + NamesIn(table) + ")");
}

}  // namespace tessel::sim
