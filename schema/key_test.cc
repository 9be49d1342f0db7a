#include "schema/key.h"

#include <gtest/gtest.h>

#include <cmath>

#include "schema/migrations.h"

namespace tessel {
namespace {

TEST(DimsTest, ParsesNamedDimsInGivenOrder) {
  auto dims = Dims::Parse("M=4096, N=512,K=128");
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(dims->ToString(), "M=4096,N=512,K=128");
  EXPECT_EQ(dims->Canonical(), "K=128,M=4096,N=512");
  EXPECT_EQ(dims->Get("N"), 512);
  EXPECT_FALSE(dims->Get("B").has_value());
}

TEST(DimsTest, EqualityIgnoresOrder) {
  EXPECT_EQ(*Dims::Parse("M=1,N=2"), *Dims::Parse("N=2,M=1"));
  EXPECT_FALSE(*Dims::Parse("M=1,N=2") == *Dims::Parse("N=1,M=2"));
}

TEST(DimsTest, RejectsMalformedShapesWithAReason) {
  struct Case {
    const char* text;
    const char* message_part;
  };
  for (const Case& c : {Case{"", "empty shape"}, Case{"M", "expected NAME=VALUE"},
                        Case{"M=", "missing value"}, Case{"M=abc", "not an integer"},
                        Case{"M=-4", "must not be negative"}, Case{"M=1,M=2", "more than once"},
                        Case{"=5", "bad name"}, Case{"M=12x", "not an integer"}}) {
    auto dims = Dims::Parse(c.text);
    ASSERT_FALSE(dims.ok()) << c.text;
    EXPECT_EQ(dims.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(dims.status().message().find(c.message_part), std::string::npos)
        << c.text << " -> " << dims.status();
  }
}

TEST(ConfigTest, RoundTripsThroughItsStringForm) {
  auto config = Config::Parse("tile_m=128,loop_order=mnk,bufs=2");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->ToString(), "tile_m=128,loop_order=mnk,bufs=2");
  EXPECT_EQ(*Config::Parse(config->ToString()), *config);
  EXPECT_EQ(*config->GetInt("tile_m"), 128);
  EXPECT_FALSE(config->GetInt("loop_order").ok());
  EXPECT_FALSE(config->GetInt("absent").ok());
}

TEST(DimsDistanceTest, CountsDoublingsAndRefusesDifferentDims) {
  EXPECT_DOUBLE_EQ(DimsDistance(*Dims::Parse("M=1024,N=512"), *Dims::Parse("N=512,M=1024")), 0);
  EXPECT_DOUBLE_EQ(DimsDistance(*Dims::Parse("M=1024,N=512"), *Dims::Parse("M=4096,N=256")), 3);
  EXPECT_TRUE(std::isinf(DimsDistance(*Dims::Parse("M=1"), *Dims::Parse("N=1"))));
  EXPECT_TRUE(std::isinf(DimsDistance(*Dims::Parse("M=1"), *Dims::Parse("M=1,N=1"))));
}

TEST(DimsLogsTest, DistanceIsDimsDistanceBitForBit) {
  const Dims a = *Dims::Parse("M=3000,N=77,K=1000");
  const Dims b = *Dims::Parse("K=4096,M=10,N=123");
  EXPECT_EQ(DimsLogs(a).DistanceTo(DimsLogs(b)), DimsDistance(a, b));
  EXPECT_EQ(DimsLogs(b).DistanceTo(DimsLogs(a)), DimsDistance(a, b));
  EXPECT_EQ(DimsLogs(a).DistanceTo(DimsLogs(a)), 0);
  EXPECT_TRUE(std::isinf(DimsLogs(a).DistanceTo(DimsLogs(*Dims::Parse("M=1,N=1,B=1")))));
}

TEST(MigrationsTest, AreEmbeddedInAscendingUniqueVersionOrder) {
  const auto& migrations = Migrations();
  ASSERT_FALSE(migrations.empty());
  EXPECT_EQ(migrations.front().version, 1);
  for (size_t i = 1; i < migrations.size(); ++i) {
    EXPECT_LT(migrations[i - 1].version, migrations[i].version);
  }
  EXPECT_NE(migrations.front().sql.find("CREATE TABLE trials"), std::string_view::npos);
}

}  // namespace
}  // namespace tessel
