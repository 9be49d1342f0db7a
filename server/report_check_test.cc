#include "server/report_check.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

constexpr double kRoofline = 1000;

v1::TrialResult Ok(std::vector<double> samples, double time_ns) {
  v1::TrialResult result;
  result.set_status(v1::TRIAL_OK);
  result.set_time_ns(time_ns);
  for (double s : samples) result.add_samples_ns(s);
  return result;
}

TEST(ImplausibleReportTest, AnHonestMeasurementPasses) {
  EXPECT_EQ(ImplausibleReport(Ok({1500}, 1500), kRoofline, 0), std::nullopt);
  EXPECT_EQ(ImplausibleReport(Ok({1200, 1100, 1300, 1250}, 1225), kRoofline, 0), std::nullopt);
  EXPECT_EQ(ImplausibleReport(Ok({kRoofline}, kRoofline), kRoofline, 0), std::nullopt);
}

TEST(ImplausibleReportTest, ATimeBelowTheRooflineIsRejected) {
  EXPECT_THAT(ImplausibleReport(Ok({1}, 1), kRoofline, 0),
              Optional(HasSubstr("beats the workload's roofline of 1000 ns")));
  EXPECT_THAT(ImplausibleReport(Ok({999}, 999), kRoofline, 0), Optional(HasSubstr("roofline")));
  // One fast sample is enough, even when the median is plausible.
  EXPECT_THAT(ImplausibleReport(Ok({2000, 10, 2000}, 2000), kRoofline, 0),
              Optional(HasSubstr("a sample of 10 ns")));
}

TEST(ImplausibleReportTest, NoiseWidensTheFloorBySixSigma) {
  // sigma 0.05: samples down to 0.7 x roofline are plausible, below are not.
  EXPECT_EQ(ImplausibleReport(Ok({710}, 710), kRoofline, 0.05), std::nullopt);
  EXPECT_THAT(ImplausibleReport(Ok({690}, 690), kRoofline, 0.05), Optional(HasSubstr("roofline")));
}

TEST(ImplausibleReportTest, AnUnknownRooflineSkipsOnlyThatCheck) {
  EXPECT_EQ(ImplausibleReport(Ok({1}, 1), 0, 0), std::nullopt);
  EXPECT_THAT(ImplausibleReport(Ok({1, 3}, 1), 0, 0), Optional(HasSubstr("median")));
}

TEST(ImplausibleReportTest, TimesThatAreNotFinitePositiveNumbersAreRejected) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {nan, inf, 0.0, -100.0}) {
    EXPECT_THAT(ImplausibleReport(Ok({1500}, bad), kRoofline, 0),
                Optional(HasSubstr("is not a finite positive number")))
        << bad;
    EXPECT_THAT(ImplausibleReport(Ok({1500, bad, 1500}, 1500), kRoofline, 0),
                Optional(HasSubstr("sample 1")))
        << bad;
  }
}

TEST(ImplausibleReportTest, TheTimeMustBeTheMedianOfItsSamples) {
  EXPECT_THAT(ImplausibleReport(Ok({}, 1500), kRoofline, 0),
              Optional(HasSubstr("without samples")));
  EXPECT_THAT(ImplausibleReport(Ok({3000, 3000, 3000}, 1500), kRoofline, 0),
              Optional(HasSubstr("time_ns 1500 is not the median of its samples (3000)")));
}

TEST(ImplausibleReportTest, UnknownStatusesAreRejectedAndFailuresPass) {
  v1::TrialResult unknown;
  unknown.set_status(static_cast<v1::TrialStatus>(77));
  EXPECT_THAT(ImplausibleReport(unknown, kRoofline, 0), Optional(HasSubstr("status 77")));
  v1::TrialResult unspecified;
  EXPECT_THAT(ImplausibleReport(unspecified, kRoofline, 0), Optional(HasSubstr("status 0")));
  v1::TrialResult failed;
  failed.set_status(v1::TRIAL_WRONG_ANSWER);
  EXPECT_EQ(ImplausibleReport(failed, kRoofline, 0), std::nullopt);
}

}  // namespace
}  // namespace tessel::server
