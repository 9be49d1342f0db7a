#include "sim/result_json.h"

#include "gtest/gtest.h"

namespace tessel::sim {
namespace {

TEST(ResultJsonTest, EveryFieldIsWrittenUnderItsContractName) {
  SimResult r;
  r.ticks = 1200;
  r.tensor_cycles = 600;
  r.engines[int(EngineKind::kTensor)] = {.busy_ticks = 900, .busy_frac = 0.75, .instructions = 8};
  r.engines[int(EngineKind::kDma)] = {.busy_ticks = 300, .busy_frac = 0.125, .instructions = 3};
  r.hbm_bytes = 4096;
  r.sbuf_peak_bytes = 2048;
  r.psum_peak_bytes = 512;
  r.roofline_ns = 250.5;
  r.issued_roofline_ns = 260.25;
  r.bound = "tensor";
  r.busiest[0] = {EngineKind::kTensor, 0.75};
  r.busiest[1] = {EngineKind::kDma, 0.125};
  const nlohmann::json j = ResultJson(r);
  EXPECT_EQ(j["ticks"], 1200);
  EXPECT_EQ(j["tensor_cycles"], 600);
  EXPECT_EQ(j["engines"]["tensor"]["busy_frac"], 0.75);
  EXPECT_EQ(j["engines"]["tensor"]["busy_ticks"], 900);
  EXPECT_EQ(j["engines"]["tensor"]["instructions"], 8);
  EXPECT_EQ(j["engines"]["dma"]["busy_frac"], 0.125);
  EXPECT_EQ(j["engines"]["vector"]["instructions"], 0);
  EXPECT_EQ(j["engines"].size(), 5u);
  EXPECT_EQ(j["hbm_bytes"], 4096);
  EXPECT_EQ(j["sbuf_peak_bytes"], 2048);
  EXPECT_EQ(j["psum_peak_bytes"], 512);
  EXPECT_EQ(j["roofline_ns"], 250.5);
  EXPECT_EQ(j["issued_roofline_ns"], 260.25);
  EXPECT_EQ(j["bound"], "tensor");
  ASSERT_EQ(j["busiest"].size(), 2u) << "unused entries are left out";
  EXPECT_EQ(j["busiest"][0]["resource"], "tensor");
  EXPECT_EQ(j["busiest"][1]["busy_frac"], 0.125);
  EXPECT_FALSE(j.contains("time_ns"));
}

}  // namespace
}  // namespace tessel::sim
