#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "sim/target.h"

namespace tessel::kernels {
namespace {

using ::testing::HasSubstr;

Space TwoParams() {
  return Space({{"a", {"1", "2", "3"}, ""}, {"b", {"x", "y"}, ""}},
               [](const Config& c) -> absl::Status {
                 if (c.Get("a") == "3" && c.Get("b") == "y") {
                   return absl::InvalidArgumentError("a=3 needs b=x");
                 }
                 return absl::OkStatus();
               });
}

TEST(SpaceTest, SizeIsTheProductOfValueCounts) { EXPECT_EQ(TwoParams().Size(), 6u); }

TEST(SpaceTest, DecodeVariesTheFirstParamFastestAndEncodeInvertsIt) {
  Space space = TwoParams();
  EXPECT_EQ(space.Decode(0).ToString(), "a=1,b=x");
  EXPECT_EQ(space.Decode(1).ToString(), "a=2,b=x");
  EXPECT_EQ(space.Decode(3).ToString(), "a=1,b=y");
  for (uint64_t i = 0; i < space.Size(); ++i) EXPECT_EQ(space.Encode(space.Decode(i)), i);
  EXPECT_EQ(space.Encode(Config{{"a", "4"}, {"b", "x"}}), std::nullopt);
  EXPECT_EQ(space.Encode(Config{{"a", "1"}}), std::nullopt);
}

TEST(SpaceTest, ValidateReportsUnknownValuesAndTheCheckReason) {
  Space space = TwoParams();
  EXPECT_TRUE(space.Validate(Config{{"a", "3"}, {"b", "x"}}).ok());
  absl::Status bad = space.Validate(Config{{"a", "3"}, {"b", "y"}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bad.message()), "a=3 needs b=x");
  EXPECT_THAT(std::string(space.Validate(Config{{"a", "9"}, {"b", "x"}}).message()),
              HasSubstr("a=9 is not one of 1|2|3"));
  EXPECT_THAT(std::string(space.Validate(Config{{"a", "1"}}).message()), HasSubstr("'b' missing"));
  EXPECT_THAT(std::string(space.Validate(Config{{"a", "1"}, {"b", "x"}, {"c", "1"}}).message()),
              HasSubstr("unknown parameter 'c'"));
}

// ValidateAt skips the membership checks that decoding guarantees; it must answer as
// Validate(Decode(i)) everywhere, also for spaces where decoding does not guarantee them (a
// repeated name, a param without values).
TEST(SpaceTest, ValidateAtAnswersAsValidateOfTheDecodedConfig) {
  const Space::Check a3_needs_x = [](const Config& c) -> absl::Status {
    if (c.Get("a") == "3" && c.Get("b") == "y") return absl::InvalidArgumentError("a=3 needs b=x");
    return absl::OkStatus();
  };
  const Space spaces[] = {
      TwoParams(),
      Space({{"a", {"1", "2", "3"}, ""}, {"b", {"x", "y"}, ""}, {"a", {"3", "4"}, ""}}, a3_needs_x),
      Space({{"a", {"1", "3"}, ""}, {"b", {}, ""}}, a3_needs_x),
      Space({{"a", {"1", "3"}, ""}, {"b", {"x", "y"}, ""}}, nullptr),
  };
  int invalid = 0;
  for (const Space& space : spaces) {
    for (uint64_t i = 0; i < space.Size(); ++i) {
      const absl::Status want = space.Validate(space.Decode(i));
      EXPECT_EQ(space.ValidateAt(i), want) << space.Decode(i).ToString();
      invalid += !want.ok();
    }
  }
  EXPECT_GT(invalid, 3);  // the check, the repeated name and the empty param each refuse some
}

TEST(RegistryTest, FindsMatmul) {
  ASSERT_NE(FindKernel("matmul"), nullptr);
  EXPECT_EQ(FindKernel("matmul")->name(), "matmul");
  EXPECT_EQ(FindKernel("nope"), nullptr);
  EXPECT_FALSE(AllKernels().empty());
}

// `tessel kernels` lists each kernel's parameters from its example problem: that problem must be
// valid on both targets and its space must name every parameter the kernel has (the widest
// space: e.g. attention's causal-only parameters appear).
TEST(RegistryTest, EveryKernelsExampleProblemHasItsWholeSpace) {
  EXPECT_EQ(AllKernels().size(), 7u);
  for (const char* name : {"snc2", "snc3"}) {
    const sim::Target target = *sim::LoadTarget(name);
    for (const Kernel* kernel : AllKernels()) {
      const Problem example = kernel->Example();
      EXPECT_TRUE(kernel->ValidateProblem(example, target).ok())
          << kernel->name() << " on " << name << ": " << kernel->ValidateProblem(example, target);
      absl::StatusOr<Space> space = kernel->SpaceFor(example, target);
      ASSERT_TRUE(space.ok()) << kernel->name() << ": " << space.status();
      EXPECT_GE(space->params().size(), 9u) << kernel->name();
      for (const Param& p : space->params()) {
        EXPECT_FALSE(p.help.empty()) << kernel->name() << " " << p.name;
        EXPECT_GE(p.values.size(), 1u) << kernel->name() << " " << p.name;
      }
    }
  }
  const Problem attention = FindKernel("attention")->Example();
  const Space space = *FindKernel("attention")->SpaceFor(attention, *sim::LoadTarget("snc3"));
  int causal_only = 0;
  for (const Param& p : space.params()) {
    causal_only += (p.name == "causal_skip" || p.name == "mask") && p.values.size() == 2;
  }
  EXPECT_EQ(causal_only, 2);
}

}  // namespace
}  // namespace tessel::kernels
