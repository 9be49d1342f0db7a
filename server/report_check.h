// What the server accepts from a worker's report of one trial. A worker's word is not trusted:
// a report that no honest measurement on the simulator could produce counts as RUNTIME_ERROR
// with the reason, never as OK (issue 15).
#ifndef TESSEL_SERVER_REPORT_CHECK_H_
#define TESSEL_SERVER_REPORT_CHECK_H_

#include <optional>
#include <string>

#include "schema/tessel.pb.h"

namespace tessel::server {

// Why `result` cannot count as reported; nullopt when it can. A report is implausible when
//   - its status is not one this build knows;
//   - it is OK without samples, or with a time or a sample that is not a finite positive number;
//   - its time is not the median of its samples (schema/measurement.h);
//   - a sample or its time beats the workload's roofline `roofline_ns` (the simulator never
//     does), allowing for the protocol's noise `noise_sigma` (PlausibleNoiseFloor).
// A roofline of 0 (unknown) skips that check. Non-OK results carry no time and pass.
std::optional<std::string> ImplausibleReport(const v1::TrialResult& result, double roofline_ns,
                                             double noise_sigma);

// Why `time_ns` cannot be a measured time of a workload whose roofline is `roofline_ns` (0:
// unknown), with relative noise `noise_sigma`: not a finite positive number, or faster than the
// roofline allows (PlausibleNoiseFloor). nullopt when it can. `what` names it in the reason.
// The one roofline rule, for reports and for imported results alike.
std::optional<std::string> ImplausibleTime(double time_ns, double roofline_ns, double noise_sigma,
                                           const std::string& what);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_REPORT_CHECK_H_
