// The statistics of the measurement protocol, in one place for the worker that measures a trial
// and the server that checks what a worker reports (DESIGN.md "Trial status").
#ifndef TESSEL_SCHEMA_MEASUREMENT_H_
#define TESSEL_SCHEMA_MEASUREMENT_H_

#include <vector>

namespace tessel {

// Median of `samples` (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> samples);

// How many standard deviations of simulated run-to-run noise a sample may fall below its
// noiseless time before it is implausible (a Gaussian tail beyond 6 sigma has probability
// ~1e-9).
inline constexpr double kPlausibleNoiseSigmas = 6;

// The lowest plausible ratio of a measured sample to the noiseless time of the same run, with
// relative noise `noise_sigma` (the simulator's time * max(0.5, 1 + sigma * N(0, 1))): 1 without
// noise, else max(0.5, 1 - kPlausibleNoiseSigmas * noise_sigma).
double PlausibleNoiseFloor(double noise_sigma);

// True when two medians of `repeats` samples each, of the same config with relative noise
// `noise_sigma`, are close enough to be measurements of one time: equal up to rounding without
// noise; else within kPlausibleNoiseSigmas standard deviations of the difference of two medians
// (a median's sigma ~ 1.2533 * sigma / sqrt(repeats)), at most a factor of 2 apart.
bool MediansAgree(double a_ns, double b_ns, double noise_sigma, int repeats);

// Sample standard deviation of `samples` over their median; 0 for fewer than 2 samples.
double RelativeSpread(const std::vector<double>& samples);

// A time estimated from repeated samples: their median, and the half-width of the 95%
// confidence interval of the time (1.96 standard errors of a median, ~1.2533 * sd / sqrt(n)).
struct TimeEstimate {
  double median_ns = 0;
  double ci_ns = 0;
  int samples = 0;
};
TimeEstimate EstimateTime(const std::vector<double>& samples);

// Where samples lie, for comparing configs: the mean after dropping kTrimFraction of the samples
// at each end (robust to an occasional slow run, and for Gaussian noise nearly as efficient as the
// mean, where a median is ~64% as efficient), and its standard error (Tukey-McLaughlin: the
// winsorized standard deviation / ((1 - 2 * kTrimFraction) * sqrt(n))).
inline constexpr double kTrimFraction = 0.1;
struct Location {
  double mean_ns = 0;
  double se_ns = 0;
};
Location TrimmedMean(std::vector<double> samples);

// Racing by successive elimination: which of several configs are still in the race, given the
// locations of their samples. A config leaves when the 95% confidence interval of its trimmed
// mean lies wholly above the one of the config with the lowest trimmed mean.
std::vector<bool> StillRacing(const std::vector<Location>& locations);

}  // namespace tessel

#endif  // TESSEL_SCHEMA_MEASUREMENT_H_
