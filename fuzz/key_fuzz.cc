// Shape (--shape, Dims) and config (Config) parsing on arbitrary text: never a crash, and what
// parses round-trips: Parse(x.ToString()) == x.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "schema/key.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (absl::StatusOr<tessel::Dims> dims = tessel::Dims::Parse(text); dims.ok()) {
    absl::StatusOr<tessel::Dims> again = tessel::Dims::Parse(dims->ToString());
    if (!again.ok() || !(*again == *dims)) std::abort();
  }
  if (absl::StatusOr<tessel::Config> config = tessel::Config::Parse(text); config.ok()) {
    absl::StatusOr<tessel::Config> again = tessel::Config::Parse(config->ToString());
    if (!again.ok() || again->ToString() != config->ToString()) std::abort();
  }
  return 0;
}
