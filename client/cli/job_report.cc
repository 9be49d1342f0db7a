#include "client/cli/job_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>

#include "client/cli/common.h"
#include "fmt/format.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

json MeasurementJson(const v1::Measurement& m, bool present) {
  if (!present) return nullptr;
  return {{"config", m.config()}, {"time_ns", m.time_ns()}, {"trial_id", m.trial_id()}};
}

}  // namespace

json JobJson(const v1::Job& job) {
  const bool has_best = job.has_best() && job.best().time_ns() > 0;
  const bool has_default = job.has_default_config() && job.default_config().time_ns() > 0;
  json out = {
      {"job_id", job.id()},
      {"kernel", job.workload().kernel()},
      {"shape", ShapeOf(job.workload())},
      {"dtype", job.workload().dtype()},
      {"target", job.workload().target()},
      {"strategy", job.strategy()},
      {"budget", job.budget()},
      {"seed", job.seed()},
      {"state", client::JobStateName(job.state())},
      {"best", MeasurementJson(job.best(), has_best)},
      {"default", MeasurementJson(job.default_config(), has_default)},
      {"roofline_ns", job.roofline_ns()},
      {"trials",
       {{"total", job.trials().total()},
        {"ok", job.trials().ok()},
        {"invalid", job.trials().invalid()},
        {"failed", job.trials().failed()},
        {"pending", job.trials().pending()},
        {"retried", job.trials().retried()}}},
      {"stale", job.stale()},
      {"effort", job.effort().empty() ? json(nullptr) : json(job.effort())},
      {"time_limit_s", job.time_limit_s() > 0 ? json(job.time_limit_s()) : json(nullptr)},
      {"stop_after_no_improvement",
       job.stop_after_no_improvement() > 0 ? json(job.stop_after_no_improvement()) : json(nullptr)},
      {"stopped_by", job.stopped_by().empty() ? json(nullptr) : json(job.stopped_by())},
      {"model", job.model().empty() ? json(nullptr) : json(job.model())},
  };
  if (job.has_default_config() && !has_default) {
    out["default"] = {{"config", job.default_config().config()}, {"time_ns", nullptr}};
  }
  out["speedup_vs_default"] = has_best && has_default
                                  ? json(job.default_config().time_ns() / job.best().time_ns())
                                  : json(nullptr);
  out["roofline_fraction"] = has_best && job.roofline_ns() > 0
                                 ? json(job.roofline_ns() / job.best().time_ns())
                                 : json(nullptr);
  if (!job.message().empty()) out["message"] = job.message();
  return out;
}

void PrintTuneSummary(const v1::Job& job) {
  json j = JobJson(job);
  std::cout << fmt::format(
      "job {} {}: {} {} {} on {} ({} strategy, {} trials: {} ok, {} invalid, "
      "{} failed)\n",
      job.id(), client::JobStateName(job.state()), job.workload().kernel(), ShapeOf(job.workload()),
      job.workload().dtype(), job.workload().target(), job.strategy(), job.trials().total(),
      job.trials().ok(), job.trials().invalid(), job.trials().failed());
  if (!job.message().empty()) std::cout << "  message:  " << Shown(job.message(), 512) << "\n";
  if (!job.stopped_by().empty()) {
    std::cout << fmt::format(
        "  stopped by: {}{}{}\n", job.stopped_by(),
        job.effort().empty() ? "" : fmt::format(" (effort {})", job.effort()),
        job.time_limit_s() > 0 ? fmt::format(", time limit {} s", job.time_limit_s()) : "");
  }
  if (!j["best"].is_null()) {
    std::cout << fmt::format("  best:     {}  {}\n", HumanTime(job.best().time_ns()),
                             job.best().config());
  } else {
    std::cout << "  best:     none (no trial succeeded)\n";
  }
  if (!j["default"].is_null() && !j["default"]["time_ns"].is_null()) {
    std::cout << fmt::format("  default:  {}  {}\n", HumanTime(job.default_config().time_ns()),
                             job.default_config().config());
  }
  if (!j["speedup_vs_default"].is_null()) {
    std::cout << fmt::format("  speedup vs default: {:.2f}x\n",
                             j["speedup_vs_default"].get<double>());
  }
  if (!j["roofline_fraction"].is_null()) {
    std::cout << fmt::format("  roofline: {} bound; best reaches {:.1f}% of it\n",
                             HumanTime(job.roofline_ns()),
                             100 * j["roofline_fraction"].get<double>());
  }
  std::cout.flush();
}

ProgressPrinter::ProgressPrinter(bool enabled) : enabled_(enabled) {
  const char* term = std::getenv("TERM");
  tty_ = isatty(STDERR_FILENO) == 1 && (term == nullptr || std::string_view(term) != "dumb");
}

void ProgressPrinter::Bar(const v1::Job& job, bool final) {
  const auto now = std::chrono::steady_clock::now();
  if (first_total_ < 0) first_total_ = job.trials().total(), first_seen_ = now;
  if (!final && now - last_print_ < std::chrono::milliseconds(100)) return;
  last_print_ = now;
  const int64_t total = job.trials().total();
  const int64_t budget = std::max<int64_t>(1, job.budget());
  constexpr int kWidth = 24;
  const int filled = int(std::min<int64_t>(kWidth, total * kWidth / budget));
  std::string line = fmt::format("job {} [{}{}] {}/{} trials", job.id(), std::string(filled, '#'),
                                 std::string(kWidth - filled, '-'), total, job.budget());
  const bool has_best = job.has_best() && job.best().time_ns() > 0;
  if (has_best) {
    line += fmt::format("  best {}", HumanTime(job.best().time_ns()));
    if (job.has_default_config() && job.default_config().time_ns() > 0) {
      line +=
          fmt::format(" ({:.2f}x default)", job.default_config().time_ns() / job.best().time_ns());
    }
  }
  const double seconds = std::chrono::duration<double>(now - first_seen_).count();
  const int64_t done = total - first_total_;
  if (done > 0 && seconds > (final ? 0.0 : 0.5)) {
    const double rate = done / seconds;
    line += fmt::format("  {:.1f} trials/s", rate);
    if (!final && total < job.budget()) {
      line += fmt::format("  ETA {}", HumanTime((job.budget() - total) / rate * 1e9));
    }
  }
  if (final) line += "  " + client::JobStateName(job.state());
  if (!job.paused().empty()) line += " PAUSED: " + Shown(job.paused(), 120);
  // \r and erase-to-end-of-line redraw in place (cursor control, not colour: NO_COLOR keeps it).
  std::fprintf(stderr, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

void ProgressPrinter::Update(const v1::Job& job) {
  if (!enabled_) return;
  if (tty_) {
    Bar(job, client::IsFinalState(job.state()));
    return;
  }
  const v1::TrialCounts& t = job.trials();
  std::string line = fmt::format(
      "job {} {}: {}/{} trials ({} ok, {} invalid, {} failed){}{}", job.id(),
      client::JobStateName(job.state()), t.total(), job.budget(), t.ok(), t.invalid(), t.failed(),
      job.has_best() && job.best().time_ns() > 0
          ? fmt::format(", best {}", HumanTime(job.best().time_ns()))
          : "",
      job.paused().empty() ? "" : " PAUSED: " + Shown(job.paused(), 300));
  auto now = std::chrono::steady_clock::now();
  if (line == last_line_) return;
  if (!client::IsFinalState(job.state()) && now - last_print_ < std::chrono::milliseconds(250)) {
    return;
  }
  last_line_ = line;
  last_print_ = now;
  std::fprintf(stderr, "%s\n", line.c_str());
}

absl::StatusOr<v1::Job> SubmitAndWatch(client::Client& client, const v1::SubmitJobRequest& request,
                                       bool progress, int64_t existing_job, bool stop_when_paused) {
  absl::StatusOr<v1::Job> job =
      existing_job > 0 ? client.GetJob(existing_job) : client.SubmitJob(request);
  if (!job.ok()) return job.status();
  if (job->attached() && progress) {
    std::fprintf(stderr,
                 "job %lld is already tuning this workload: following it (--new-job starts "
                 "another)\n",
                 static_cast<long long>(job->id()));
  }
  if (client::IsFinalState(job->state())) return job;
  auto paused = [&](const v1::Job& j) -> absl::Status {
    return absl::ResourceExhaustedError(StrCat("job ", j.id(),
                                               " is paused: ", Shown(j.paused(), 300),
                                               ". Nothing measured is lost; `tessel watch ", j.id(),
                                               "` follows it once the server can write again"));
  };
  if (stop_when_paused && !job->paused().empty()) return paused(*job);
  ProgressPrinter printer(progress);
  printer.Update(*job);
  std::optional<v1::Job> paused_job;
  absl::StatusOr<v1::Job> last = client.WatchJob(job->id(), [&](const v1::JobEvent& event) {
    printer.Update(event.job());
    if (stop_when_paused && !event.job().paused().empty()) {
      paused_job = event.job();
      return false;
    }
    return true;
  });
  if (paused_job) return paused(*paused_job);
  if (!last.ok()) return last.status();
  if (!client::IsFinalState(last->state())) {
    // The stream ended early (e.g. the server is shutting down): ask once more.
    absl::StatusOr<v1::Job> now = client.GetJob(job->id());
    if (!now.ok()) return now.status();
    if (!client::IsFinalState(now->state())) {
      return absl::UnavailableError(StrCat("lost track of job ", job->id(), " while it was ",
                                           client::JobStateName(now->state())));
    }
    return now;
  }
  return last;
}

}  // namespace tessel::cli
