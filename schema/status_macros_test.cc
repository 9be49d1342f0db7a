// Tests for TESSEL_RETURN_IF_ERROR and TESSEL_ASSIGN_OR_RETURN.
#include "schema/status_macros.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace tessel {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

absl::Status CheckEven(int x) { return Half(x).status(); }

absl::StatusOr<int> Quarter(int x) {
  TESSEL_ASSIGN_OR_RETURN(int half, Half(x));
  TESSEL_ASSIGN_OR_RETURN(const int quarter, Half(half));  // two in one scope
  return quarter;
}

absl::Status QuarterInto(int x, int* out) {
  TESSEL_ASSIGN_OR_RETURN(*out, Half(x));  // an existing lvalue
  TESSEL_ASSIGN_OR_RETURN(*out, Half(*out));
  return absl::OkStatus();
}

absl::Status BothEven(int a, int b, int* evaluations) {
  ++*evaluations;
  TESSEL_RETURN_IF_ERROR(CheckEven(a));
  ++*evaluations;
  TESSEL_RETURN_IF_ERROR(Half(b));  // a StatusOr works too
  ++*evaluations;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> Boxed(int x) {
  if (x < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(x);
}

absl::StatusOr<int> Unbox(int x) {
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<int> box, Boxed(x));  // move-only values
  return *box;
}

TEST(StatusMacrosTest, AssignOrReturnDeclaresTheValueOrReturnsTheError) {
  EXPECT_EQ(*Quarter(12), 3);
  absl::StatusOr<int> odd = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.status().message(), "odd: 3");
}

TEST(StatusMacrosTest, AssignOrReturnAssignsToAnExistingVariable) {
  int out = 0;
  EXPECT_TRUE(QuarterInto(20, &out).ok());
  EXPECT_EQ(out, 5);
  EXPECT_EQ(QuarterInto(7, &out).message(), "odd: 7");
}

TEST(StatusMacrosTest, AssignOrReturnMovesMoveOnlyValues) {
  EXPECT_EQ(*Unbox(4), 4);
  EXPECT_EQ(Unbox(-1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtTheFirstErrorOfAStatusOrStatusOr) {
  int evaluations = 0;
  EXPECT_TRUE(BothEven(2, 4, &evaluations).ok());
  EXPECT_EQ(evaluations, 3);
  evaluations = 0;
  EXPECT_EQ(BothEven(1, 4, &evaluations).message(), "odd: 1");
  EXPECT_EQ(evaluations, 1);
  evaluations = 0;
  EXPECT_EQ(BothEven(2, 5, &evaluations).message(), "odd: 5");
  EXPECT_EQ(evaluations, 2);
}

}  // namespace
}  // namespace tessel
