// Single-thread OpenMP regions run inline: what XGBoost's single-threaded fits cost in futex
// calls, removed (see omp_inline.cc).
#ifndef TESSEL_SEARCH_OMP_INLINE_H_
#define TESSEL_SEARCH_OMP_INLINE_H_

namespace tessel::search {

// Whether a parallel region asked to run on one thread runs as a plain call (the default) rather
// than through libgomp's team start and end. Either way the region's code runs once, on the
// calling thread, in the same order: results are the same (CostModelTest checks it).
bool OmpRegionsInline();
// For tests and A/B measurements; also TESSEL_OMP_INLINE=0 in the environment at start-up.
void SetOmpRegionsInline(bool on);
// How many regions the calling thread has run inline (tests: shows that libxgboost's calls do
// reach this definition).
long OmpRegionsInlined();

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_OMP_INLINE_H_
