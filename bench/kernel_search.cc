// Searches one kernel's space for one workload and reports default time, best time found, the
// best config and its share of the Tensor roofline. Not a ctest: a budgeted experiment.
//
//   [START=config] [FIX=params] kernel_search KERNEL SHAPE [DTYPE] [TARGET] [SECONDS] [SEED]
//   kernel_search attention batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1 bf16 snc3
//   60
//
// Method: random valid samples for the first third of the budget, then first-improvement
// coordinate descent (every other value of every parameter) from the best, restarted from the
// next-best sample when a local optimum is reached. FIX=name=value,... searches only the configs
// with those values (e.g. FIX=softmax=two_pass). Deterministic for a seed, except where the
// time budget cuts it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "sim/program.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel {
namespace {

int Run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kernel_search KERNEL SHAPE [DTYPE] [TARGET] [SECONDS] [SEED]\n");
    return 2;
  }
  const kernels::Kernel* kernel = kernels::FindKernel(argv[1]);
  absl::StatusOr<Dims> dims = Dims::Parse(argv[2]);
  const std::string dtype = argc > 3 ? argv[3] : "bf16";
  absl::StatusOr<sim::Target> target = sim::LoadTarget(argc > 4 ? argv[4] : "snc2");
  const double seconds = argc > 5 ? std::atof(argv[5]) : 30;
  const uint64_t seed = argc > 6 ? std::strtoull(argv[6], nullptr, 10) : 1;
  if (kernel == nullptr || !dims.ok() || !target.ok()) {
    std::fprintf(stderr, "bad kernel, shape or target\n");
    return 2;
  }
  kernels::Problem problem{*dims, dtype};
  absl::StatusOr<kernels::Space> space = kernel->SpaceFor(problem, *target);
  if (!space.ok()) {
    std::fprintf(stderr, "%s\n", std::string(space.status().message()).c_str());
    return 1;
  }
  const double roofline = kernels::RooflineNs(*kernel, problem, *target);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  int evaluations = 0;
  auto evaluate = [&](const Config& c) {
    ++evaluations;
    absl::StatusOr<sim::SimResult> r = kernels::Evaluate(*kernel, problem, c, *target);
    return r.ok() ? r->time_ns : 1e300;
  };
  const Config def = kernel->Default(problem, *target);
  const double def_ns = evaluate(def);
  std::printf("workload %s %s %s %s: space %llu, roofline %.0f ns\n", argv[1],
              dims->ToString().c_str(), dtype.c_str(), target->name.c_str(),
              (unsigned long long)space->Size(), roofline);
  std::printf("default %.0f ns (%.1f%% of roofline): %s\n", def_ns, 100 * roofline / def_ns,
              def.ToString().c_str());
  std::fflush(stdout);

  // FIX: the pinned values; a config with another value counts as invalid.
  Config fixed;
  if (const char* fix = std::getenv("FIX"); fix != nullptr) {
    absl::StatusOr<Config> c = Config::Parse(fix);
    if (!c.ok()) {
      std::fprintf(stderr, "FIX: %s\n", std::string(c.status().message()).c_str());
      return 2;
    }
    fixed = *c;
  }
  auto valid = [&](const Config& c) {
    for (const auto& [name, value] : fixed.items()) {
      if (c.Get(name) != value) return false;
    }
    return space->Validate(c).ok();
  };

  std::mt19937_64 rng(seed);
  std::vector<std::pair<double, Config>> samples;
  if (valid(def)) samples.push_back({def_ns, def});
  // START=config seeds the search with a hand-written config (reported on its own).
  if (const char* start = std::getenv("START"); start != nullptr) {
    absl::StatusOr<Config> c = Config::Parse(start);
    absl::Status status = c.ok() ? space->Validate(*c) : c.status();
    if (!status.ok()) {
      std::printf("START invalid: %s\n", std::string(status.message()).c_str());
    } else {
      const double ns = evaluate(*c);
      std::printf("start %.0f ns (%.1f%% of roofline)\n", ns, 100 * roofline / ns);
      samples.push_back({ns, *c});
    }
  }
  while (elapsed() < seconds / 3) {
    Config c = space->Decode(rng() % space->Size());
    if (!valid(c)) continue;
    samples.push_back({evaluate(c), c});
  }
  if (samples.empty()) {
    std::fprintf(stderr, "no valid config found in %.0f s (does FIX exclude them all?)\n",
                 seconds / 3);
    return 1;
  }
  std::sort(samples.begin(), samples.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  double best_ns = samples[0].first;
  Config best = samples[0].second;
  for (size_t restart = 0; restart < samples.size() && elapsed() < seconds; ++restart) {
    double cur_ns = samples[restart].first;
    Config cur = samples[restart].second;
    bool improved = true;
    while (improved && elapsed() < seconds) {
      improved = false;
      for (const kernels::Param& param : space->params()) {
        for (const std::string& value : param.values) {
          if (elapsed() >= seconds) break;
          Config next = cur;
          next.Set(param.name, value);
          if (next == cur || !valid(next)) continue;
          const double ns = evaluate(next);
          if (ns < cur_ns) {
            cur_ns = ns, cur = next, improved = true;
          }
        }
      }
    }
    if (cur_ns < best_ns) best_ns = cur_ns, best = cur;
  }
  std::printf(
      "best %.0f ns (%.1f%% of roofline, %.2fx the default) after %d evaluations in "
      "%.0f s: %s\n",
      best_ns, 100 * roofline / best_ns, def_ns / best_ns, evaluations, elapsed(),
      best.ToString().c_str());
  absl::StatusOr<sim::Program> program = kernel->Lower(problem, best, *target);
  absl::StatusOr<sim::SimResult> r = kernels::Evaluate(*kernel, problem, best, *target);
  if (program.ok() && r.ok()) {
    size_t instructions = 0;
    for (size_t c = 0; c < program->cores.size(); ++c) {
      instructions += program->Source(c).instructions.size();
    }
    std::printf(
        "best program: %zu instructions on %zu cores, bound %s; busy tensor %.2f vector "
        "%.2f scalar %.2f gpsimd %.2f\n",
        instructions, program->cores.size(), r->bound.c_str(),
        r->engines[int(sim::EngineKind::kTensor)].busy_frac,
        r->engines[int(sim::EngineKind::kVector)].busy_frac,
        r->engines[int(sim::EngineKind::kScalar)].busy_frac,
        r->engines[int(sim::EngineKind::kGpSimd)].busy_frac);
  }
  return 0;
}

}  // namespace
}  // namespace tessel

int main(int argc, char** argv) { return tessel::Run(argc, argv); }
