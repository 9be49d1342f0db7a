// Single-thread OpenMP regions run inline.
//
// CostModel trains XGBoost with nthread=1, so that parallel jobs do not fight over cores. Debian's
// libxgboost is built with GCC's OpenMP, and its ParallelFor has no serial path: every loop is a
// `#pragma omp parallel for num_threads(1)`, which libgomp runs by starting a team of one and
// ending it at a barrier whose last arriver always wakes the others with a futex call, even when
// there are none. A 2,000-trial auto job makes ~59,000 such calls; on this VM they were 10% of
// its time in the kernel and 7% in libgomp (perf, BENCHMARKS.md "Strategy overhead").
//
// This file defines GOMP_parallel, the entry GCC emits for `#pragma omp parallel`. The
// executable's definition comes first in the dynamic linker's lookup, so libxgboost's calls land
// here. A region asked for exactly one thread calls its body directly: constructs inside it are
// then orphaned, which OpenMP defines as run by a team of one thread, and libgomp supports (its
// work-share, barrier and single entries accept a thread with no team). Any other request goes to
// libgomp's own GOMP_parallel unchanged. What differs inside an inlined region: omp_in_parallel()
// and omp_get_level() read as outside one; libxgboost 1.6 calls neither (nm -D).
#include "search/omp_inline.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tessel::search {
namespace {

std::atomic<bool>& InlineFlag() {
  static std::atomic<bool> on = [] {
    const char* env = std::getenv("TESSEL_OMP_INLINE");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

thread_local long inlined = 0;

}  // namespace

bool OmpRegionsInline() { return InlineFlag().load(std::memory_order_relaxed); }
void SetOmpRegionsInline(bool on) { InlineFlag().store(on, std::memory_order_relaxed); }
long OmpRegionsInlined() { return inlined; }

}  // namespace tessel::search

extern "C" {

using GompParallel = void (*)(void (*)(void*), void*, unsigned, unsigned);

// libgomp's signature (GOMP_4.0): the outlined body, its data, the num_threads clause (0 when
// absent) and the proc_bind flags.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  if (num_threads == 1 && tessel::search::OmpRegionsInline()) {
    ++tessel::search::inlined;
    fn(data);
    return;
  }
  static const GompParallel real =
      reinterpret_cast<GompParallel>(dlsym(RTLD_NEXT, "GOMP_parallel"));
  if (real == nullptr) {
    fn(data);  // no libgomp behind us: nothing else could run the region's other threads
    return;
  }
  real(fn, data, num_threads, flags);
}

}  // extern "C"
