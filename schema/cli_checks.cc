#include "schema/cli_checks.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "schema/strings.h"

namespace tessel {

const CLI::Validator& PositiveInteger() {
  static const CLI::Validator* const check = new CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t value = 0;
        if (absl::SimpleAtoi(text, &value) && value > 0) return "";
        return StrCat("must be a positive integer, got '", Shown(text), "'");
      },
      "POSITIVE");
  return *check;
}

const CLI::Validator& NonNegativeNumber() {
  static const CLI::Validator* const check = new CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (absl::SimpleAtod(text, &value) && std::isfinite(value) && value >= 0) return "";
        return StrCat("must be a non-negative number, got '", Shown(text), "'");
      },
      "NONNEGATIVE");
  return *check;
}

}  // namespace tessel
