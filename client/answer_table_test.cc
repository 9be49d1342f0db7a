#include "client/answer_table.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessel::client {
namespace {

LookupResult Answer(int n) {
  LookupResult r;
  r.config = "tile=" + std::to_string(n);
  r.time_ns = n;
  return r;
}

TEST(AnswerTableTest, FindsWhatWasInsertedAndNothingElse) {
  AnswerTable table;
  EXPECT_EQ(table.Find("a"), nullptr);
  const LookupResult* a = table.Insert("a", Answer(1));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(table.Find("a"), a);
  EXPECT_EQ(table.Find("a")->config, "tile=1");
  EXPECT_EQ(table.Find("b"), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST(AnswerTableTest, TheFirstAnswerForAKeyStays) {
  AnswerTable table;
  const LookupResult* first = table.Insert("k", Answer(1));
  EXPECT_EQ(table.Insert("k", Answer(2)), first);
  EXPECT_EQ(table.Find("k")->config, "tile=1");
  EXPECT_EQ(table.size(), 1u);
}

TEST(AnswerTableTest, PointersStayValidWhileTheTableGrows) {
  AnswerTable table;
  std::vector<const LookupResult*> kept;
  for (int i = 0; i < 5000; ++i) kept.push_back(table.Insert("key" + std::to_string(i), Answer(i)));
  EXPECT_EQ(table.size(), 5000u);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(table.Find("key" + std::to_string(i)), kept[i]) << i;
    EXPECT_EQ(kept[i]->time_ns, i);
  }
}

// Readers probe while a writer inserts and grows the table: every key a reader sees inserted
// (published through `inserted`) is found with its own answer, and no reader finds a key that
// was never inserted.
TEST(AnswerTableTest, ReadersSeeEveryPublishedInsertDuringGrowth) {
  AnswerTable table;
  constexpr int kKeys = 20000;
  std::atomic<int> inserted{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      for (int round = 0; inserted.load() < kKeys; ++round) {
        const int upto = inserted.load(std::memory_order_acquire);
        for (int i = (round * 7 + t) % 97; i < upto; i += 97) {
          const LookupResult* r = table.Find("key" + std::to_string(i));
          if (r == nullptr || r->time_ns != i) bad.fetch_add(1);
        }
        if (table.Find("absent" + std::to_string(round)) != nullptr) bad.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < kKeys; ++i) {
    table.Insert("key" + std::to_string(i), Answer(i));
    inserted.store(i + 1, std::memory_order_release);
  }
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(table.size(), static_cast<size_t>(kKeys));
}

}  // namespace
}  // namespace tessel::client
