#include "search/strategy.h"

#include "schema/strings.h"
#include "search/random.h"

namespace tessel::search {

absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name,
                                                       const kernels::Space& space, uint64_t seed) {
  if (name == "random") return std::make_unique<RandomStrategy>(space, seed);
  return absl::InvalidArgumentError(
      StrCat("unknown strategy '", name, "'; known strategies: ", StrJoin(StrategyNames(), ", ")));
}

std::vector<std::string> StrategyNames() { return {"random"}; }

}  // namespace tessel::search
