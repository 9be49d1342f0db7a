// Test support shared by the kernel tests (header-only, included by *_test.cc only).
#ifndef TESSEL_KERNELS_KERNEL_TESTING_H_
#define TESSEL_KERNELS_KERNEL_TESTING_H_

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/rowwise_kernel.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel::kernels::test_support {

// The target `name`; a failed expectation (and a default target) if it does not load.
inline sim::Target Load(const std::string& name) {
  absl::StatusOr<sim::Target> t = sim::LoadTarget(name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : sim::Target{};
}

// `text` parsed as a config; a failed expectation (and an empty config) if it does not parse.
inline Config Parse(const std::string& text) {
  absl::StatusOr<Config> c = Config::Parse(text);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Config{};
}

// A rowwise (softmax, norm) problem.
inline Problem Rows(int64_t rows, int64_t cols, std::string dtype = "bf16") {
  return Problem{Dims{{"rows", rows}, {"cols", cols}}, std::move(dtype)};
}

// A random rowwise problem: 1-3000 rows, 1-20000 columns (mostly ragged), bf16 or (a third) fp32.
inline Problem RandomRows(const std::string& /*target*/, std::mt19937_64& rng) {
  const int64_t rows = 1 + int64_t(rng() % 3000), cols = 1 + int64_t(rng() % 20000);
  return Rows(rows, cols, rng() % 3 ? "bf16" : "fp32");
}

// Param changes a test applies to a base config, e.g. {{"evict", "gpsimd"}}.
using Changes = std::initializer_list<std::pair<const char*, const char*>>;

// `base` with `changes` applied.
inline Config With(const Config& base, Changes changes) {
  Config c = base;
  for (auto [k, v] : changes) c.Set(k, v);
  return c;
}

// Why `space` rejects `base` with `changes` applied ("" when it accepts the result).
inline std::string Reason(const Space& space, const Config& base, Changes changes) {
  return std::string(space.Validate(With(base, changes)).message());
}

// A problem of `kernel` in `dtype`: its dims, in the order of kernel.dims(), set to `values`
// (a failed expectation when the counts differ).
inline Problem ProblemOf(const Kernel& kernel, const std::vector<int64_t>& values,
                         std::string dtype) {
  Problem p{Dims{}, std::move(dtype)};
  const std::vector<std::string> names = kernel.dims();
  EXPECT_EQ(names.size(), values.size()) << kernel.name();
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) p.dims.Set(names[i], values[i]);
  return p;
}

// A random valid config of `space`, or nullopt after `attempts` misses.
inline std::optional<Config> RandomValid(const Space& space, std::mt19937_64& rng, int attempts) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    Config c = space.Decode(rng() % space.Size());
    if (space.Validate(c).ok()) return c;
  }
  return std::nullopt;
}

// How many of `space`'s configs are valid, every one decoded.
inline int64_t CountValid(const Space& space) {
  int64_t valid = 0;
  for (uint64_t i = 0; i < space.Size(); ++i) valid += space.Validate(space.Decode(i)).ok();
  return valid;
}

// How many of `samples` random draws (from `rng`) of `space` are valid.
inline int SampleValid(const Space& space, std::mt19937_64& rng, int samples) {
  int valid = 0;
  for (int i = 0; i < samples; ++i)
    valid += space.Validate(space.Decode(rng() % space.Size())).ok();
  return valid;
}

// Calls `check(target, space)` with the kernel's space for `problem` on snc2, then on snc3.
inline void ForSnc2AndSnc3(const Kernel& kernel, const Problem& problem,
                           const std::function<void(const char*, const Space&)>& check) {
  for (const char* target : {"snc2", "snc3"}) {
    const Space space = *kernel.SpaceFor(problem, Load(target));
    check(target, space);
  }
}

// Expects at least `at_least` valid configs in the kernel's space for `problem` on snc2 and on
// snc3 (every config decoded).
inline void ExpectValidConfigsOnSnc2AndSnc3(const Kernel& kernel, const Problem& problem,
                                            int64_t at_least) {
  ForSnc2AndSnc3(kernel, problem, [&](const char* target, const Space& space) {
    EXPECT_GE(CountValid(space), at_least) << target;
  });
}

// Every field of a result, as text (so a difference names the field).
inline std::string ResultFields(const sim::SimResult& r) {
  std::string s = "ticks=" + std::to_string(r.ticks) + " time_ns=" + std::to_string(r.time_ns) +
                  " tensor_cycles=" + std::to_string(r.tensor_cycles) +
                  " hbm=" + std::to_string(r.hbm_bytes) +
                  " roofline=" + std::to_string(r.roofline_ns) +
                  " sbuf_peak=" + std::to_string(r.sbuf_peak_bytes) +
                  " psum_peak=" + std::to_string(r.psum_peak_bytes) + " bound=" + r.bound;
  for (int e = 0; e < sim::kNumEngines; ++e) {
    s += " e" + std::to_string(e) + "=" + std::to_string(r.engines[e].busy_ticks) + "/" +
         std::to_string(r.engines[e].instructions) + "/" + std::to_string(r.engines[e].busy_frac);
  }
  return s;
}

// The environment variable `name` as an integer, or `fallback` when it is not set (e.g. the
// fast-path corpora's TESSEL_FASTPATH_CASES).
inline int64_t EnvOr(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoll(v) : fallback;
}

// Whether `compact` (a loop-structured program) unrolls to exactly `flat`: the same cores, and
// in each the same instructions (every field the lowerings set) with the same dependencies.
inline ::testing::AssertionResult UnrollsTo(const sim::Program& compact, const sim::Program& flat) {
  absl::StatusOr<sim::Program> unrolled = sim::Flatten(compact);
  if (!unrolled.ok()) return ::testing::AssertionFailure() << unrolled.status();
  if (unrolled->cores.size() != flat.cores.size()) {
    return ::testing::AssertionFailure()
           << unrolled->cores.size() << " cores, flat has " << flat.cores.size();
  }
  for (size_t core = 0; core < flat.cores.size(); ++core) {
    const sim::CoreProgram& u = unrolled->cores[core];
    const sim::CoreProgram& f = flat.cores[core];
    if (u.instructions.size() != f.instructions.size()) {
      return ::testing::AssertionFailure() << "core " << core << ": " << u.instructions.size()
                                           << " instructions, flat has " << f.instructions.size();
    }
    for (size_t i = 0; i < f.instructions.size(); ++i) {
      const sim::Instruction& x = u.instructions[i];
      const sim::Instruction& y = f.instructions[i];
      if (!(x.op == y.op && x.engine == y.engine && x.k == y.k && x.m == y.m && x.n == y.n &&
            x.free == y.free && x.partitions == y.partitions &&
            x.bytes_per_partition == y.bytes_per_partition && x.queue == y.queue &&
            x.reload_stationary == y.reload_stationary && x.dtype == y.dtype &&
            x.out_dtype == y.out_dtype && x.chunk_bytes == y.chunk_bytes)) {
        return ::testing::AssertionFailure() << "core " << core << " instruction " << i;
      }
      if (!std::ranges::equal(u.DepsOf(int32_t(i)), f.DepsOf(int32_t(i)))) {
        ::testing::AssertionResult failure = ::testing::AssertionFailure();
        failure << "core " << core << " deps of " << i << ": unrolled";
        for (int32_t d : u.DepsOf(int32_t(i))) failure << " " << d;
        failure << ", flat";
        for (int32_t d : f.DepsOf(int32_t(i))) failure << " " << d;
        return failure;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// A problem and a valid config of its space.
struct ValidCase {
  Problem problem;
  Config config;
};
// `count` cases on `target`: problems drawn by `problem(rng)`, each with the first valid config of
// up to `attempts` random draws of its space (a problem without one is dropped).
inline std::vector<ValidCase> RandomValidCases(
    const Kernel& kernel, const sim::Target& target, int count, int attempts, std::mt19937_64& rng,
    const std::function<Problem(std::mt19937_64& rng)>& problem) {
  std::vector<ValidCase> cases;
  while (int(cases.size()) < count) {
    Problem p = problem(rng);
    Space space = *kernel.SpaceFor(p, target);
    if (std::optional<Config> c = RandomValid(space, rng, attempts)) cases.push_back({p, *c});
  }
  return cases;
}

// What a compact lowering did to a corpus (ExpectLoweringsAgree): cores with fewer instructions
// than the flat lowering's, and cores equal to the core before them.
struct LoweringCounts {
  int compressed = 0;
  int copied = 0;
};
// For every case of `corpus` on `target`: the program lowered after `flat()` and after
// `compact()` (the kernel's lowering switches), the compact one unrolls to the flat one, and the
// compact one simulated fast, the same with --exact, and the flat one give identical results,
// field by field. Stops at the first failure; `counts` says what the compact lowering did.
inline void ExpectLoweringsAgree(const Kernel& kernel, const sim::Target& target,
                                 const std::vector<ValidCase>& corpus,
                                 const std::function<void()>& flat,
                                 const std::function<void()>& compact, LoweringCounts* counts) {
  for (const ValidCase& c : corpus) {
    const std::string what = c.problem.dims.ToString() + " " + c.config.ToString();
    flat();
    absl::StatusOr<sim::Program> flat_program = kernel.Lower(c.problem, c.config, target);
    compact();
    absl::StatusOr<sim::Program> compact_program = kernel.Lower(c.problem, c.config, target);
    ASSERT_TRUE(compact_program.ok() && flat_program.ok()) << what;
    ASSERT_TRUE(UnrollsTo(*compact_program, *flat_program)) << what;
    const std::vector<sim::CoreProgram>& cores = compact_program->cores;
    for (size_t core = 0; core < cores.size(); ++core) {
      counts->compressed += compact_program->Source(core).instructions.size() <
                            flat_program->cores[core].instructions.size();
      counts->copied +=
          cores[core].repeats_previous || (core > 0 && cores[core] == cores[core - 1]);
    }
    absl::StatusOr<sim::SimResult> fast = sim::Simulate(target, *compact_program, {});
    absl::StatusOr<sim::SimResult> exact = sim::Simulate(target, *compact_program, {.exact = true});
    absl::StatusOr<sim::SimResult> reference = sim::Simulate(target, *flat_program, {});
    ASSERT_TRUE(fast.ok() && exact.ok() && reference.ok()) << what;
    ASSERT_EQ(ResultFields(*fast), ResultFields(*exact)) << "fast vs exact: " << what;
    ASSERT_EQ(ResultFields(*exact), ResultFields(*reference)) << "exact vs flat: " << what;
  }
}

// A config simulated alone and with shards=N.
struct ShardedRuns {
  sim::SimResult one, sharded;
};
// Simulates `one` and `one` with shards=`shards` on `target`, expecting the sharded program to
// have `shards` cores and both simulations to succeed; nullopt when a step failed (reported).
inline std::optional<ShardedRuns> RunSharded(const Kernel& kernel, const Problem& problem,
                                             const Config& one, int shards,
                                             const sim::Target& target) {
  Config many = one;
  many.Set("shards", std::to_string(shards));
  absl::StatusOr<sim::Program> program = kernel.Lower(problem, many, target);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return std::nullopt;
  EXPECT_EQ(program->cores.size(), size_t(shards));
  absl::StatusOr<sim::SimResult> a = Evaluate(kernel, problem, one, target);
  absl::StatusOr<sim::SimResult> b = Evaluate(kernel, problem, many, target);
  EXPECT_TRUE(a.ok() && b.ok());
  if (!a.ok() || !b.ok()) return std::nullopt;
  return ShardedRuns{*a, *b};
}

// Simulates each of `configs` for `problem` on `target`, in order; nullopt when one failed
// (reported).
inline std::optional<std::vector<sim::SimResult>> EvaluateEach(const Kernel& kernel,
                                                               const Problem& problem,
                                                               const std::vector<Config>& configs,
                                                               const sim::Target& target) {
  std::vector<sim::SimResult> results;
  for (const Config& c : configs) {
    absl::StatusOr<sim::SimResult> r = Evaluate(kernel, problem, c, target);
    EXPECT_TRUE(r.ok()) << c.ToString() << ": " << r.status();
    if (!r.ok()) return std::nullopt;
    results.push_back(*r);
  }
  return results;
}

// A config and the times a run of it should move a tensor through HBM (reads plus writes).
struct HbmPasses {
  Config config;
  int passes = 0;
};
// Simulates each case's config for `problem` on `target`, in order, and expects its HBM bytes to
// be passes x `tensor_bytes` + `other_bytes`. Returns the simulations (nullopt when one failed,
// reported).
inline std::optional<std::vector<sim::SimResult>> ExpectHbmPasses(
    const Kernel& kernel, const Problem& problem, const sim::Target& target, int64_t tensor_bytes,
    int64_t other_bytes, const std::vector<HbmPasses>& cases) {
  std::vector<Config> configs;
  for (const HbmPasses& c : cases) configs.push_back(c.config);
  std::optional<std::vector<sim::SimResult>> runs = EvaluateEach(kernel, problem, configs, target);
  if (!runs) return std::nullopt;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ((*runs)[i].hbm_bytes, cases[i].passes * tensor_bytes + other_bytes)
        << cases[i].config.ToString();
  }
  return runs;
}

// Sets a kernel's test fault (with `set`, e.g. SetBmmFaultForTesting) for the guard's lifetime,
// then back to Fault::kNone.
template <typename Fault, void (*kSet)(Fault)>
class FaultGuard {
 public:
  explicit FaultGuard(Fault fault) { kSet(fault); }
  ~FaultGuard() { kSet(Fault::kNone); }
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;
};

// Expects the kernel's default config for `problem` on `target` to be valid, to simulate no
// faster than the roofline and to verify on the CPU. Returns the simulation (nullopt when the
// space or the simulation failed, already reported).
inline std::optional<sim::SimResult> ExpectDefaultWorks(const Kernel& kernel,
                                                        const Problem& problem,
                                                        const sim::Target& target) {
  absl::StatusOr<Space> space = kernel.SpaceFor(problem, target);
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return std::nullopt;
  const Config def = kernel.Default(problem, target);
  EXPECT_TRUE(space->Validate(def).ok()) << problem.dims.ToString() << ": " << space->Validate(def);
  absl::StatusOr<sim::SimResult> r = Evaluate(kernel, problem, def, target);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return std::nullopt;
  EXPECT_GE(r->time_ns, RooflineNs(kernel, problem, target));
  const absl::Status verified = kernel.Verify(problem, def, target);
  EXPECT_TRUE(verified.ok()) << problem.dims.ToString() << ": " << verified;
  return *r;
}

// ExpectDefaultWorks for each of `problems` on snc2, then on snc3, also expecting a positive
// roofline; stops at the first problem whose space or simulation failed.
inline void ExpectDefaultsWorkOnSnc2AndSnc3(const Kernel& kernel,
                                            const std::vector<Problem>& problems) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (const Problem& p : problems) {
      const std::optional<sim::SimResult> r = ExpectDefaultWorks(kernel, p, t);
      ASSERT_TRUE(r.has_value());
      EXPECT_GT(RooflineNs(kernel, p, t), 0);
    }
  }
}

struct SweepCounts {
  int verified = 0;   // configs verified on the CPU (each must match the reference)
  int simulated = 0;  // of those, simulated (each must succeed and not beat the roofline)
};

// The random sweep of issue 4's acceptance: on snc2 until 110 configs are verified, then on snc3
// until 220, draws a shape (`problem(target, rng)`) and up to 300 random configs of its space; the
// first valid one is verified on the CPU against the reference and, every fifth, simulated.
// `tally` sees every verified config (for the test's own coverage counts).
inline SweepCounts VerifyRandomValidConfigs(
    const Kernel& kernel, std::mt19937_64& rng,
    const std::function<Problem(const std::string& target, std::mt19937_64& rng)>& problem,
    const std::function<void(const Problem&, const Config&)>& tally) {
  SweepCounts n;
  for (const std::string target : {"snc2", "snc3"}) {
    const sim::Target t = Load(target);
    while (n.verified < (target == "snc2" ? 110 : 220)) {
      const Problem p = problem(target, rng);
      absl::StatusOr<Space> space = kernel.SpaceFor(p, t);
      EXPECT_TRUE(space.ok()) << p.dims.ToString() << ": " << space.status();
      if (!space.ok()) return n;
      for (int attempt = 0; attempt < 300; ++attempt) {
        Config c = space->Decode(rng() % space->Size());
        if (!space->Validate(c).ok()) continue;
        absl::Status v = kernel.Verify(p, c, t);
        EXPECT_TRUE(v.ok()) << p.dims.ToString() << " " << p.dtype << " " << c.ToString() << ": "
                            << v;
        if (n.verified % 5 == 0) {  // valid configs also lower to programs the simulator accepts
          absl::StatusOr<sim::SimResult> r = Evaluate(kernel, p, c, t);
          EXPECT_TRUE(r.ok()) << p.dims.ToString() << " " << c.ToString() << ": " << r.status();
          if (r.ok()) {
            EXPECT_GE(r->time_ns, RooflineNs(kernel, p, t)) << c.ToString();
          }
          ++n.simulated;
        }
        ++n.verified;
        tally(p, c);
        break;
      }
    }
  }
  return n;
}

// The row tiling rules every row-wise kernel (softmax, norm) reports on snc2: from the default
// config of [4096, 8192], SBUF capacity, a redundant chunk and resident=0 with one chunk; from the
// default of [100, 8192], shards beyond the single row tile.
inline void ExpectRowTilingRulesSayWhy(const Kernel& kernel) {
  const sim::Target t = Load("snc2");
  const Problem p = Rows(4096, 8192);
  const Space space = *kernel.SpaceFor(p, t);
  const Config base = kernel.Default(p, t);
  EXPECT_THAT(
      Reason(space, base, {{"chunk", "8192"}, {"rows_per_partition", "8"}, {"resident", "1"}}),
      ::testing::HasSubstr("SBUF capacity"));
  EXPECT_THAT(Reason(space, base, {{"chunk", "16384"}}),
              ::testing::HasSubstr("chunk=16384 is redundant"));
  EXPECT_THAT(Reason(space, base, {{"chunk", "8192"}, {"resident", "0"}}),
              ::testing::HasSubstr("resident=0 needs more than one chunk"));
  const Space small = *kernel.SpaceFor(Rows(100, 8192), t);
  EXPECT_THAT(Reason(small, kernel.Default(Rows(100, 8192), t), {{"shards", "2"}}),
              ::testing::HasSubstr("shards=2 exceeds the 1 row"));
}

// The row-wise kernels' random sweep (VerifyRandomValidConfigs over RandomRows): expects at least
// 200 configs verified, 40 simulated, 40 sharded and 100 with a ragged last chunk. `tally` sees
// every verified config (for the kernel's own coverage counts).
inline void ExpectRowwiseSweep(const Kernel& kernel, std::mt19937_64& rng,
                               const std::function<void(const Problem&, const Config&)>& tally) {
  int sharded = 0, ragged = 0;
  const SweepCounts n =
      VerifyRandomValidConfigs(kernel, rng, RandomRows, [&](const Problem& p, const Config& c) {
        sharded += *c.GetInt("shards") > 1;
        ragged += *p.dims.Get("cols") % *c.GetInt("chunk") != 0;
        tally(p, c);
      });
  EXPECT_GE(n.verified, 200);
  EXPECT_GE(n.simulated, 40);
  EXPECT_GE(sharded, 40);
  EXPECT_GE(ragged, 100);
}

// A row-wise config of 128-row tiles with one row per partition, 1024-column chunks, two buffers
// and one core, with the kernel's `own` values in order (rowwise::PlainConfig's order).
inline Config RowwiseConfig(std::vector<std::pair<std::string, std::string>> own) {
  rowwise::RowTiling tiling;
  tiling.chunk = 1024;
  return rowwise::PlainConfig(tiling, std::move(own));
}

// ExpectHbmPasses for a row-wise kernel on a [1024, 4096] bf16 problem on snc2 (8 MiB a pass),
// `vector_bytes` besides.
inline std::optional<std::vector<sim::SimResult>> ExpectRowwiseHbmPasses(
    const Kernel& kernel, int64_t vector_bytes, const std::vector<HbmPasses>& cases) {
  return ExpectHbmPasses(kernel, Rows(1024, 4096), Load("snc2"), /*tensor_bytes=*/1024 * 4096 * 2,
                         vector_bytes, cases);
}

}  // namespace tessel::kernels::test_support

#endif  // TESSEL_KERNELS_KERNEL_TESTING_H_
