// The simulator against published hardware measurements: reads the fidelity table of
// docs/simulator.md, simulates every row's config and fails when a row's figure leaves the
// published value's tolerance, when the table's own "tessel" column is out of date, or when the
// rows of a ladder (a tutorial's optimisation steps) do not get faster in the tutorial's order.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel::kernels {
namespace {

struct Row {
  std::string step, measurement, kernel, target, shape, config, metric;
  std::string published, tolerance, tessel, ratio;
};

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" `");
  const size_t e = s.find_last_not_of(" `");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The rows between the fidelity markers of docs/simulator.md.
std::vector<Row> ReadTable() {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/docs/simulator.md");
  std::vector<Row> rows;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.find("<!-- fidelity:begin -->") != std::string::npos) inside = true;
    if (line.find("<!-- fidelity:end -->") != std::string::npos) inside = false;
    if (!inside || line.rfind("| ", 0) != 0 || line.find("---") != std::string::npos) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(Trim(cell));
    if (cells.size() < 12 || cells[0] == "step") continue;
    rows.push_back(Row{cells[0], cells[1], cells[3], cells[4], cells[5], cells[6], cells[7],
                       cells[8], cells[9], cells[10], cells[11]});
  }
  return rows;
}

double Number(const std::string& s) {
  return std::stod(s.back() == '%' ? s.substr(0, s.size() - 1) : s);
}

// A lone DMA load of `partitions` partitions x `bytes` bytes on one queue.
double DmaTimeUs(const sim::Target& target, const Dims& dims) {
  sim::Program p;
  p.cores.resize(1);
  p.cores[0].Add(
      sim::MakeDma(sim::Op::kDmaLoad, int(*dims.Get("partitions")), *dims.Get("bytes"), 0), {});
  absl::StatusOr<sim::SimResult> r = sim::Simulate(target, p);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->time_ns / 1000 : 0;
}

// The row's metric as the simulator has it now.
double Simulated(const Row& row) {
  const sim::Target target = *sim::LoadTarget(row.target);
  const Dims dims = *Dims::Parse(row.shape);
  if (row.kernel == "dma") return DmaTimeUs(target, dims);
  const Kernel& kernel = *FindKernel(row.kernel);
  const Problem problem{dims, "bf16"};
  const Config config =
      row.config == "default" ? kernel.Default(problem, target) : *Config::Parse(row.config);
  absl::StatusOr<sim::SimResult> r = Evaluate(kernel, problem, config, target);
  EXPECT_TRUE(r.ok()) << row.measurement << ": " << r.status();
  if (!r.ok()) return 0;
  if (row.metric == "time_us") return r->time_ns / 1000;
  if (row.metric == "roofline_fraction") return r->roofline_ns / r->time_ns;
  if (row.metric == "speedup_over_default") {
    absl::StatusOr<sim::SimResult> d =
        Evaluate(kernel, problem, kernel.Default(problem, target), target);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? d->time_ns / r->time_ns : 0;
  }
  ADD_FAILURE() << "unknown metric " << row.metric;
  return 0;
}

TEST(FidelityTest, EveryRowIsWithinItsToleranceOfThePublishedFigure) {
  const std::vector<Row> rows = ReadTable();
  ASSERT_GE(rows.size(), 6u) << "the fidelity table of docs/simulator.md was not found";
  std::map<std::string, std::vector<std::pair<int, double>>> ladders;  // by kernel and shape
  for (const Row& row : rows) {
    const double now = Simulated(row);
    SCOPED_TRACE(row.measurement + ": simulated " + std::to_string(now));
    // The table says what the simulator says (regenerate the column when the model changes).
    EXPECT_NEAR(Number(row.tessel), now, std::abs(now) * 0.005 + 1e-3) << "stale tessel column";
    if (row.published != "-") {
      const double published = Number(row.published);
      const double tolerance = Number(row.tolerance) / 100;
      EXPECT_LE(std::abs(now / published - 1), tolerance)
          << "published " << published << " +/- " << row.tolerance;
      EXPECT_NEAR(Number(row.ratio), now / published, 0.006) << "stale ratio column";
    }
    if (row.step != "-" && row.metric == "time_us") {
      ladders[row.kernel + " " + row.target + " " + row.shape].push_back(
          {std::stoi(row.step), now});
    }
  }
  ASSERT_FALSE(ladders.empty()) << "no ladder rows";
  for (auto& [what, steps] : ladders) {
    std::sort(steps.begin(), steps.end());
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_LT(steps[i].second, steps[i - 1].second)
          << what << ": step " << steps[i].first << " is not faster than step "
          << steps[i - 1].first;
    }
  }
}

}  // namespace
}  // namespace tessel::kernels
