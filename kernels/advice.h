// What limits a config and what to try next: the bound of its simulation, the busiest engines,
// and the params of the kernel's space that act on that bound (`tessel tune`, `lookup`, `explain`
// and the dashboard say it the same way).
#ifndef TESSEL_KERNELS_ADVICE_H_
#define TESSEL_KERNELS_ADVICE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/kernel.h"
#include "schema/key.h"
#include "sim/api.h"
#include "sim/target.h"

namespace tessel::kernels {

struct Bottleneck {
  std::string bound;                                    // SimResult::bound
  std::vector<std::pair<std::string, double>> busiest;  // engine, busy fraction; busiest first
  std::vector<std::string> try_next;                    // e.g. "block_k=2", "bufs=3"
  // Per try_next entry, the config change it names (param, value); an empty param for one that
  // is not a config change (a dtype).
  std::vector<std::pair<std::string, std::string>> changes;
  // "dma-bound (dma 92%, tensor 43%): try block_k=2 or bufs=3".
  std::string Summary() const;
};

// The bottleneck of `config` (of `space`) whose simulation gave `result`. The suggestions come
// from the space's params by role, never from a kernel's name: for a DMA bound, params that make
// transfers larger (tile_/block_/chunk/rows_per_partition...), keep operands resident or add
// buffers, where the config is below their largest value; for a compute engine, params that move
// work to another engine (evict, *_engine); for TensorE, more shards, larger tiles (longer
// matmuls; fp8's double-row mode needs a K=256 contraction) or a faster dtype; for
// latency, more buffers, pipelining or shards. A suggestion names only a change (with the rest of
// `config` kept) that the space accepts (Space::Validate): more buffers that would not fit are
// not suggested. For TensorE, `faster_dtypes` (FasterDTypes) gives the dtype to suggest: its
// first, when there is one.
Bottleneck FindBottleneck(const Space& space, const Config& config, const sim::SimResult& result,
                          const std::vector<std::string>& faster_dtypes = {});

// Simulates each config change of `b` on `kernel`, `problem` and `target` and keeps those
// faster than `time_ns` (the config's own time), fastest first, each said with its gain
// ("bufs=3 (-12.4%)"); suggestions that are not config changes follow as they were. So the
// advice names no change that makes the config slower.
void KeepFasterChanges(Bottleneck& b, const Kernel& kernel, const Problem& problem,
                       const sim::Target& target, const Config& config, double time_ns);

// What `tessel tune`, `lookup`, `explain` and the dashboard say of `config` (of `space`, for
// `kernel` on `problem` and `target`), whose simulation gave `result`: FindBottleneck with
// FasterDTypes, then KeepFasterChanges.
Bottleneck Advise(const Kernel& kernel, const Problem& problem, const sim::Target& target,
                  const Space& space, const Config& config, const sim::SimResult& result);

// The dtypes `kernel` takes whose TensorE peak on `target` is above `dtype`'s, fastest first (an
// fp8 problem, or fp8 on a target that runs it at the bf16 rate, has none).
std::vector<std::string> FasterDTypes(const Kernel& kernel, std::string_view dtype,
                                      const sim::Target& target);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_ADVICE_H_
