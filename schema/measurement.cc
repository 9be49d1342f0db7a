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

}  // namespace tessel
