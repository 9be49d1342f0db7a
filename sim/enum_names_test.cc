#include "sim/enum_names.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel::sim {
namespace {

enum class Color { kRed, kGreen, kBlue };
constexpr EnumName<Color> kColorNames[] = {{Color::kRed, "red"}, {Color::kGreen, "green"}};

TEST(EnumNamesTest, NamesAndValuesRoundTrip) {
  EXPECT_EQ(NameIn(kColorNames, Color::kGreen, "?"), "green");
  EXPECT_EQ(ValueIn(kColorNames, "red"), Color::kRed);
  EXPECT_EQ(NamesIn(kColorNames), "red, green");
}

TEST(EnumNamesTest, UnlistedValuesAndNamesAreNotFound) {
  EXPECT_EQ(NameIn(kColorNames, Color::kBlue, "?"), "?");
  EXPECT_EQ(ValueIn(kColorNames, "blue"), std::nullopt);
}

TEST(EnumNamesTest, ParseNameInNamesTheKindAndTheKnownNames) {
  absl::StatusOr<Color> green = ParseNameIn(kColorNames, "green", "color");
  ASSERT_TRUE(green.ok());
  EXPECT_EQ(*green, Color::kGreen);
  absl::StatusOr<Color> blue = ParseNameIn(kColorNames, "blue", "color");
  EXPECT_EQ(blue.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(blue.status().message(), "unknown color 'blue' (known: red, green)");
}

}  // namespace
}  // namespace tessel::sim
