// The schedule landscape of every registered kernel: for three standard shapes x two targets, the
// valid space size, the default config's time, the best time (exhaustive when the valid space fits
// the budget, else the best of `budget` seeded random valid configs plus the default), the median
// over the evaluated configs relative to the best, the share of evaluated configs within 5% of the
// best, and the best config; then the transfer check: the best config of each (shape, target)
// applied to every other (shape, target) of the same kernel.
//
//   landscape [--kernels a,b] [--budget N] [--out docs/kernels.md]
//
// Writes markdown to --out (or stdout): the part of the file between the markers
// <!-- landscape:begin --> and <!-- landscape:end --> is replaced (the rest is kept), or the
// section is appended. Deterministic: the sample is seeded by the row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "schema/strings.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel {
namespace {

const std::string kBegin = "<!-- landscape:begin -->";
const std::string kEnd = "<!-- landscape:end -->";

struct Shape {
  std::string label;
  kernels::Problem problem;
};

// Three standard shapes per kernel (small, medium, large); the dtype is bf16 throughout.
std::vector<Shape> StandardShapes(const std::string& kernel) {
  auto shapes = [](std::initializer_list<const char*> dims) {
    std::vector<Shape> out;
    for (const char* d : dims) {
      const Dims x = *Dims::Parse(d);
      out.push_back(Shape{x.ToString(), kernels::Problem{x, "bf16"}});
    }
    return out;
  };
  if (kernel == "matmul") {
    return shapes({"M=512,N=512,K=512", "M=1024,N=4096,K=1024", "M=4096,N=4096,K=4096"});
  }
  if (kernel == "bmm") {
    return shapes({"B=8,M=256,N=256,K=256", "B=16,M=512,N=512,K=128", "B=4,M=2048,N=2048,K=2048"});
  }
  if (kernel == "softmax" || kernel == "layernorm" || kernel == "rmsnorm") {
    return shapes({"rows=1024,cols=1024", "rows=4096,cols=4096", "rows=8192,cols=8192"});
  }
  if (kernel == "conv2d") {
    return shapes({"N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,padding=1",
                   "N=8,C=128,H=28,W=28,K=128,R=3,S=3,stride=1,padding=1",
                   "N=16,C=256,H=56,W=56,K=256,R=3,S=3,stride=1,padding=1"});
  }
  if (kernel == "attention") {  // causal=2: no mask, 1: causal
    return shapes({"batch=1,heads=8,seq_q=512,seq_k=512,head_dim=64,causal=2",
                   "batch=1,heads=16,seq_q=2048,seq_k=2048,head_dim=128,causal=1",
                   "batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1"});
  }
  return {};
}

struct Row {
  std::string kernel, shape, target;
  kernels::Problem problem;
  uint64_t space_size = 0, valid = 0;
  bool exhaustive = false;
  int evaluated = 0;
  double default_ns = 0, best_ns = 0, median_ns = 0, within5 = 0, roofline_ns = 0;
  Config best;
};

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string Us(double ns) { return Fmt("%.1f", ns / 1000.0); }

int Main(int argc, char** argv) {
  std::string out_path;
  std::vector<std::string> only;
  int budget = 3000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--budget" && i + 1 < argc) {
      budget = std::stoi(argv[++i]);
    } else if (a == "--kernels" && i + 1 < argc) {
      for (std::string_view k : StrSplit(argv[++i], ',')) only.emplace_back(k);
    } else {
      std::cerr << "usage: landscape [--kernels a,b] [--budget N] [--out FILE]\n";
      return 2;
    }
  }
  const std::vector<std::string> targets = {"snc2", "snc3"};
  std::vector<Row> rows;
  std::map<std::string, std::vector<size_t>> by_kernel;
  std::vector<std::string> skipped;
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    const std::string name(kernel->name());
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    std::vector<Shape> shapes = StandardShapes(name);
    if (shapes.empty()) {
      skipped.push_back(name);
      continue;
    }
    for (const Shape& shape : shapes) {
      for (const std::string& target_name : targets) {
        sim::Target target = *sim::LoadTarget(target_name);
        absl::StatusOr<kernels::Space> space = kernel->SpaceFor(shape.problem, target);
        if (!space.ok()) {
          std::cerr << name << " " << shape.label << " " << target_name << ": " << space.status()
                    << "\n";
          continue;
        }
        const auto start = std::chrono::steady_clock::now();
        Row row;
        row.kernel = name;
        row.shape = shape.label;
        row.target = target_name;
        row.problem = shape.problem;
        row.space_size = space->Size();
        // Valid configs: all when the product is small enough to scan, else a seeded sample.
        std::vector<uint64_t> valid;
        const uint64_t kScanLimit = 2'000'000;
        std::mt19937_64 rng(std::hash<std::string>()(name + shape.label + target_name));
        if (space->Size() <= kScanLimit) {
          for (uint64_t i = 0; i < space->Size(); ++i) {
            if (space->Validate(space->Decode(i)).ok()) valid.push_back(i);
          }
          row.valid = valid.size();
        } else {
          const int kProbes = 200000;
          int hits = 0;
          for (int i = 0; i < kProbes; ++i) {
            uint64_t index = rng() % space->Size();
            if (space->Validate(space->Decode(index)).ok()) {
              ++hits;
              valid.push_back(index);
            }
          }
          row.valid = uint64_t(double(hits) / kProbes * double(space->Size()));
        }
        std::sort(valid.begin(), valid.end());
        valid.erase(std::unique(valid.begin(), valid.end()), valid.end());
        row.exhaustive = space->Size() <= kScanLimit && int(valid.size()) <= budget;
        if (!row.exhaustive) {
          std::shuffle(valid.begin(), valid.end(), rng);
          valid.resize(std::min<size_t>(valid.size(), size_t(budget)));
        }
        Config def = kernel->Default(shape.problem, target);
        absl::StatusOr<sim::SimResult> d = kernels::Evaluate(*kernel, shape.problem, def, target);
        if (!d.ok()) {
          std::cerr << name << " default failed: " << d.status() << "\n";
          continue;
        }
        row.default_ns = d->time_ns;
        row.roofline_ns = kernels::RooflineNs(*kernel, shape.problem, target);
        std::vector<double> times = {d->time_ns};
        row.best_ns = d->time_ns;
        row.best = def;
        for (uint64_t index : valid) {
          Config c = space->Decode(index);
          absl::StatusOr<sim::SimResult> r = kernels::Evaluate(*kernel, shape.problem, c, target);
          if (!r.ok()) {
            std::cerr << name << " " << c.ToString() << ": " << r.status() << "\n";
            continue;
          }
          times.push_back(r->time_ns);
          if (r->time_ns < row.best_ns) {
            row.best_ns = r->time_ns;
            row.best = c;
          }
        }
        row.evaluated = int(times.size());
        std::sort(times.begin(), times.end());
        row.median_ns = times[times.size() / 2];
        row.within5 = double(std::count_if(times.begin(), times.end(),
                                           [&](double t) { return t <= row.best_ns * 1.05; })) /
                      double(times.size());
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::cerr << name << " " << shape.label << " " << target_name << ": " << row.evaluated
                  << " evaluated in " << Fmt("%.1f", secs) << " s, best/default "
                  << Fmt("%.2f", row.default_ns / row.best_ns) << "\n";
        by_kernel[name].push_back(rows.size());
        rows.push_back(std::move(row));
      }
    }
  }

  std::ostringstream md;
  md << "| kernel | shape | target | space | valid | evaluated | default us | best us | "
        "best/default | median/best | within 5% | roofline % | best config |\n";
  md << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  int rows_tuning_matters = 0;
  for (const Row& r : rows) {
    rows_tuning_matters += r.default_ns / r.best_ns >= 1.5;
    md << "| " << r.kernel << " | " << r.shape << " | " << r.target << " | " << r.space_size
       << " | " << r.valid << " | " << r.evaluated << (r.exhaustive ? " (all)" : " (sample)")
       << " | " << Us(r.default_ns) << " | " << Us(r.best_ns) << " | "
       << Fmt("%.2f", r.default_ns / r.best_ns) << " | " << Fmt("%.2f", r.median_ns / r.best_ns)
       << " | " << Fmt("%.1f%%", 100 * r.within5) << " | "
       << Fmt("%.0f%%", 100 * r.roofline_ns / r.best_ns) << " | `" << r.best.ToString() << "` |\n";
  }
  md << "\nRows where tuning matters (best/default >= 1.5): " << rows_tuning_matters << " of "
     << rows.size() << ".\n";

  // Transfer: best config of row a applied to row b (same kernel, a != b). A config that is not
  // valid there (e.g. shards=8 on the 2-core snc2, or a tile larger than the new shape) is counted
  // separately; losses are relative to row b's best.
  md << "\n| kernel | pairs | invalid there | applicable | applicable losing >= 10% | "
        "median loss (applicable) |\n";
  md << "|---|---|---|---|---|---|\n";
  int all_pairs = 0, all_invalid = 0, all_applicable = 0, all_lossy = 0;
  for (const auto& [name, indices] : by_kernel) {
    const kernels::Kernel* kernel = kernels::FindKernel(name);
    int pairs = 0, invalid = 0, lossy = 0;
    std::vector<double> losses;
    for (size_t a : indices) {
      for (size_t b : indices) {
        if (a == b) continue;
        ++pairs;
        const Row& to = rows[b];
        sim::Target target = *sim::LoadTarget(to.target);
        absl::StatusOr<kernels::Space> space = kernel->SpaceFor(to.problem, target);
        if (!space.ok() || !space->Validate(rows[a].best).ok()) {
          ++invalid;
          continue;
        }
        absl::StatusOr<sim::SimResult> r =
            kernels::Evaluate(*kernel, to.problem, rows[a].best, target);
        if (!r.ok()) {
          ++invalid;
          continue;
        }
        const double loss = r->time_ns / to.best_ns - 1;
        losses.push_back(loss);
        lossy += loss >= 0.10;
      }
    }
    std::sort(losses.begin(), losses.end());
    const int applicable = pairs - invalid;
    all_pairs += pairs;
    all_invalid += invalid;
    all_applicable += applicable;
    all_lossy += lossy;
    md << "| " << name << " | " << pairs << " | " << invalid << " | " << applicable << " | "
       << lossy << " (" << Fmt("%.0f%%", applicable ? 100.0 * lossy / applicable : 0) << ") | "
       << (losses.empty() ? std::string("-") : Fmt("%.1f%%", 100 * losses[losses.size() / 2]))
       << " |\n";
  }
  md << "\nTransfer: of " << all_pairs << " pairs, " << all_invalid
     << " configs are invalid on the other shape/target; of the " << all_applicable
     << " applicable ones, " << all_lossy << " lose >= 10% against that row's best.\n";
  if (!skipped.empty()) {
    md << "\nKernels without standard shapes here (not in the table): " << StrJoin(skipped, ", ")
       << ".\n";
  }
  md << "\nBudget: exhaustive when a row's valid configs number at most " << budget
     << "; otherwise the best of " << budget
     << " seeded random valid configs plus the default. Times are simulated (deterministic).\n";

  std::ostringstream section;
  section << kBegin << "\n"
          << "Generated by `bench/landscape` (command above); bf16 problems; times in us, "
             "simulated.\n\n"
          << md.str() << kEnd << "\n";
  if (out_path.empty()) {
    std::cout << section.str();
    return 0;
  }
  // Replace the marked section of an existing file (or write a new file with a title).
  std::string text;
  {
    std::ifstream in(out_path);
    std::stringstream buf;
    buf << in.rdbuf();
    text = buf.str();
  }
  const size_t begin = text.find(kBegin), end = text.find(kEnd);
  if (begin != std::string::npos && end != std::string::npos && end > begin) {
    text = text.substr(0, begin) + section.str() + text.substr(end + kEnd.size() + 1);
  } else {
    text += (text.empty() ? std::string("# Kernels\n\n## Landscape\n\n") : std::string("\n")) +
            section.str();
  }
  std::ofstream f(out_path + ".tmp");
  f << text;
  f.close();
  if (!f || std::rename((out_path + ".tmp").c_str(), out_path.c_str()) != 0) {
    std::cerr << "landscape: cannot write " << out_path << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tessel

int main(int argc, char** argv) { return tessel::Main(argc, argv); }
