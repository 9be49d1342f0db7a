// Counts global operator new calls, for tests that check a hot loop allocates nothing
// (sim/alloc_test.cc, kernels/alloc_test.cc). It replaces the global operator new and delete, so
// include it in exactly one source file of a test binary of its own.
#ifndef TESSEL_TESTS_TESTING_COUNT_ALLOCATIONS_H_
#define TESSEL_TESTS_TESTING_COUNT_ALLOCATIONS_H_

#include <atomic>
#include <cstdlib>
#include <new>

namespace tessel::testing {
// Global operator new calls so far in the process.
inline std::atomic<long> g_allocations{0};
}  // namespace tessel::testing

// The replacements pair malloc with free; GCC cannot see that and warns about the delete.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  tessel::testing::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

#endif  // TESSEL_TESTS_TESTING_COUNT_ALLOCATIONS_H_
