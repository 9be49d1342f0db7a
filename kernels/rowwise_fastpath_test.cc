// The row-wise kernels' fast path is exact (issue 20): for a corpus of random valid softmax,
// layernorm and rmsnorm programs on both neuron targets, shapes ragged and not, the compact
// lowering (the row-tile loop compressed, sim/compact.h) simulated with the fast path, the same
// program with --exact, and the flat lowering (every instruction emitted) give identical results,
// field by field, and the compact program unrolls to exactly the flat one.
#include <fstream>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"
#include "kernels/rowwise.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using Case = test_support::ValidCase;
using test_support::EnvOr;
using test_support::ResultFields;

// Random valid cases: rows and cols up to `max_dim`, a third of them multiples of 512 (the rest
// mostly ragged), bf16 or fp32.
std::vector<Case> Corpus(const Kernel& kernel, const sim::Target& target, int count, uint64_t seed,
                         int64_t max_dim = 4096) {
  std::mt19937_64 rng(seed);
  return test_support::RandomValidCases(kernel, target, count, 300, rng, [&](std::mt19937_64& d) {
    auto dim = [&] {
      return d() % 3 == 0 ? int64_t(512 * (1 + d() % (max_dim / 512))) : int64_t(1 + d() % max_dim);
    };
    return test_support::Rows(dim(), dim(), d() % 4 ? "bf16" : "fp32");
  });
}

struct Param {
  const char* kernel;
  const char* target;
};

class RowwiseFastPathTest : public ::testing::TestWithParam<Param> {};

// TESSEL_FASTPATH_CASES=N and TESSEL_FASTPATH_SEED=S run a longer corpus (the fuzzing run of
// issue 20: N cases from seed S, dims up to 8192); by default 300 cases from seed 20.
TEST_P(RowwiseFastPathTest, FastPathExactAndFlatAgreeOnACorpus) {
  const sim::Target t = test_support::Load(GetParam().target);
  const Kernel& kernel = *FindKernel(GetParam().kernel);
  const int64_t cases = EnvOr("TESSEL_FASTPATH_CASES", 300);
  const uint64_t seed = uint64_t(EnvOr("TESSEL_FASTPATH_SEED", 20));
  test_support::LoweringCounts counts;
  test_support::ExpectLoweringsAgree(
      kernel, t, Corpus(kernel, t, int(cases), seed, cases > 300 ? 8192 : 4096),
      [] { rowwise::SetRowLoweringForTesting(rowwise::RowLowering::kFlat); },
      [] { rowwise::SetRowLoweringForTesting(rowwise::RowLowering::kCompact); }, &counts);
  if (HasFatalFailure()) return;
  EXPECT_GT(counts.compressed, cases / 3) << "the compact lowering should compress most programs";
}

INSTANTIATE_TEST_SUITE_P(KernelsAndTargets, RowwiseFastPathTest,
                         ::testing::Values(Param{"softmax", "snc2"}, Param{"softmax", "snc3"},
                                           Param{"layernorm", "snc2"}, Param{"layernorm", "snc3"},
                                           Param{"rmsnorm", "snc2"}, Param{"rmsnorm", "snc3"}),
                         [](const auto& info) {
                           return std::string(info.param.kernel) + "_" + info.param.target;
                         });

// A norm with affine=separate runs a second pass over Y that reads back the first pass's stores
// (from_output loads) and stores again. Its row tiles compress like the first pass's: each store
// closes the region its load opened instead of queueing for a later read-back that never comes
// (which had kept the second pass flat: 32,768 of this program's 34,510 templates).
TEST(RowwiseCompressionTest, ANormsAffinePassOverItsOutputCompresses) {
  const sim::Target t = test_support::Load("snc3");
  for (const char* name : {"layernorm", "rmsnorm"}) {
    const Kernel& kernel = *FindKernel(name);
    const Problem problem = test_support::Rows(8192, 8192);
    for (const char* stats : {"sum_scalar_sq", "bn_stats"}) {
      const Config config = test_support::Parse(
          std::string("tile_rows=64,rows_per_partition=1,chunk=128,resident=0,stats=") + stats +
          ",apply=scalar,affine=separate,bufs=1,shards=1");
      absl::StatusOr<sim::Program> program = kernel.Lower(problem, config, t);
      ASSERT_TRUE(program.ok()) << name << " " << stats << ": " << program.status();
      const sim::CoreProgram& core = program->cores[0];
      // 128 row tiles of 64 chunks per pass: flat, the affine pass alone is 128 x 256 loads,
      // multiplies (and adds) and stores.
      EXPECT_GT(core.FlatSize(), 128 * 64 * 3) << name << " " << stats;
      EXPECT_LT(int64_t(core.instructions.size()) * 16, core.FlatSize())
          << name << " " << stats << ": " << core.instructions.size() << " templates";
    }
  }
}

// TESSEL_ROWWISE_DUMP=FILE writes every corpus case's result (the default lowering) to FILE, so
// two builds can be compared: the lowering's rewrite changed no result.
TEST(RowwiseFastPathDump, WritesResultsWhenAsked) {
  const char* path = std::getenv("TESSEL_ROWWISE_DUMP");
  if (path == nullptr) GTEST_SKIP() << "TESSEL_ROWWISE_DUMP not set";
  std::ofstream out(path);
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    for (const char* target : {"snc2", "snc3"}) {
      const sim::Target t = test_support::Load(target);
      const Kernel& kernel = *FindKernel(name);
      for (const Case& c : Corpus(kernel, t, 300, 20)) {
        absl::StatusOr<sim::SimResult> r = Evaluate(kernel, c.problem, c.config, t, {});
        out << name << " " << target << " " << c.problem.dims.ToString() << " "
            << c.config.ToString() << " " << (r.ok() ? ResultFields(*r) : r.status().ToString())
            << "\n";
      }
    }
  }
}

}  // namespace
}  // namespace tessel::kernels
