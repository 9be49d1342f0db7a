#include "schema/measurement.h"

#include <algorithm>

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

}  // namespace tessel
