#include <algorithm>

#include "schema/status_macros.h"
#include "schema/strings.h"
#include "search/random.h"
#include "search/strategies.h"
#include "search/strategy.h"

namespace tessel::search {

absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name,
                                                       const kernels::Space& space, uint64_t seed) {
  if (name == "random") return std::make_unique<RandomStrategy>(space, seed);
  if (name == "exhaustive") return std::make_unique<ExhaustiveStrategy>(space, seed);
  if (name == "ils") return std::make_unique<IlsStrategy>(space, seed);
  if (name == "anneal") return std::make_unique<AnnealStrategy>(space, seed);
  if (name == "ga") return std::make_unique<StandardGaStrategy>(space, seed);
  if (name == "genetic") return std::make_unique<GeneticStrategy>(space, seed);
  if (name == "model") return std::make_unique<ModelStrategy>(space, seed);
  if (name == "auto") return std::make_unique<AutoStrategy>(space, seed);
  if (name.starts_with("auto:")) {
    absl::StatusOr<AutoStrategy::Options> options = AutoStrategy::ParseOptions(name.substr(5));
    if (!options.ok()) return options.status();
    return std::make_unique<AutoStrategy>(space, seed, *std::move(options));
  }
  TESSEL_RETURN_IF_ERROR(CheckStrategyName(name));
  return absl::InternalError(StrCat("strategy '", name, "' is listed but not made"));
}

std::vector<std::string> StrategyNames() {
  return {"anneal", "auto", "exhaustive", "ga", "genetic", "ils", "model", "random"};
}

absl::Status CheckStrategyName(std::string_view name) {
  const std::vector<std::string> names = StrategyNames();
  if (std::find(names.begin(), names.end(), name) != names.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("unknown strategy '", Shown(name), "'; known strategies: ", StrJoin(names, ", ")));
}

}  // namespace tessel::search
