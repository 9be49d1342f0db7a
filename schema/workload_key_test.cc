// Tests for the one workload key.
#include "schema/workload_key.h"

#include <gtest/gtest.h>

namespace tessel {
namespace {

TEST(WorkloadKeyTest, SortsDimsByNameAndJoinsWithBars) {
  EXPECT_EQ(WorkloadKey("matmul", *Dims::Parse("N=2,M=1,K=3"), "bf16", "snc2"),
            "matmul|K=3,M=1,N=2|bf16|snc2");
}

TEST(WorkloadKeyTest, TheCanonicalFormGivesTheSameKey) {
  const Dims dims = *Dims::Parse("seq_q=128,batch=2");
  EXPECT_EQ(WorkloadKeyFromCanonical("attention", dims.Canonical(), "fp8", "snc3"),
            WorkloadKey("attention", dims, "fp8", "snc3"));
  EXPECT_NE(WorkloadKey("attention", dims, "fp8", "snc3"),
            WorkloadKey("attention", dims, "bf16", "snc3"));
}

}  // namespace
}  // namespace tessel
