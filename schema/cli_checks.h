// CLI11 checks shared by the options of tessel, tessel-server and tessel-worker, with messages a
// user can read: CLI11's own PositiveNumber and NonNegativeNumber print the range of a double
// ("Value 0 not in range 0.000000 to 179769313486231570814527423731704356798...").
#ifndef TESSEL_SCHEMA_CLI_CHECKS_H_
#define TESSEL_SCHEMA_CLI_CHECKS_H_

#include "CLI/CLI.hpp"

namespace tessel {

// An integer above 0 ("INT:POSITIVE" in --help): "must be a positive integer, got 'abc'".
const CLI::Validator& PositiveInteger();
// A finite number at or above 0: "must be a non-negative number, got '-1'".
const CLI::Validator& NonNegativeNumber();

}  // namespace tessel

#endif  // TESSEL_SCHEMA_CLI_CHECKS_H_
