#include "schema/process.h"

#include "absl/synchronization/mutex.h"

namespace tessel {

void StopMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace tessel
