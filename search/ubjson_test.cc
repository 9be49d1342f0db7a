#include "search/ubjson.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessel::search {
namespace {

// nlohmann::json writes UBJSON plain, with counts, and with counts and types: read each.
std::vector<std::string> Encodings(const nlohmann::json& doc) {
  std::vector<std::string> out;
  for (const auto& [size, type] : {std::pair{false, false}, {true, false}, {true, true}}) {
    const std::vector<uint8_t> bytes = nlohmann::json::to_ubjson(doc, size, type);
    out.emplace_back(bytes.begin(), bytes.end());
  }
  return out;
}

TEST(UbjReaderTest, ReadsTheAskedPartsAndSkipsTheRest) {
  const nlohmann::json doc = {
      {"a", {{"nested", {1, "two", {{"x", nullptr}}, true, 2.5}}, {"s", "skip me"}}},
      {"ints", {-3, 0, 200, 70000, int64_t{1} << 40}},
      {"floats", {0.5, -1.25, 3.0}},
      {"name", "base"},
      {"empty", nlohmann::json::array()},
  };
  for (const std::string& bytes : Encodings(doc)) {
    UbjReader r(bytes.data(), bytes.size());
    ASSERT_TRUE(r.EnterObject());
    std::string_view key;
    bool done = false;
    std::vector<int64_t> ints;
    std::vector<float> floats, none = {1};
    std::string name;
    int keys = 0;
    while (r.Next(&key, &done)) {
      ++keys;
      if (key == "ints") {
        ASSERT_TRUE(r.Numbers(&ints));
      } else if (key == "floats") {
        ASSERT_TRUE(r.Numbers(&floats));
      } else if (key == "name") {
        ASSERT_TRUE(r.String(&name));
      } else if (key == "empty") {
        ASSERT_TRUE(r.Numbers(&none));
      } else {
        ASSERT_TRUE(r.Skip()) << key;
      }
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(keys, 5);
    EXPECT_EQ(ints, (std::vector<int64_t>{-3, 0, 200, 70000, int64_t{1} << 40}));
    EXPECT_EQ(floats, (std::vector<float>{0.5f, -1.25f, 3.0f}));
    EXPECT_EQ(name, "base");
    EXPECT_TRUE(none.empty());
  }
}

TEST(UbjReaderTest, ArraysOfObjectsAreWalkedItemByItem) {
  const nlohmann::json doc = {{{"v", {1, 2}}}, {{"v", {3}}}, {{"w", 0}}};
  for (const std::string& bytes : Encodings(doc)) {
    UbjReader r(bytes.data(), bytes.size());
    ASSERT_TRUE(r.EnterArray());
    bool end = false, done = false;
    std::string_view key;
    std::vector<int64_t> all, v;
    int items = 0;
    while (r.NextItem(&end)) {
      ++items;
      ASSERT_TRUE(r.EnterObject());
      while (r.Next(&key, &done)) {
        if (key == "v") {
          ASSERT_TRUE(r.Numbers(&v));
          all.insert(all.end(), v.begin(), v.end());
        } else {
          ASSERT_TRUE(r.Skip());
        }
      }
      ASSERT_TRUE(done);
    }
    EXPECT_TRUE(end);
    EXPECT_EQ(items, 3);
    EXPECT_EQ(all, (std::vector<int64_t>{1, 2, 3}));
  }
}

TEST(UbjReaderTest, ATruncatedOrWrongDocumentIsAnErrorNotAnOverread) {
  const nlohmann::json doc = {{"ints", {1, 2, 3, 400000}}, {"s", "text"}, {"f", {1.5}}};
  for (const std::string& bytes : Encodings(doc)) {
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      // A copy of exactly `cut` bytes, so that a read past its end is caught by ASan/valgrind.
      const std::vector<char> part(bytes.begin(), bytes.begin() + std::ptrdiff_t(cut));
      UbjReader r(part.data(), part.size());
      std::string_view key;
      bool done = false, ok = r.EnterObject();
      std::vector<int64_t> ints;
      std::vector<float> floats;
      std::string s;
      while (ok && r.Next(&key, &done)) {
        ok = key == "ints" ? r.Numbers(&ints) : key == "f" ? r.Numbers(&floats) : r.String(&s);
      }
      EXPECT_FALSE(ok && done) << "a document cut at " << cut << " of " << bytes.size()
                               << " bytes read as whole";
    }
  }
  // A float that is not a whole number is not an integer.
  const std::string bytes = Encodings({{"x", {1.5}}})[0];
  UbjReader r(bytes.data(), bytes.size());
  std::string_view key;
  bool done = false;
  std::vector<int64_t> ints;
  ASSERT_TRUE(r.EnterObject());
  ASSERT_TRUE(r.Next(&key, &done));
  EXPECT_FALSE(r.Numbers(&ints));
}

}  // namespace
}  // namespace tessel::search
