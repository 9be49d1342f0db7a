// The bf16 `matmul` landscape on snc2 and snc3 (BENCHMARKS.md "Simulator landscape"): for each of
// three shapes and each target, the default config's time / bound / TensorE busy, the best found
// config's time / bound / TensorE busy, the valid share of the space, the share of evaluated
// configs within 5% of the best, and the best config; then whether the best configs of snc2 and
// snc3 differ per shape.
//
//   landscape_matmul [--samples N] [--seed S] [--threads T] [--exhaustive]
//
// The full product space has millions of points (e.g. 4.6M on snc2) and one evaluation of a
// 4096^3 config costs ~5-10 ms, so exhaustive evaluation is out of reach. Without --exhaustive the
// program draws points of the product uniformly (seeded), validates them, and evaluates the first
// N valid ones plus the default; the valid count of the space is estimated from the share of
// drawn points that were valid. --exhaustive evaluates every valid point (hours; not run).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/kernel.h"
#include "schema/strings.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel {
namespace {

struct Row {
  std::string shape, target;
  uint64_t space_size = 0, drawn = 0, valid_drawn = 0;
  double default_ns = 0, default_tensor_busy = 0;
  std::string default_bound;
  double best_ns = 0, best_tensor_busy = 0;
  std::string best_bound, best_config;
  int evaluated = 0, within5 = 0;
  double seconds = 0;
};

struct Eval {
  std::string config;
  double ns = 0, tensor_busy = 0;
  std::string bound;
};

Row Landscape(const kernels::Kernel& kernel, const kernels::Problem& problem,
              const std::string& target_name, int samples, uint64_t seed, bool exhaustive,
              int threads) {
  const auto start = std::chrono::steady_clock::now();
  const sim::Target target = *sim::LoadTarget(target_name);
  const kernels::Space space = *kernel.SpaceFor(problem, target);
  Row row;
  row.shape = problem.dims.ToString();
  row.target = target_name;
  row.space_size = space.Size();

  // The indices to evaluate: every valid point, or the first `samples` valid points of a seeded
  // uniform draw (with replacement; duplicates are vanishingly rare in millions of points).
  std::vector<uint64_t> chosen;
  if (exhaustive) {
    for (uint64_t i = 0; i < space.Size(); ++i) {
      ++row.drawn;
      if (space.Validate(space.Decode(i)).ok()) chosen.push_back(i);
    }
  } else {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<uint64_t> pick(0, space.Size() - 1);
    while (static_cast<int>(chosen.size()) < samples) {
      const uint64_t i = pick(rng);
      ++row.drawn;
      if (space.Validate(space.Decode(i)).ok()) chosen.push_back(i);
    }
  }
  row.valid_drawn = chosen.size();

  const sim::SimOptions options{};
  const size_t tensor = static_cast<size_t>(sim::EngineKind::kTensor);
  std::vector<Eval> evals(chosen.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < chosen.size(); j = next++) {
      const Config config = space.Decode(chosen[j]);
      absl::StatusOr<sim::SimResult> r =
          kernels::Evaluate(kernel, problem, config, target, options);
      if (!r.ok()) {
        std::fprintf(stderr, "evaluate %s failed: %s\n", config.ToString().c_str(),
                     std::string(r.status().message()).c_str());
        continue;
      }
      evals[j] = Eval{config.ToString(), r->time_ns, r->engines[tensor].busy_frac, r->bound};
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();

  const Config def = kernel.Default(problem, target);
  const sim::SimResult d = *kernels::Evaluate(kernel, problem, def, target, options);
  row.default_ns = d.time_ns;
  row.default_bound = d.bound;
  row.default_tensor_busy = d.engines[tensor].busy_frac;
  evals.push_back(Eval{def.ToString(), d.time_ns, d.engines[tensor].busy_frac, d.bound});

  std::erase_if(evals, [](const Eval& e) { return e.ns <= 0; });
  const Eval& best =
      *std::min_element(evals.begin(), evals.end(), [](const Eval& a, const Eval& b) {
        return a.ns < b.ns || (a.ns == b.ns && a.config < b.config);
      });
  row.best_ns = best.ns;
  row.best_bound = best.bound;
  row.best_tensor_busy = best.tensor_busy;
  row.best_config = best.config;
  row.evaluated = static_cast<int>(evals.size());
  for (const Eval& e : evals) row.within5 += e.ns <= 1.05 * best.ns;
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return row;
}

// "1.23x its best".
std::string FormatRatio(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx its best", x);
  return buf;
}

int Main(int argc, char** argv) {
  int samples = 1000;
  uint64_t seed = 1;
  int threads = 2;
  bool exhaustive = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--samples" && i + 1 < argc) {
      samples = std::stoi(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::stoi(argv[++i]);
    } else if (arg == "--exhaustive") {
      exhaustive = true;
    } else {
      std::fprintf(stderr,
                   "usage: landscape_matmul [--samples N] [--seed S] [--threads T] "
                   "[--exhaustive]\n");
      return 2;
    }
  }
  const kernels::Kernel& kernel = *kernels::FindKernel("matmul");
  auto problem = [](int64_t m, int64_t n, int64_t k) {
    Dims d;
    d.Set("M", m);
    d.Set("N", n);
    d.Set("K", k);
    return kernels::Problem{d, "bf16"};
  };
  const std::vector<kernels::Problem> shapes = {
      problem(4096, 4096, 4096), problem(1024, 8192, 1024), problem(8192, 1024, 4096)};
  const std::vector<std::string> targets = {"snc2", "snc3"};
  std::printf(
      "mode: %s, seed %llu, threads %d\n\n",
      exhaustive ? "exhaustive" : StrCat("random sample of ", samples, " valid configs").c_str(),
      static_cast<unsigned long long>(seed), threads);
  std::printf(
      "| shape | target | space | valid (est.) | evaluated | default ns | bound | TensorE busy | "
      "best ns | bound | TensorE busy | speedup | within 5%% | seconds |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<Row> rows;
  for (const kernels::Problem& p : shapes) {
    for (const std::string& t : targets) {
      Row r = Landscape(kernel, p, t, samples, seed, exhaustive, threads);
      const double valid_share = static_cast<double>(r.valid_drawn) / r.drawn;
      std::printf(
          "| %s | %s | %llu | %.1f%% (~%.0f) | %d | %.0f | %s | %.1f%% | %.0f | %s | %.1f%% | "
          "%.2fx | %d (%.2f%%) | %.1f |\n",
          r.shape.c_str(), r.target.c_str(), static_cast<unsigned long long>(r.space_size),
          100 * valid_share, valid_share * r.space_size, r.evaluated, r.default_ns,
          r.default_bound.c_str(), 100 * r.default_tensor_busy, r.best_ns, r.best_bound.c_str(),
          100 * r.best_tensor_busy, r.default_ns / r.best_ns, r.within5,
          100.0 * r.within5 / r.evaluated, r.seconds);
      std::fflush(stdout);
      rows.push_back(std::move(r));
    }
  }
  std::printf("\nbest configs:\n");
  for (const Row& r : rows) {
    std::printf("- %s %s: %s\n", r.shape.c_str(), r.target.c_str(), r.best_config.c_str());
  }
  // Transfer: each target's best config run on the other target (shards clamped to the cores the
  // other target has, so the config is valid there), relative to that target's own best.
  std::printf("\nsnc2 vs snc3 best config (transfer = the other target's best, run here):\n");
  for (size_t i = 0; i + 1 < rows.size(); i += 2) {
    std::string transfer;
    for (int side = 0; side < 2; ++side) {
      const Row& from = rows[i + side];
      const Row& to = rows[i + 1 - side];
      const sim::Target target = *sim::LoadTarget(to.target);
      Config config = *Config::Parse(from.best_config);
      const int64_t shards =
          std::min<int64_t>(std::stoll(std::string(*config.Get("shards"))), target.cores_per_chip);
      config.Set("shards", std::to_string(shards));
      absl::StatusOr<sim::SimResult> r =
          kernels::Evaluate(kernel, shapes[i / 2], config, target, sim::SimOptions{});
      transfer += StrCat(from.target, " best on ", to.target, ": ",
                         r.ok() ? FormatRatio(r->time_ns / to.best_ns) : "invalid", "; ");
    }
    std::printf("- %s: %s; %s\n", rows[i].shape.c_str(),
                rows[i].best_config == rows[i + 1].best_config ? "same" : "differ",
                transfer.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tessel

int main(int argc, char** argv) { return tessel::Main(argc, argv); }
