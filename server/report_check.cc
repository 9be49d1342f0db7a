#include "server/report_check.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fmt/format.h"
#include "schema/measurement.h"
#include "schema/vocab.h"

namespace tessel::server {
namespace {

// Rounding slack of the comparisons: the worker computes the same median in the same way, and
// the simulator's time is a sum of exact ticks, so only the last bits may differ.
constexpr double kRelativeSlack = 1e-9;

bool FinitePositive(double value) { return std::isfinite(value) && value > 0; }

}  // namespace

std::optional<std::string> ImplausibleTime(double time_ns, double roofline_ns, double noise_sigma,
                                           const std::string& what) {
  if (!FinitePositive(time_ns)) {
    return fmt::format("{} ({}) is not a finite positive number", what, time_ns);
  }
  const double floor_ns = roofline_ns * PlausibleNoiseFloor(noise_sigma) * (1 - kRelativeSlack);
  if (roofline_ns > 0 && time_ns < floor_ns) {
    return fmt::format("{} of {} ns beats the workload's roofline of {} ns", what, time_ns,
                       roofline_ns);
  }
  return std::nullopt;
}

std::optional<std::string> ImplausibleReport(const v1::TrialResult& result, double roofline_ns,
                                             double noise_sigma) {
  const std::optional<TrialStatus> status = TrialStatusFromProto(result.status());
  if (!status) return fmt::format("unknown trial status {}", static_cast<int>(result.status()));
  if (*status != TrialStatus::kOk) return std::nullopt;
  if (result.samples_ns().empty()) return std::string("an OK result without samples");
  if (!FinitePositive(result.time_ns())) {
    return fmt::format("time_ns {} is not a finite positive number", result.time_ns());
  }
  const std::vector<double> samples(result.samples_ns().begin(), result.samples_ns().end());
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!FinitePositive(samples[i])) {
      return fmt::format("sample {} ({}) is not a finite positive number", i, samples[i]);
    }
  }
  const double median = Median(samples);
  if (std::abs(result.time_ns() - median) > kRelativeSlack * median) {
    return fmt::format("time_ns {} is not the median of its samples ({})", result.time_ns(),
                       median);
  }
  // The fastest sample decides: the median is never faster.
  return ImplausibleTime(*std::min_element(samples.begin(), samples.end()), roofline_ns,
                         noise_sigma, "a sample");
}

}  // namespace tessel::server
