// Process-wide settings shared by tessel-server, tessel-worker and the tessel CLI.
#ifndef TESSEL_SCHEMA_PROCESS_H_
#define TESSEL_SCHEMA_PROCESS_H_

namespace tessel {

// Turns off absl::Mutex's deadlock detection for the process. Debian's abseil is built without
// NDEBUG, so otherwise every acquisition feeds a lock-order graph (GraphCycles): 2-3% of the
// server's CPU under a fifty-client load. Tests keep it on.
void StopMutexDeadlockDetection();

// Keeps freed heap memory for reuse instead of returning it to the kernel: glibc maps allocations
// above its threshold afresh each time and trims the heap whenever 128 KiB or more is free at its
// top, so a process that lowers and simulates one program after another (MBs each) has its
// memory faulted in again for every evaluation, at microseconds per page fault on a
// paravirtualised VM. Allocations up to 32 MiB (glibc's largest threshold) then come from the
// heap, and up to 256 MiB of free heap is kept (BENCHMARKS.md "Every kernel's evaluation cost":
// conv2d's random configs 36% faster). A no-op where the C library is not glibc.
void KeepFreedHeapMemory();

}  // namespace tessel

#endif  // TESSEL_SCHEMA_PROCESS_H_
