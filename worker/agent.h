// The worker agent: registers with a server, leases trials, measures them on the simulator with
// the trial's protocol (warmup, repeats, median, verification policy), reports, and heartbeats.
#ifndef TESSEL_WORKER_AGENT_H_
#define TESSEL_WORKER_AGENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/tessel.pb.h"

namespace tessel::worker {

struct AgentOptions {
  std::string name;                  // shown in `tessel workers`; host:pid when empty
  int threads = 1;                   // trials measured at once
  std::vector<std::string> targets;  // targets offered; every built-in target when empty
  int lease_wait_ms = 1000;          // long-poll length of one Lease call
  // Give up (Run returns Unavailable) when the server cannot be reached for this long.
  int unreachable_timeout_ms = 30000;
  // Sent as `authorization: Bearer TOKEN` with every call when set (a `worker` role token).
  std::optional<std::string> token;
  // CPU priority (nice, 0..19) of the measuring threads: simulation is batch work, so on a
  // machine it shares with a server (or in embedded mode) the API's threads come first. The
  // simulated times do not depend on it. 0 leaves them at the process's priority.
  int measure_nice = 10;
};

class Agent {
 public:
  // Validates the options (threads > 0, known targets). Does not contact the server yet.
  static absl::StatusOr<std::unique_ptr<Agent>> Create(std::shared_ptr<grpc::Channel> channel,
                                                       const AgentOptions& options);
  ~Agent();  // Stop() and join
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Registers and serves trials until Stop(). Returns OK after Stop(), Unavailable when the server
  // stayed unreachable for unreachable_timeout_ms. Trials in progress at Stop() are finished and
  // reported first when the server answers, so no measurement is thrown away; trials leased ahead
  // and not started are handed back (reported CANCELLED: not charged, measured again elsewhere).
  absl::Status Run();
  // Asks Run() to return. Thread-safe; may be called before Run().
  void Stop();

 private:
  class Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Measures one trial as a worker would, without a server: lowers, simulates warmup + repeats
// times, takes the median and verifies per policy. Never fails: problems become the result's
// status (INVALID_CONFIG, WRONG_ANSWER, RUNTIME_ERROR) with a message.
// With `cancel` set and true, a running simulation stops and the result is CANCELLED.
tessel::v1::TrialResult MeasureTrial(const tessel::v1::TrialSpec& spec,
                                     const std::atomic<bool>* cancel = nullptr);

}  // namespace tessel::worker

#endif  // TESSEL_WORKER_AGENT_H_
