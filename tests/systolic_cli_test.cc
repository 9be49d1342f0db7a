// The systolic family through the real CLI: `tessel simulate matmul --target
// systolic-RxC-{ws,os,is}
// --json` (default config) must report `tensor_cycles` equal to SCALE-Sim v2's cycle counts
// (ACCELERATOR.md section 6): the reference table for a 128x128 array, and the closed form for
// seeded random GEMM sizes (many not multiples of the array) on several array sizes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

constexpr char kCliBin[] = TESSEL_CLI_BIN;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// SCALE-Sim v2's closed form (unlimited bandwidth), written independently of the simulator:
// ws/is: folds x (2R + C + T - 2) - 1; os: folds x (R + C + T - 2) - 1, with
// ws: rows = K, cols = N, T = M; is: rows = K, cols = M, T = N; os: rows = M, cols = N, T = K.
int64_t ClosedForm(const std::string& flow, int64_t rows_r, int64_t cols_c, int64_t m, int64_t n,
                   int64_t k) {
  int64_t rows_dim = 0, cols_dim = 0, t = 0;
  if (flow == "ws") {
    rows_dim = k, cols_dim = n, t = m;
  } else if (flow == "is") {
    rows_dim = k, cols_dim = m, t = n;
  } else {
    rows_dim = m, cols_dim = n, t = k;
  }
  const int64_t folds = CeilDiv(rows_dim, rows_r) * CeilDiv(cols_dim, cols_c);
  const int64_t per_fold = flow == "os" ? rows_r + cols_c + t - 2 : 2 * rows_r + cols_c + t - 2;
  return folds * per_fold - 1;
}

class SystolicCliTest : public ::testing::Test {
 protected:
  // tensor_cycles reported by the CLI for the default config, or -1 (with a test failure).
  int64_t TensorCycles(int64_t r, int64_t c, const std::string& flow, int64_t m, int64_t n,
                       int64_t k) {
    const std::string target =
        "systolic-" + std::to_string(r) + "x" + std::to_string(c) + "-" + flow;
    const std::string shape =
        "M=" + std::to_string(m) + ",N=" + std::to_string(n) + ",K=" + std::to_string(k);
    RunResult run = ::tessel::testing::Run(
        {kCliBin, "simulate", "matmul", "--shape", shape, "--target", target, "--json"}, dir_,
        std::chrono::seconds(30));
    if (run.exit_code != 0) {
      ADD_FAILURE() << target << " " << shape << ": exit " << run.exit_code << "\n" << run.err;
      return -1;
    }
    json out = json::parse(run.out, nullptr, /*allow_exceptions=*/false);
    if (out.is_discarded() || !out.contains("tensor_cycles")) {
      ADD_FAILURE() << target << " " << shape << ": no tensor_cycles in\n" << run.out;
      return -1;
    }
    if (!out.value("valid", false)) {
      ADD_FAILURE() << target << " " << shape << ": default config invalid: " << run.out;
      return -1;
    }
    return out["tensor_cycles"].get<int64_t>();
  }

  TempDir tmp_{"tessel-systolic-"};
  std::string dir_ = tmp_.path();
};

// The reference cycle counts of ACCELERATOR.md section 6 (SCALE-Sim v2 runs, 128x128 array).
TEST_F(SystolicCliTest, MatchesScaleSimTable128) {
  struct Row {
    int64_t m, n, k, ws, os, is;
  };
  const std::vector<Row> table = {{512, 128, 128, 893, 1527, 2039},
                                  {512, 512, 512, 14303, 12255, 14303},
                                  {1024, 1024, 1024, 89983, 81791, 89983}};
  for (const Row& row : table) {
    SCOPED_TRACE(::testing::Message() << row.m << "x" << row.n << "x" << row.k);
    EXPECT_EQ(TensorCycles(128, 128, "ws", row.m, row.n, row.k), row.ws);
    EXPECT_EQ(TensorCycles(128, 128, "os", row.m, row.n, row.k), row.os);
    EXPECT_EQ(TensorCycles(128, 128, "is", row.m, row.n, row.k), row.is);
  }
}

// The closed form holds for any GEMM size and array size: 60 seeded random cases spread over the
// three dataflows and five array shapes, sizes 1..3000 (almost never multiples of the array).
TEST_F(SystolicCliTest, MatchesClosedFormOnRandomSizes) {
  struct Array {
    int64_t r, c;
  };
  const std::vector<Array> arrays = {{128, 128}, {32, 64}, {256, 128}, {16, 16}, {64, 32}};
  const std::vector<std::string> flows = {"ws", "os", "is"};
  std::mt19937_64 rng(20261129);
  std::uniform_int_distribution<int64_t> size(1, 3000);
  int non_multiples = 0;
  constexpr int kCases = 60;
  for (int i = 0; i < kCases; ++i) {
    const Array& a = arrays[i % arrays.size()];
    const std::string& flow = flows[(i / arrays.size()) % flows.size()];
    const int64_t m = size(rng), n = size(rng), k = size(rng);
    if (m % a.r != 0 || n % a.c != 0 || k % a.r != 0) ++non_multiples;
    SCOPED_TRACE(::testing::Message() << "systolic-" << a.r << "x" << a.c << "-" << flow
                                      << " M=" << m << " N=" << n << " K=" << k);
    EXPECT_EQ(TensorCycles(a.r, a.c, flow, m, n, k), ClosedForm(flow, a.r, a.c, m, n, k));
  }
  EXPECT_GE(non_multiples, kCases / 2);
}

}  // namespace
}  // namespace tessel::testing
