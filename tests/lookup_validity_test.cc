// Issue 15, acceptance "lookup validity sweep": tune 12 workloads across the 7 kernels on both
// targets with the real `tessel` CLI, export a snapshot and a C++ header, then ask for 300 random
// (kernel, shape, target) triples through every door a program can use:
//   the server's Lookup (a tessel-server on the tuned database, over TCP gRPC),
//   libtessel over the snapshot file,
//   the generated header's BestConfig, compiled into a small program at test time,
//   the Python module over the snapshot, with Debian's python3.
// Every config answered must simulate as valid for the workload asked (kernels::Evaluate, what a
// worker runs). The test prints how many answers were adapted and how many fell back to the
// kernel's default.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/lookup.h"
#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/key.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace tessel {
namespace {

// The 12 tuned workloads: every kernel, both targets.
struct Tuned {
  std::string kernel;
  std::string shape;
  std::string target;
};
const std::vector<Tuned>& TunedWorkloads() {
  static const std::vector<Tuned> kTuned = {
      {"matmul", "M=512,N=512,K=512", "snc2"},
      {"matmul", "M=2048,N=1024,K=1024", "snc3"},
      {"bmm", "B=4,M=256,N=256,K=512", "snc2"},
      {"bmm", "B=8,M=128,N=512,K=256", "snc3"},
      {"conv2d", "N=1,C=64,H=28,W=28,K=64,R=3,S=3,stride=1,padding=1", "snc2"},
      {"conv2d", "N=1,C=128,H=14,W=14,K=128,R=3,S=3,stride=1,padding=1", "snc3"},
      {"attention", "batch=1,heads=2,seq_q=512,seq_k=512,head_dim=128,causal=1", "snc3"},
      {"attention", "batch=1,heads=4,seq_q=256,seq_k=1024,head_dim=64,causal=2", "snc2"},
      {"softmax", "rows=1024,cols=2048", "snc2"},
      {"softmax", "rows=512,cols=8192", "snc3"},
      {"layernorm", "rows=1024,cols=2048", "snc3"},
      {"rmsnorm", "rows=2048,cols=4096", "snc2"},
  };
  return kTuned;
}

struct Triple {
  std::string kernel;
  Dims dims;
  std::string target;
};

// 300 random triples: a tuned workload's dims, each dim of at least 16 scaled by 2^k (k uniform
// in -2..2) and rounded to a multiple of 8, on a random target; redrawn until the kernel accepts
// the problem there.
std::vector<Triple> RandomTriples(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Triple> triples;
  const std::vector<std::string> targets = {"snc2", "snc3"};
  while (static_cast<int>(triples.size()) < count) {
    const Tuned& base = TunedWorkloads()[rng() % TunedWorkloads().size()];
    Dims dims = *Dims::Parse(base.shape);
    Dims scaled;
    for (const auto& [name, value] : dims.items()) {
      int64_t v = value;
      if (value >= 16) {
        const int k = static_cast<int>(rng() % 5) - 2;
        v = std::max<int64_t>(8, std::llround(std::ldexp(static_cast<double>(value), k) / 8) * 8);
      }
      scaled.Set(name, v);
    }
    const std::string target = targets[rng() % targets.size()];
    auto resolved = kernels::Resolve(
        {.kernel = base.kernel, .dims = scaled, .dtype = "bf16", .target = target});
    if (!resolved.ok()) continue;
    triples.push_back({base.kernel, scaled, target});
  }
  return triples;
}

// The header's BestConfig for each line "kernel canonical_dims dtype target" of argv[1].
constexpr char kHeaderProgram[] = R"cc(
#include <fstream>
#include <iostream>
#include <string>
#include "tuned_configs.h"
  int main(int, char** argv) {
    std::ifstream in(argv[1]);
    std::string kernel, dims, dtype, target;
    while (in >> kernel >> dims >> dtype >> target) {
      std::cout << "[" << tessel_tuned::BestConfig(kernel, dims, dtype, target) << "]\n";
    }
  }
)cc";

// The Python module's answer for each line of sys.argv[2], from the snapshot sys.argv[1].
constexpr char kPythonProgram[] = R"py(
import sys, tessel
lookup = tessel.Lookup(snapshot=sys.argv[1])
for line in open(sys.argv[2]):
    kernel, dims, dtype, target = line.split()
    found = lookup.find(kernel, dims, dtype, target)
    print("[%s] %s%s" % (found["config"], found["match"], " adapted" if found["adapted"] else ""))
)py";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The config between the brackets of an output line.
std::string Bracketed(const std::string& line) {
  const size_t open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos
             ? "<no answer>"
             : line.substr(open + 1, close - open - 1);
}

// OK when `config` (the kernel's default for the workload when empty) simulates as valid there.
absl::Status SimulatesAsValid(const Triple& t, const std::string& config) {
  auto resolved =
      kernels::Resolve({.kernel = t.kernel, .dims = t.dims, .dtype = "bf16", .target = t.target});
  if (!resolved.ok()) return resolved.status();
  Config parsed = resolved->kernel->Default(resolved->problem, resolved->target);
  if (!config.empty()) {
    auto c = Config::Parse(config);
    if (!c.ok()) return c.status();
    parsed = *c;
  }
  return kernels::Evaluate(*resolved->kernel, resolved->problem, parsed, resolved->target, {})
      .status();
}

TEST(LookupValidityTest, EveryDoorAnswersAConfigValidForTheAskedWorkload) {
  testing::TempDir tmp("tessel-lookup-validity-");
  const std::string db = tmp.File("tuned.db");
  for (const Tuned& t : TunedWorkloads()) {
    testing::RunResult tuned =
        testing::Run({TESSEL_CLI_BIN, "tune", t.kernel, "--shape", t.shape, "--target", t.target,
                      "--budget", "8", "--db", db, "-q"},
                     tmp.path());
    ASSERT_EQ(tuned.exit_code, 0) << t.kernel << " " << t.shape << ": " << tuned.err;
  }
  const std::string snapshot = tmp.File("tuned.snapshot");
  const std::string header_dir = tmp.File("include");
  std::filesystem::create_directories(header_dir);
  for (const auto& [format, out] : std::vector<std::pair<std::string, std::string>>{
           {"snapshot", snapshot}, {"header", header_dir + "/tuned_configs.h"}}) {
    testing::RunResult exported = testing::Run(
        {TESSEL_CLI_BIN, "export", "--db", db, "--format", format, "--out", out}, tmp.path());
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
  }

  const std::vector<Triple> triples = RandomTriples(300, /*seed=*/15);
  const std::string queries = tmp.File("queries.txt");
  {
    std::ofstream out(queries);
    for (const Triple& t : triples) {
      out << t.kernel << " " << t.dims.Canonical() << " bf16 " << t.target << "\n";
    }
  }

  // The header, compiled with the compiler that built this test.
  const std::string program = tmp.File("header_lookup.cc");
  std::ofstream(program) << kHeaderProgram;
  testing::RunResult compiled = testing::Run(
      {TESSEL_CXX, "-std=c++20", "-I", header_dir, program, "-o", tmp.File("header_lookup")},
      tmp.path());
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  testing::RunResult header = testing::Run({tmp.File("header_lookup"), queries}, tmp.path());
  ASSERT_EQ(header.exit_code, 0) << header.err;
  const std::vector<std::string> header_lines = Lines(header.out);

  const std::string python = tmp.File("lookup.py");
  std::ofstream(python) << kPythonProgram;
  testing::RunResult from_python =
      testing::Run({"/usr/bin/env", "PYTHONPATH=" + std::string(TESSEL_PYTHON_MODULE_DIR),
                    "/usr/bin/python3", python, snapshot, queries},
                   tmp.path());
  ASSERT_EQ(from_python.exit_code, 0) << from_python.err;
  const std::vector<std::string> python_lines = Lines(from_python.out);
  ASSERT_EQ(header_lines.size(), triples.size());
  ASSERT_EQ(python_lines.size(), triples.size());

  auto server = testing::StartServerProcess(TESSEL_SERVER_BIN, tmp.path(), db, {});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::Client::Connect(server->address);
  ASSERT_TRUE(client.ok()) << client.status();
  client::LookupOptions options;
  options.snapshot_path = snapshot;
  auto libtessel = client::Lookup::Create(options);
  ASSERT_TRUE(libtessel.ok()) << libtessel.status();

  // Per door: answers, invalid answers, adapted answers, defaults.
  struct Tally {
    int answers = 0, invalid = 0, adapted = 0, defaults = 0;
  };
  std::map<std::string, Tally> tally;
  std::map<std::string, int> match_levels;
  auto check = [&](const std::string& door, const Triple& t, const std::string& config,
                   bool adapted, bool is_default) {
    Tally& door_tally = tally[door];
    ++door_tally.answers;
    door_tally.adapted += adapted ? 1 : 0;
    door_tally.defaults += is_default ? 1 : 0;
    const absl::Status valid = SimulatesAsValid(t, config);
    if (!valid.ok()) {
      ++door_tally.invalid;
      ADD_FAILURE() << door << " answered " << t.kernel << " " << t.dims.Canonical() << " on "
                    << t.target << " with '" << config << "': " << valid.message();
    }
  };
  for (size_t i = 0; i < triples.size(); ++i) {
    const Triple& t = triples[i];
    v1::Workload workload;
    workload.set_kernel(t.kernel);
    workload.set_dtype("bf16");
    workload.set_target(t.target);
    for (const auto& [name, value] : t.dims.items()) {
      v1::Dim* dim = workload.add_dims();
      dim->set_name(name);
      dim->set_value(value);
    }
    auto served = (*client)->Lookup(workload);
    ASSERT_TRUE(served.ok()) << served.status();
    check("server", t, served->config(), served->adapted(), served->match() == "default");
    ++match_levels[served->match()];

    auto found = (*libtessel)->Find(t.kernel, t.dims, "bf16", t.target);
    ASSERT_TRUE(found.ok()) << found.status();
    check("snapshot", t, found->config, found->adapted, found->match == "default");
    EXPECT_EQ(found->config, served->config()) << "libtessel and the server serve one rule";

    const std::string from_header = Bracketed(header_lines[i]);
    check("header", t, from_header, false, from_header.empty());
    check("python", t, Bracketed(python_lines[i]),
          python_lines[i].find(" adapted") != std::string::npos,
          python_lines[i].find(" default") != std::string::npos);
  }
  for (const auto& [door, t] : tally) {
    std::printf("%-8s %d answers: %d invalid, %d adapted, %d fell back to the default\n",
                door.c_str(), t.answers, t.invalid, t.adapted, t.defaults);
    EXPECT_EQ(t.answers, 300);
    EXPECT_EQ(t.invalid, 0) << door;
  }
  for (const auto& [level, n] : match_levels)
    std::printf("server match %s: %d\n", level.c_str(), n);
  // The sweep is worth something only if it exercised the rule: some answers were adapted.
  EXPECT_GT(tally["server"].adapted, 0);
}

}  // namespace
}  // namespace tessel
