// Picks matmul tile sizes two ways: at compile time from the generated header, and at run time
// through libtessel from the same snapshot. Exits 0 when they agree.
#include <tessel/lookup.h>

#include <cstdio>
#include <string>

#include "tuned_configs.h"

namespace {

// The workload this program runs (canonical dims are sorted by name).
constexpr std::string_view kDims = "K=512,M=512,N=512";
constexpr std::string_view kCompileTimeConfig =
    tessel_tuned::BestConfig("matmul", kDims, "bf16", "snc2");
static_assert(!kCompileTimeConfig.empty(), "the snapshot has this workload tuned");
constexpr std::int64_t kTileM = tessel_tuned::ParamValue(kCompileTimeConfig, "tile_m", 128);
static_assert(kTileM > 0 && kTileM <= 128, "tile_m fits the 128 partitions");

}  // namespace

int main() {
  tessel::client::LookupOptions options;
  options.snapshot_path = TESSEL_SNAPSHOT;
  auto lookup = tessel::client::Lookup::Create(options);
  if (!lookup.ok()) {
    std::fprintf(stderr, "downstream: %s\n", std::string(lookup.status().message()).c_str());
    return 1;
  }
  auto dims = tessel::Dims::Parse(std::string(kDims));
  auto found = (*lookup)->Find("matmul", *dims, "bf16", "snc2");
  if (!found.ok()) {
    std::fprintf(stderr, "downstream: %s\n", std::string(found.status().message()).c_str());
    return 1;
  }
  std::printf("compile time: %.*s (tile_m=%lld)\nrun time:     %s (%s)\n",
              static_cast<int>(kCompileTimeConfig.size()), kCompileTimeConfig.data(),
              static_cast<long long>(kTileM), found->config.c_str(), found->match.c_str());
  return found->config == kCompileTimeConfig ? 0 : 2;
}
