// The catalog describes every kernel from its example problem (issue 14, finding 4: a problem of
// all-1024 dims is invalid for attention and conv2d, which then had no params and no defaults).
#include "server/catalog.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "server/wire.h"
#include "tests/testing/temp_dir.h"

namespace tessel::server {
namespace {

TEST(CatalogTest, ListKernelsGivesEveryKernelItsParams) {
  const v1::ListKernelsResponse response = Catalog::ListKernels();
  ASSERT_EQ(response.kernels_size(), static_cast<int>(kernels::AllKernels().size()));
  std::set<std::string> listed;
  for (const v1::KernelInfo& info : response.kernels()) {
    listed.insert(info.name());
    EXPECT_GT(info.params_size(), 0) << info.name() << " lists no params";
    EXPECT_GT(info.dims_size(), 0) << info.name();
  }
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    EXPECT_TRUE(listed.contains(std::string(kernel->name()))) << kernel->name() << " is not listed";
  }
}

TEST(CatalogTest, ExportWritesADefaultConfigForEveryKernel) {
  testing::TempDir dir("tessel-catalog-test-");
  auto store = Store::Open(dir.File("t.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  Catalog catalog(store->get());
  auto exported = catalog.Export(v1::ExportRequest());
  ASSERT_TRUE(exported.ok()) << exported.status();
  std::set<std::string> with_default;
  for (const v1::DefaultConfig& d : exported->defaults()) {
    EXPECT_FALSE(d.config().empty()) << d.kernel() << " " << d.target();
    if (d.target() == "snc2") with_default.insert(d.kernel());
  }
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    EXPECT_TRUE(with_default.contains(std::string(kernel->name())))
        << kernel->name() << " has no default config on snc2";
  }
  store->reset();
}

// Two configs of matmul valid for both shapes the test asks (the default first).
std::vector<std::string> TwoMatmulConfigs(const kernels::ResolvedWorkload& a,
                                          const kernels::ResolvedWorkload& b) {
  const kernels::Kernel& matmul = *a.kernel;
  std::vector<std::string> configs = {matmul.Default(a.problem, a.target).ToString()};
  auto space_a = matmul.SpaceFor(a.problem, a.target);
  auto space_b = matmul.SpaceFor(b.problem, b.target);
  if (!space_a.ok() || !space_b.ok()) return configs;
  for (uint64_t i = 0; i < space_a->Size() && configs.size() < 2; ++i) {
    const Config config = space_a->Decode(i);
    if (config.ToString() != configs[0] && space_a->Validate(config).ok() &&
        space_b->Validate(config).ok()) {
      configs.push_back(config.ToString());
    }
  }
  return configs;
}

v1::Workload Matmul(int64_t m) {
  v1::Workload workload;
  workload.set_kernel("matmul");
  for (auto [name, value] : {std::pair{"M", m}, {"N", int64_t{512}}, {"K", int64_t{512}}}) {
    v1::Dim* dim = workload.add_dims();
    dim->set_name(name);
    dim->set_value(value);
  }
  return workload;
}

// Answers are cached; a publication must drop every cached answer it changes: the published
// workload's own, and the kernel's answers that came through the graded fallback. An exact
// answer for another workload stays right.
TEST(CatalogTest, APublicationChangesEveryCachedAnswerItAffects) {
  testing::TempDir dir("tessel-catalog-test-");
  auto store = Store::Open(dir.File("t.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  Catalog catalog(store->get());
  auto a = kernels::Resolve(Matmul(512));
  auto b = kernels::Resolve(Matmul(1024));
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<std::string> configs = TwoMatmulConfigs(*a, *b);
  ASSERT_EQ(configs.size(), 2u);
  auto publish = [&](const kernels::ResolvedWorkload& w, const std::string& config, double ns) {
    BestRecord best;
    best.workload = WorkloadRecordFor(w);
    best.kernel_version = w.kernel->version();
    best.target_version = w.target.version;
    best.config = config;
    best.time_ns = ns;
    ASSERT_TRUE(catalog.Publish(best).ok());
  };
  auto lookup = [&](int64_t m) {
    v1::LookupRequest request;
    *request.mutable_workload() = Matmul(m);
    auto response = catalog.Lookup(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::LookupResponse();
  };

  publish(*a, configs[1], 1000);
  EXPECT_EQ(lookup(512).match(), "exact");
  EXPECT_EQ(lookup(512).config(), configs[1]);
  EXPECT_EQ(lookup(1024).match(), "nearest");  // cached now
  EXPECT_EQ(lookup(1024).config(), configs[1]);
  EXPECT_EQ(lookup(2048).tuned_dims(), "K=512,M=512,N=512");  // cached, from a

  publish(*b, configs[0], 2000);  // b is tuned: its fallback answer must go
  EXPECT_EQ(lookup(2048).tuned_dims(), "K=512,M=1024,N=512");  // b is nearer now
  EXPECT_EQ(lookup(1024).match(), "exact");
  EXPECT_EQ(lookup(1024).config(), configs[0]);
  EXPECT_EQ(lookup(512).config(), configs[1]);  // a's exact answer stays right

  publish(*a, configs[0], 900);  // a's new best replaces its cached answer
  EXPECT_EQ(lookup(512).config(), configs[0]);
  EXPECT_EQ(lookup(512).time_ns(), 900);
  EXPECT_EQ(lookup(1024).time_ns(), 2000);
  store->reset();
}

}  // namespace
}  // namespace tessel::server
