#include "schema/process.h"

#include <cstdlib>  // defines __GLIBC__ with glibc
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "absl/synchronization/mutex.h"

namespace tessel {

void StopMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void KeepFreedHeapMemory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace tessel
