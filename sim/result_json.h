// A simulation's result as JSON: the one spelling of SimResult's fields that the worker's stored
// trial statistics and the CLI's `simulate --json` share (names are a contract with scripts, see
// DESIGN.md "CLI contract").
#ifndef TESSEL_SIM_RESULT_JSON_H_
#define TESSEL_SIM_RESULT_JSON_H_

#include "nlohmann/json.hpp"
#include "sim/api.h"

namespace tessel::sim {

// {"ticks", "tensor_cycles", "engines": {"<tensor|vector|scalar|gpsimd|dma>": {"busy_frac",
// "busy_ticks", "instructions"}}, "hbm_bytes", "sbuf_peak_bytes", "psum_peak_bytes",
// "roofline_ns", "issued_roofline_ns", "bound", "busiest": [{"resource", "busy_frac"}]}. time_ns is
// left to the caller (a measurement may report a median).
nlohmann::json ResultJson(const SimResult& result);

}  // namespace tessel::sim

#endif  // TESSEL_SIM_RESULT_JSON_H_
