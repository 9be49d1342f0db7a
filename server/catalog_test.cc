// The catalog describes every kernel from its example problem (issue 14, finding 4: a problem of
// all-1024 dims is invalid for attention and conv2d, which then had no params and no defaults).
#include "server/catalog.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
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

}  // namespace
}  // namespace tessel::server
