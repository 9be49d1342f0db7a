#include "schema/measurement.h"

#include <algorithm>
#include <cmath>

namespace tessel {

double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + mid, samples.end());
  double upper = samples[mid];
  if (samples.size() % 2 == 1) return upper;
  double lower = *std::max_element(samples.begin(), samples.begin() + mid);
  return (lower + upper) / 2;
}

double PlausibleNoiseFloor(double noise_sigma) {
  if (noise_sigma <= 0) return 1;
  return std::max(0.5, 1 - kPlausibleNoiseSigmas * noise_sigma);
}

bool MediansAgree(double a_ns, double b_ns, double noise_sigma, int repeats) {
  if (!(a_ns > 0) || !(b_ns > 0)) return false;
  const double relative_difference = std::abs(a_ns - b_ns) / std::min(a_ns, b_ns);
  if (noise_sigma <= 0) return relative_difference <= 1e-9;
  const double median_sigma = 1.2533 * noise_sigma / std::sqrt(std::max(1, repeats));
  const double tolerance = std::min(1.0, kPlausibleNoiseSigmas * std::sqrt(2.0) * median_sigma);
  return relative_difference <= tolerance;
}

namespace {

double StandardDeviation(const std::vector<double>& samples) {
  if (samples.size() < 2) return 0;
  double mean = 0;
  for (double x : samples) mean += x;
  mean /= static_cast<double>(samples.size());
  double squares = 0;
  for (double x : samples) squares += (x - mean) * (x - mean);
  return std::sqrt(squares / static_cast<double>(samples.size() - 1));
}

}  // namespace

double RelativeSpread(const std::vector<double>& samples) {
  const double median = Median(samples);
  return median > 0 ? StandardDeviation(samples) / median : 0;
}

TimeEstimate EstimateTime(const std::vector<double>& samples) {
  TimeEstimate estimate;
  estimate.median_ns = Median(samples);
  estimate.samples = static_cast<int>(samples.size());
  if (!samples.empty()) {
    estimate.ci_ns =
        1.96 * 1.2533 * StandardDeviation(samples) / std::sqrt(static_cast<double>(samples.size()));
  }
  return estimate;
}

Location TrimmedMean(std::vector<double> samples) {
  Location location;
  const size_t n = samples.size();
  if (n == 0) return location;
  std::sort(samples.begin(), samples.end());
  const size_t cut = static_cast<size_t>(kTrimFraction * static_cast<double>(n));
  double sum = 0;
  for (size_t i = cut; i < n - cut; ++i) sum += samples[i];
  location.mean_ns = sum / static_cast<double>(n - 2 * cut);
  if (n < 2) return location;
  // Winsorized: the trimmed samples replaced by the nearest kept one.
  std::vector<double> winsorized(samples);
  for (size_t i = 0; i < cut; ++i) {
    winsorized[i] = samples[cut];
    winsorized[n - 1 - i] = samples[n - 1 - cut];
  }
  const double kept = static_cast<double>(n - 2 * cut) / static_cast<double>(n);
  location.se_ns = StandardDeviation(winsorized) / (kept * std::sqrt(static_cast<double>(n)));
  return location;
}

std::vector<bool> StillRacing(const std::vector<Location>& locations) {
  constexpr double kZ = 1.96;
  std::vector<bool> racing(locations.size(), true);
  if (locations.empty()) return racing;
  const Location& leader =
      *std::min_element(locations.begin(), locations.end(),
                        [](const Location& a, const Location& b) { return a.mean_ns < b.mean_ns; });
  const double leader_upper = leader.mean_ns + kZ * leader.se_ns;
  for (size_t i = 0; i < locations.size(); ++i) {
    racing[i] = locations[i].mean_ns - kZ * locations[i].se_ns <= leader_upper;
  }
  return racing;
}

}  // namespace tessel
