// Process-wide settings shared by tessel-server and tessel-worker.
#ifndef TESSEL_SCHEMA_PROCESS_H_
#define TESSEL_SCHEMA_PROCESS_H_

namespace tessel {

// Turns off absl::Mutex's deadlock detection for the process. Debian's abseil is built without
// NDEBUG, so otherwise every acquisition feeds a lock-order graph (GraphCycles): 2-3% of the
// server's CPU under a fifty-client load. Tests keep it on.
void StopMutexDeadlockDetection();

}  // namespace tessel

#endif  // TESSEL_SCHEMA_PROCESS_H_
