#include "worker/agent.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/credentials.h"
#include "schema/key.h"
#include "schema/measurement.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/tessel.grpc.pb.h"
#include "schema/vocab.h"
#include "sim/api.h"
#include "sim/target.h"
#include "spdlog/spdlog.h"
#include "worker/measure.h"

namespace tessel::worker {
namespace {

namespace v1 = tessel::v1;
using Clock = std::chrono::steady_clock;

// Deadline of Register, Report and Heartbeat calls.
constexpr int kCallTimeoutMs = 5000;
// Extra time a Lease call gets beyond the long-poll length.
constexpr int kLeaseMarginMs = 5000;
// Retry backoff after a failed call: doubles from the first to the last value.
constexpr std::chrono::milliseconds kFirstBackoff(100);
constexpr std::chrono::milliseconds kMaxBackoff(2000);
// A batch of results the server keeps refusing (e.g. its disk is full) is dropped after this
// long, with an error in the log; the server re-runs those trials when their leases expire.
constexpr std::chrono::minutes kReportGiveUp(10);
// A worker leases ahead enough trials to keep each slot busy this long: a Report's round trip,
// its commit included, while the trials that replace the reported ones are on their way.
constexpr double kLeaseAheadMs = 10;
// What a trial is assumed to take until the first one is measured.
constexpr double kFirstTrialMsGuess = 10;
// Results of short trials wait up to kReportLinger for kReportBatchPerSlot per slot to share a
// Report call and its commit. Measured on bench/throughput with 2 worker processes: 0.48 of the
// bare simulator's rate reporting each result at once, 0.55 with this (BENCHMARKS.md).
constexpr std::chrono::milliseconds kReportLinger(2);
constexpr int kReportBatchPerSlot = 4;

// `backoff` spread by +-25% (from the clock's low bits), so workers refused together do not
// retry together.
std::chrono::milliseconds Jittered(std::chrono::milliseconds backoff) {
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  const double spread = 0.75 + 0.5 * double(uint64_t(ticks) % 1024) / 1024.0;
  return std::chrono::milliseconds(int64_t(double(backoff.count()) * spread));
}
// Results sent in one Report call.
constexpr size_t kMaxResultsPerReport = 64;

v1::TrialResult Fail(v1::TrialResult result, v1::TrialStatus status, std::string message) {
  result.set_status(status);
  result.set_message(std::move(message));
  result.set_time_ns(0);
  return result;
}

// Maps a failure of Lower/Simulate/Verify to a trial status: the kernel says InvalidArgument for a
// config its constraints reject and DataLoss for a wrong answer; anything else is a runtime error.
v1::TrialStatus StatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return v1::TRIAL_INVALID_CONFIG;
    case absl::StatusCode::kDataLoss:
      return v1::TRIAL_WRONG_ANSWER;
    default:
      return v1::TRIAL_RUNTIME_ERROR;
  }
}

v1::TrialResult MeasureOrFail(const v1::TrialSpec& spec, const std::atomic<bool>* cancel) {
  v1::TrialResult result;
  result.set_trial_id(spec.trial_id());
  result.set_config(spec.config());

  // An unknown kernel or target, or a problem the kernel rejects, is not the config's fault.
  absl::StatusOr<kernels::ResolvedWorkload> workload = kernels::Resolve(spec.workload());
  if (!workload.ok()) {
    return Fail(std::move(result), v1::TRIAL_RUNTIME_ERROR,
                StrCat("invalid workload: ", std::string(workload.status().message())));
  }
  const kernels::Kernel* kernel = workload->kernel;
  const kernels::Problem& problem = workload->problem;
  const sim::Target& target = workload->target;
  absl::StatusOr<Config> config = Config::Parse(spec.config());
  if (!config.ok()) {
    return Fail(std::move(result), v1::TRIAL_INVALID_CONFIG,
                std::string(config.status().message()));
  }

  const v1::MeasureProtocol& protocol = spec.protocol();
  const int warmup = std::max(0, protocol.warmup());
  const int repeats = std::max(1, protocol.repeats());
  const bool deterministic = protocol.noise_sigma() <= 0;
  std::optional<sim::SimResult> first_run;  // reused for every run when deterministic
  sim::SimResult kept;
  std::vector<double> samples;
  for (int run = 0; run < warmup + repeats; ++run) {
    sim::SimResult outcome;
    if (deterministic && first_run.has_value()) {
      outcome = *first_run;
    } else {
      sim::SimOptions options;
      options.noise_sigma = std::max(0.0, protocol.noise_sigma());
      options.seed = RunSeed(spec.seed(), run);
      options.cancel = cancel;
      absl::StatusOr<sim::SimResult> simulated =
          kernels::Evaluate(*kernel, problem, *config, target, options);
      if (absl::IsCancelled(simulated.status())) {
        return Fail(std::move(result), v1::TRIAL_CANCELLED, "cancelled by the server");
      }
      if (!simulated.ok()) {
        // Lower rejects an invalid config with InvalidArgument and its reason; anything else
        // is not the config's verdict.
        const absl::Status& error = simulated.status();
        if (absl::IsInvalidArgument(error)) {
          return Fail(std::move(result), v1::TRIAL_INVALID_CONFIG, std::string(error.message()));
        }
        return Fail(std::move(result), v1::TRIAL_RUNTIME_ERROR,
                    StrCat("simulation failed: ", error.ToString()));
      }
      outcome = *std::move(simulated);
      if (deterministic) first_run = outcome;
    }
    if (run >= warmup) {
      samples.push_back(outcome.time_ns);
      kept = outcome;
    }
  }
  for (double sample : samples) result.add_samples_ns(sample);
  result.set_bound(kept.bound);
  result.set_stats_json(StatsJson(kept));

  absl::StatusOr<bool> verify = ShouldVerify(protocol.verify(), spec.trial_id(), spec.seed());
  if (!verify.ok()) {
    // A policy this worker does not understand: verifying is the safe reading.
    spdlog::warn("trial {}: {}; verifying", spec.trial_id(),
                 std::string(verify.status().message()));
  }
  if (!verify.ok() || *verify) {
    absl::Status checked = kernel->Verify(problem, *config, target);
    if (!checked.ok()) {
      std::string message(checked.message());
      if (StatusFor(checked) == v1::TRIAL_RUNTIME_ERROR) {
        message = StrCat("verification failed: ", checked.ToString());
      }
      return Fail(std::move(result), StatusFor(checked), std::move(message));
    }
    result.set_verified(true);
  }
  result.set_status(v1::TRIAL_OK);
  result.set_time_ns(Median(std::move(samples)));
  return result;
}

// Sets the calling thread's nice value to `nice` once (Linux: a thread's own priority; failure,
// e.g. a lower value without privilege, leaves it as it was).
void LowerThisThreadsPriority(int nice) {
  thread_local bool done = false;
  if (done || nice <= 0) return;
  done = true;
  if (nice >= 19) {
    // The lowest: SCHED_IDLE runs only when no other thread of the machine wants the CPU.
    sched_param param{};
    if (sched_setscheduler(0, SCHED_IDLE, &param) == 0) return;
  }
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) != 0) {
    spdlog::debug("cannot set the measuring thread's nice value to {}", nice);
  }
}

std::string DefaultName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
  return StrCat(host, ":", getpid());
}

std::chrono::system_clock::time_point DeadlineAfterMs(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// Codes after which retrying the same call later may succeed.
bool IsTransient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::ABORTED ||
         code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN;
}

// Codes with which the server says it does not know this worker id.
bool IsUnknownWorker(grpc::StatusCode code) {
  return code == grpc::StatusCode::NOT_FOUND || code == grpc::StatusCode::FAILED_PRECONDITION;
}

}  // namespace

v1::TrialResult MeasureTrial(const v1::TrialSpec& spec, const std::atomic<bool>* cancel) {
  try {
    return MeasureOrFail(spec, cancel);
  } catch (const std::exception& e) {
    v1::TrialResult result;
    result.set_trial_id(spec.trial_id());
    result.set_config(spec.config());
    return Fail(std::move(result), v1::TRIAL_RUNTIME_ERROR,
                StrCat("exception while measuring: ", e.what()));
  } catch (...) {
    v1::TrialResult result;
    result.set_trial_id(spec.trial_id());
    result.set_config(spec.config());
    return Fail(std::move(result), v1::TRIAL_RUNTIME_ERROR, "unknown exception while measuring");
  }
}

// Threads: Run()'s caller registers and leases; a heartbeat thread and a reporter thread run beside
// it; trials are measured on pool_. Every member below mu_ is guarded by mu_.
class Agent::Impl {
 public:
  Impl(std::shared_ptr<grpc::Channel> channel, AgentOptions options)
      : stub_(v1::WorkerService::NewStub(channel)),
        options_(std::move(options)),
        pool_(static_cast<size_t>(options_.threads)) {
    if (options_.name.empty()) options_.name = DefaultName();
  }

  ~Impl() {
    Stop();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !run_active_; });
    // pool_'s destructor joins its threads; Run() already drained it when it ran.
  }

  absl::Status Run();

  void Stop() {
    stopping_.store(true);
    std::lock_guard lock(mu_);
    stop_ = true;
    if (active_call_ != nullptr) active_call_->TryCancel();
    NotifyAll();
  }

 private:
  // Registers, retrying transient failures until unreachable_timeout_ms. When `honor_stop`, gives
  // up with Cancelled as soon as Stop() was called.
  absl::Status Register(bool honor_stop);
  // Leases and dispatches trials until Stop(); Unavailable when the server stays unreachable.
  absl::Status LeaseLoop();
  void Dispatch(const v1::TrialSpec& spec);
  void ReportLoop();
  void HeartbeatLoop();
  // Sleeps `delay`, returning early (true) when Stop() was called.
  bool SleepUnlessStopped(std::chrono::milliseconds delay) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, delay, [&] { return stop_; });
  }

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  AgentOptions options_;
  boost::asio::thread_pool pool_;

  // Trials a worker holds: per slot, one running and enough ready to cover kLeaseAheadMs at the
  // recent trial time, 2 to kMaxLeaseDepthPerSlot. It leases again when half are measured, so
  // each Lease call fetches a batch.
  // With mu_ held.
  int LeaseDepth() const {
    const int ahead = static_cast<int>(std::ceil(kLeaseAheadMs / std::max(trial_ms_, 1e-3)));
    return std::clamp(1 + ahead, 2, kMaxLeaseDepthPerSlot) * options_.threads;
  }
  int LeaseBelow() const { return LeaseDepth() / 2; }
  // Wakes every waiter (state changes that concern all loops: stop, register, drain).
  void NotifyAll() {
    cv_.notify_all();
    lease_cv_.notify_all();
    report_cv_.notify_all();
  }

  std::atomic<bool> stopping_{false};  // Stop() was called (read by measuring threads unlocked)
  std::mutex mu_;
  std::condition_variable cv_;         // run_active_, stop_ (sleeps), heartbeat_exit_
  std::condition_variable lease_cv_;   // LeaseLoop: in_flight_, need_register_, stop_
  std::condition_variable report_cv_;  // ReportLoop: outbox_, draining_
  bool stop_ = false;
  bool run_active_ = false;
  bool run_called_ = false;
  bool draining_ = false;  // Run is flushing the outbox before it returns
  Clock::time_point drain_deadline_;
  bool heartbeat_exit_ = false;
  bool need_register_ = false;
  std::string worker_id_;
  int heartbeat_interval_ms_ = 1000;
  grpc::ClientContext* active_call_ = nullptr;  // Register/Lease on Run's thread, for Stop()
  int in_flight_ = 0;                           // leased and not yet measured
  double trial_ms_ = kFirstTrialMsGuess;        // recent trials' wall time (moving average)
  std::set<int64_t> running_ids_;
  std::set<int64_t> cancelled_ids_;  // subset of running_ids_ the server cancelled
  // Per running trial: set when the server cancels it, so its simulation stops early.
  std::map<int64_t, std::shared_ptr<std::atomic<bool>>> cancel_flags_;
  std::deque<v1::TrialResult> outbox_;  // measured, not yet acknowledged by the server
};

absl::Status Agent::Impl::Register(bool honor_stop) {
  const Clock::time_point start = Clock::now();
  std::chrono::milliseconds backoff = kFirstBackoff;
  while (true) {
    v1::RegisterRequest request;
    request.set_name(options_.name);
    for (const std::string& target : options_.targets) request.add_targets(target);
    request.set_slots(options_.threads);
    v1::RegisterResponse response;
    grpc::ClientContext context;
    AddBearer(context, options_.token);
    context.set_deadline(DeadlineAfterMs(kCallTimeoutMs));
    {
      std::lock_guard lock(mu_);
      if (honor_stop && stop_) return absl::CancelledError("stopped");
      active_call_ = &context;
    }
    grpc::Status status = stub_->Register(&context, request, &response);
    {
      std::lock_guard lock(mu_);
      active_call_ = nullptr;
      if (status.ok()) {
        worker_id_ = response.worker_id();
        if (response.heartbeat_interval_ms() > 0) {
          heartbeat_interval_ms_ = response.heartbeat_interval_ms();
        }
        need_register_ = false;
        spdlog::info("registered as worker {} ({} slots, heartbeat every {} ms)", worker_id_,
                     options_.threads, heartbeat_interval_ms_);
        NotifyAll();
        return absl::OkStatus();
      }
      if (honor_stop && stop_) return absl::CancelledError("stopped");
    }
    if (!IsTransient(status.error_code())) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          StrCat("server refused registration: ", status.error_message()));
    }
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (waited.count() >= options_.unreachable_timeout_ms) {
      return absl::UnavailableError(
          StrCat("server did not answer for ", waited.count(), " ms: ", status.error_message()));
    }
    spdlog::warn("register failed ({}); retrying in {} ms", status.error_message(),
                 backoff.count());
    if (honor_stop) {
      if (SleepUnlessStopped(Jittered(backoff))) return absl::CancelledError("stopped");
    } else {
      std::this_thread::sleep_for(Jittered(backoff));
    }
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

void Agent::Impl::Dispatch(const v1::TrialSpec& spec) {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  {
    std::lock_guard lock(mu_);
    ++in_flight_;
    running_ids_.insert(spec.trial_id());
    cancel_flags_[spec.trial_id()] = cancel;
  }
  boost::asio::post(pool_, [this, spec, cancel] {
    LowerThisThreadsPriority(options_.measure_nice);
    v1::TrialResult result;
    std::optional<double> ms;  // how long measuring took, when it was measured
    if (stopping_.load()) {
      // Leased ahead and not started: handed back at once (not charged), not measured on the way
      // out, so stopping takes no longer than the trials already running.
      result.set_trial_id(spec.trial_id());
      result.set_config(spec.config());
      result =
          Fail(std::move(result), v1::TRIAL_CANCELLED, "the worker stopped before measuring it");
    } else if (!cancel->load()) {
      const Clock::time_point start = Clock::now();
      result = MeasureTrial(spec, cancel.get());
      ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    std::lock_guard lock(mu_);
    if (ms) trial_ms_ += 0.2 * (*ms - trial_ms_);
    --in_flight_;
    running_ids_.erase(spec.trial_id());
    cancel_flags_.erase(spec.trial_id());
    if (cancelled_ids_.erase(spec.trial_id()) > 0) {
      spdlog::info("trial {} was cancelled by the server; result not reported", spec.trial_id());
    } else {
      spdlog::debug("trial {} measured: {} {}", spec.trial_id(), static_cast<int>(result.status()),
                    result.time_ns());
      outbox_.push_back(std::move(result));
      report_cv_.notify_one();
    }
    if (in_flight_ <= LeaseBelow()) lease_cv_.notify_one();
  });
}

absl::Status Agent::Impl::LeaseLoop() {
  bool reachable = true;  // false from the first failed call until a call succeeds
  Clock::time_point unreachable_since;
  std::chrono::milliseconds backoff = kFirstBackoff;
  while (true) {
    int slots = 0;
    bool reregister = false;
    std::string worker_id;
    {
      std::unique_lock lock(mu_);
      lease_cv_.wait(lock, [&] { return stop_ || need_register_ || in_flight_ <= LeaseBelow(); });
      if (stop_) return absl::OkStatus();
      reregister = need_register_;
      slots = std::min(LeaseDepth() - in_flight_, kMaxTrialsPerLease);
      worker_id = worker_id_;
    }
    if (reregister) {
      spdlog::warn("server does not know worker {}; registering again", worker_id);
      absl::Status registered = Register(/*honor_stop=*/true);
      if (absl::IsCancelled(registered)) return absl::OkStatus();
      if (!registered.ok()) return registered;
      continue;
    }
    v1::LeaseRequest request;
    request.set_worker_id(worker_id);
    request.set_max_trials(slots);
    request.set_wait_ms(options_.lease_wait_ms);
    v1::LeaseResponse response;
    grpc::ClientContext context;
    AddBearer(context, options_.token);
    context.set_deadline(DeadlineAfterMs(options_.lease_wait_ms + kLeaseMarginMs));
    {
      std::lock_guard lock(mu_);
      if (stop_) return absl::OkStatus();
      active_call_ = &context;
    }
    grpc::Status status = stub_->Lease(&context, request, &response);
    {
      std::lock_guard lock(mu_);
      active_call_ = nullptr;
    }
    // Trials leased by a call that completed, even after Stop(), are reported (measured, or handed
    // back when Stop() came first).
    if (status.ok()) {
      reachable = true;
      backoff = kFirstBackoff;
      for (const v1::TrialSpec& spec : response.trials()) Dispatch(spec);
      continue;
    }
    {
      std::lock_guard lock(mu_);
      if (stop_) return absl::OkStatus();
    }
    if (IsUnknownWorker(status.error_code())) {
      std::lock_guard lock(mu_);
      need_register_ = true;
      continue;
    }
    if (reachable) {
      reachable = false;
      unreachable_since = Clock::now();
    }
    auto down =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - unreachable_since);
    if (down.count() >= options_.unreachable_timeout_ms) {
      return absl::UnavailableError(
          StrCat("server unreachable for ", down.count(), " ms: ", status.error_message()));
    }
    spdlog::warn("lease failed ({}: {}); retrying in {} ms", static_cast<int>(status.error_code()),
                 status.error_message(), backoff.count());
    if (SleepUnlessStopped(Jittered(backoff))) return absl::OkStatus();
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

void Agent::Impl::ReportLoop() {
  std::chrono::milliseconds backoff = kFirstBackoff;
  // The current batch's first refusal; max() while the last report succeeded.
  Clock::time_point failing_since = Clock::time_point::max();
  while (true) {
    v1::ReportRequest request;
    size_t batch = 0;
    {
      std::unique_lock lock(mu_);
      report_cv_.wait(lock, [&] { return !outbox_.empty() || draining_; });
      // Short trials: a moment for the next results, so one call and one commit carry several
      // (the trials leased ahead keep the slots busy meanwhile).
      if (trial_ms_ * kReportBatchPerSlot < kLeaseAheadMs) {
        report_cv_.wait_for(lock, kReportLinger, [&] {
          return draining_ ||
                 outbox_.size() >= static_cast<size_t>(kReportBatchPerSlot * options_.threads);
        });
      }
      if (outbox_.empty()) return;  // draining and everything acknowledged
      if (draining_ && Clock::now() > drain_deadline_) {
        spdlog::error("server unreachable while stopping; {} measured results not reported",
                      outbox_.size());
        return;
      }
      request.set_worker_id(worker_id_);
      batch = std::min(outbox_.size(), kMaxResultsPerReport);
      for (size_t i = 0; i < batch; ++i) {
        v1::TrialResult* result = request.add_results();
        *result = outbox_[i];
        result->set_worker_id(worker_id_);
      }
    }
    v1::ReportResponse response;
    grpc::ClientContext context;
    AddBearer(context, options_.token);
    context.set_deadline(DeadlineAfterMs(kCallTimeoutMs));
    grpc::Status status = stub_->Report(&context, request, &response);
    if (status.ok()) {
      failing_since = Clock::time_point::max();
      std::lock_guard lock(mu_);
      outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(batch));
      if (response.ignored() > 0) {
        spdlog::info("server ignored {} of {} results (lease expired or trial unknown)",
                     response.ignored(), batch);
      }
      backoff = kFirstBackoff;
      continue;
    }
    if (IsUnknownWorker(status.error_code())) {
      bool draining;
      {
        std::lock_guard lock(mu_);
        draining = draining_;
        need_register_ = true;
        NotifyAll();
      }
      // While Run leases, its loop re-registers; while draining, nobody else will.
      if (draining && !Register(/*honor_stop=*/false).ok()) {
        std::this_thread::sleep_for(Jittered(backoff));
      }
    } else if (!IsTransient(status.error_code())) {
      std::lock_guard lock(mu_);
      spdlog::error("server rejected {} results ({}); dropping them", batch,
                    status.error_message());
      outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(batch));
      continue;
    } else {
      if (failing_since == Clock::time_point::max()) failing_since = Clock::now();
      if (Clock::now() - failing_since > kReportGiveUp) {
        std::lock_guard lock(mu_);
        spdlog::error(
            "server refused {} results for {} min ({}); dropping them: it re-runs "
            "their trials when the leases expire",
            batch, kReportGiveUp.count(), status.error_message());
        outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(batch));
        failing_since = Clock::time_point::max();
        continue;
      }
      spdlog::warn("report failed ({}); {} results kept, retrying in {} ms", status.error_message(),
                   batch, backoff.count());
    }
    std::this_thread::sleep_for(Jittered(backoff));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

void Agent::Impl::HeartbeatLoop() {
  while (true) {
    v1::HeartbeatRequest request;
    int interval_ms;
    {
      std::unique_lock lock(mu_);
      interval_ms = heartbeat_interval_ms_;
      if (cv_.wait_for(lock, std::chrono::milliseconds(interval_ms),
                       [&] { return heartbeat_exit_; })) {
        return;
      }
      request.set_worker_id(worker_id_);
      // Every trial it holds: queued or running, and measured but not yet acknowledged. The
      // server expires a lease the worker does not list (its reply was lost), so the trial runs
      // elsewhere at once; a result waiting in the outbox must keep its lease.
      for (int64_t id : running_ids_) request.add_running_trial_ids(id);
      for (const v1::TrialResult& result : outbox_)
        request.add_running_trial_ids(result.trial_id());
    }
    v1::HeartbeatResponse response;
    grpc::ClientContext context;
    AddBearer(context, options_.token);
    context.set_deadline(DeadlineAfterMs(std::max(interval_ms, kCallTimeoutMs)));
    grpc::Status status = stub_->Heartbeat(&context, request, &response);
    if (!status.ok()) {
      spdlog::debug("heartbeat failed: {}", status.error_message());
      continue;
    }
    std::lock_guard lock(mu_);
    if (!response.known() && request.worker_id() == worker_id_) need_register_ = true;
    for (int64_t id : response.cancelled_trial_ids()) {
      if (running_ids_.count(id) == 0) continue;
      cancelled_ids_.insert(id);
      if (auto flag = cancel_flags_.find(id); flag != cancel_flags_.end())
        flag->second->store(true);
    }
    NotifyAll();
  }
}

absl::Status Agent::Impl::Run() {
  {
    std::lock_guard lock(mu_);
    if (run_called_) return absl::FailedPreconditionError("Agent::Run may be called only once");
    run_called_ = true;
    run_active_ = true;
  }
  auto finish = [&](absl::Status status) {
    std::lock_guard lock(mu_);
    run_active_ = false;
    NotifyAll();
    return status;
  };
  absl::Status registered = Register(/*honor_stop=*/true);
  if (absl::IsCancelled(registered)) return finish(absl::OkStatus());
  if (!registered.ok()) return finish(registered);

  std::thread heartbeat([this] { HeartbeatLoop(); });
  std::thread reporter([this] { ReportLoop(); });
  absl::Status status = LeaseLoop();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    NotifyAll();
  }
  pool_.join();  // finishes the trials in progress; their results land in outbox_
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    drain_deadline_ = Clock::now() + std::chrono::milliseconds(options_.unreachable_timeout_ms);
    NotifyAll();
  }
  reporter.join();
  {
    std::lock_guard lock(mu_);
    heartbeat_exit_ = true;
    NotifyAll();
  }
  heartbeat.join();
  spdlog::info("worker {} stopped", worker_id_);
  return finish(status);
}

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(std::shared_ptr<grpc::Channel> channel,
                                                     const AgentOptions& options) {
  if (channel == nullptr) return absl::InvalidArgumentError("Agent needs a channel");
  if (options.threads <= 0) {
    return absl::InvalidArgumentError(StrCat("threads must be positive, got ", options.threads));
  }
  if (options.lease_wait_ms < 0 || options.unreachable_timeout_ms <= 0) {
    return absl::InvalidArgumentError("lease_wait_ms and unreachable_timeout_ms must be positive");
  }
  for (const std::string& target : options.targets) TESSEL_RETURN_IF_ERROR(sim::LoadTarget(target));
  return std::unique_ptr<Agent>(new Agent(std::make_unique<Impl>(std::move(channel), options)));
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;
absl::Status Agent::Run() { return impl_->Run(); }
void Agent::Stop() { impl_->Stop(); }

}  // namespace tessel::worker
