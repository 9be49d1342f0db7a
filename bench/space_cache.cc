// Evaluates EVERY valid config of one workload on the simulator and writes the results as a Kernel
// Tuner cache file, so the exhaustive optimum is known and search strategies can be replayed on the
// simulator's own landscape (`tessel replay --cache FILE`, bench/search_replay). Prints a summary:
// space size, valid count, default and best (time, bound, TensorE busy), the share of valid
// configs within 5% / 2% of the best, and the wall time.
//
//   space_cache --kernel matmul --shape M=4096,N=4096,K=4096 --dtype bf16 --target snc2
//               --threads 2 --out /tmp/matmul_4096_snc2.json
//
// Times in the cache are nanoseconds (Kernel Tuner writes milliseconds; replay scores are ratios,
// so the unit does not matter). Invalid configs are left out: they are outside the space.
// Progress goes to stderr every 50,000 evaluations.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/workload_options.h"
#include "kernels/kernel.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel {
namespace {

struct Options : bench::WorkloadOptions {
  std::string out;
  int threads = 2;
};

int Usage(const char* error) {
  if (error != nullptr) std::fprintf(stderr, "space_cache: %s\n", error);
  std::fprintf(stderr,
               "usage: space_cache [--kernel K] [--shape DIMS] [--dtype T] [--target T] "
               "[--threads N] --out FILE\n");
  return 2;
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (arg == "--help" || arg == "-h") return Usage(nullptr);
    if ((v = value()) == nullptr) return Usage(StrCat(arg, " needs a value").c_str());
    if (o.Take(arg, v)) {
      continue;
    } else if (arg == "--threads") {
      o.threads = std::max(1, std::atoi(v));
    } else if (arg == "--out") {
      o.out = v;
    } else {
      return Usage(StrCat("unknown option ", arg).c_str());
    }
  }
  if (o.out.empty()) return Usage("--out is required");
  absl::StatusOr<bench::Workload> w = bench::ResolveWorkload(o);
  if (!w.ok()) return Usage(std::string(w.status().message()).c_str());
  const kernels::Kernel& kernel = *w->kernel;
  const kernels::Problem& problem = w->problem;
  const sim::Target& target = w->target;
  const kernels::Space& space = w->space;

  const auto start = std::chrono::steady_clock::now();
  std::vector<uint64_t> valid;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    if (space.Validate(space.Decode(i)).ok()) valid.push_back(i);
  }
  std::fprintf(stderr, "%s %s %s %s: %llu points, %zu valid\n", o.kernel.c_str(), o.shape.c_str(),
               o.dtype.c_str(), o.target.c_str(), static_cast<unsigned long long>(space.Size()),
               valid.size());

  struct Result {
    double ns = -1, tensor_busy = 0;
    std::string bound;
  };
  std::vector<Result> results(valid.size());
  std::atomic<size_t> next{0}, done{0};
  const size_t tensor = static_cast<size_t>(sim::EngineKind::kTensor);
  auto work = [&] {
    for (size_t j = next++; j < valid.size(); j = next++) {
      absl::StatusOr<sim::SimResult> r =
          kernels::Evaluate(kernel, problem, space.Decode(valid[j]), target, {});
      if (r.ok()) results[j] = Result{r->time_ns, r->engines[tensor].busy_frac, r->bound};
      const size_t n = ++done;
      if (n % 50000 == 0) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "  %zu / %zu evaluated, %.0f s, %.0f evals/s\n", n, valid.size(), s,
                     double(n) / s);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < o.threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The cache: parameters in space order, keys "v1,v2,..." in that order.
  nlohmann::json doc;
  doc["kernel_name"] = o.kernel;
  doc["device_name"] = StrCat("tessel-sim ", o.target, " ", o.shape, " ", o.dtype);
  doc["tune_params_keys"] = nlohmann::json::array();
  doc["tune_params"] = nlohmann::json::object();
  for (const kernels::Param& p : space.params()) {
    doc["tune_params_keys"].push_back(p.name);
    doc["tune_params"][p.name] = p.values;
  }
  nlohmann::json& cache = doc["cache"] = nlohmann::json::object();
  size_t best = valid.size(), failed = 0;
  for (size_t j = 0; j < valid.size(); ++j) {
    const Config c = space.Decode(valid[j]);
    std::vector<std::string> values;
    for (const auto& [name, value] : c.items()) values.push_back(value);
    if (results[j].ns < 0) {
      ++failed;
      cache[StrJoin(values, ",")] = {{"time", "RuntimeFailedConfig"}};
      continue;
    }
    cache[StrJoin(values, ",")] = {{"time", results[j].ns}};
    if (best == valid.size() || results[j].ns < results[best].ns) best = j;
  }
  {
    const std::string tmp = o.out + ".tmp";
    std::ofstream f(tmp);
    f << doc.dump();
    f.close();
    if (!f || std::rename(tmp.c_str(), o.out.c_str()) != 0) {
      std::fprintf(stderr, "space_cache: cannot write %s\n", o.out.c_str());
      return 1;
    }
  }
  if (best == valid.size()) {
    std::fprintf(stderr, "space_cache: no valid config evaluated\n");
    return 1;
  }

  const Config def = kernel.Default(problem, target);
  const sim::SimResult d = *kernels::Evaluate(kernel, problem, def, target, {});
  size_t within5 = 0, within2 = 0;
  for (const Result& r : results) {
    within5 += r.ns >= 0 && r.ns <= 1.05 * results[best].ns;
    within2 += r.ns >= 0 && r.ns <= 1.02 * results[best].ns;
  }
  nlohmann::json summary = {{"kernel", o.kernel},
                            {"shape", o.shape},
                            {"dtype", o.dtype},
                            {"target", o.target},
                            {"space_size", space.Size()},
                            {"valid", valid.size()},
                            {"failed", failed},
                            {"default",
                             {{"config", def.ToString()},
                              {"time_ns", d.time_ns},
                              {"bound", d.bound},
                              {"tensor_busy", d.engines[tensor].busy_frac}}},
                            {"best",
                             {{"config", space.Decode(valid[best]).ToString()},
                              {"time_ns", results[best].ns},
                              {"bound", results[best].bound},
                              {"tensor_busy", results[best].tensor_busy}}},
                            {"within_5pct", within5},
                            {"within_2pct", within2},
                            {"seconds", seconds},
                            {"evals_per_s", double(valid.size()) / seconds},
                            {"threads", o.threads},
                            {"out", o.out}};
  std::printf("%s\n", summary.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace tessel

int main(int argc, char** argv) { return tessel::Main(argc, argv); }
