// SimResult as JSON (sim/result_json.h).
#include "sim/result_json.h"

#include <string>

namespace tessel::sim {

nlohmann::json ResultJson(const SimResult& result) {
  nlohmann::json out;
  out["ticks"] = result.ticks;
  out["tensor_cycles"] = result.tensor_cycles;
  nlohmann::json engines = nlohmann::json::object();
  for (int i = 0; i < kNumEngines; ++i) {
    const EngineStats& engine = result.engines[i];
    engines[std::string(EngineName(static_cast<EngineKind>(i)))] = {
        {"busy_frac", engine.busy_frac},
        {"busy_ticks", engine.busy_ticks},
        {"instructions", engine.instructions}};
  }
  out["engines"] = std::move(engines);
  out["hbm_bytes"] = result.hbm_bytes;
  out["sbuf_peak_bytes"] = result.sbuf_peak_bytes;
  out["psum_peak_bytes"] = result.psum_peak_bytes;
  out["roofline_ns"] = result.roofline_ns;
  out["issued_roofline_ns"] = result.issued_roofline_ns;
  out["bound"] = result.bound;
  nlohmann::json busiest = nlohmann::json::array();
  for (const SimResult::Busy& busy : result.busiest) {
    if (busy.busy_frac <= 0) continue;
    busiest.push_back(
        {{"resource", std::string(EngineName(busy.resource))}, {"busy_frac", busy.busy_frac}});
  }
  out["busiest"] = std::move(busiest);
  return out;
}

}  // namespace tessel::sim
