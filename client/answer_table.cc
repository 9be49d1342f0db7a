#include "client/answer_table.h"

#include "absl/hash/hash.h"

namespace tessel::client {
namespace {

constexpr size_t kInitialCapacity = 16;  // per shard

}  // namespace

AnswerTable::Slots::Slots(size_t capacity)
    : mask(capacity - 1), slot(new std::atomic<const Entry*>[capacity]) {
  for (size_t i = 0; i < capacity; ++i) slot[i].store(nullptr, std::memory_order_relaxed);
}

AnswerTable::Shard::Shard() {
  arrays.push_back(std::make_unique<Slots>(kInitialCapacity));
  current.store(arrays.back().get(), std::memory_order_release);
}

AnswerTable::AnswerTable() = default;

uint64_t AnswerTable::Hash(std::string_view key) { return absl::Hash<std::string_view>()(key); }

const AnswerTable::Entry* AnswerTable::Probe(const Slots& slots, uint64_t hash,
                                             std::string_view key) {
  for (size_t i = hash & slots.mask;; i = (i + 1) & slots.mask) {
    const Entry* entry = slots.slot[i].load(std::memory_order_acquire);
    if (entry == nullptr) return nullptr;
    if (entry->hash == hash && entry->key == key) return entry;
  }
}

void AnswerTable::Place(Slots& slots, const Entry* entry) {
  size_t i = entry->hash & slots.mask;
  while (slots.slot[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & slots.mask;
  slots.slot[i].store(entry, std::memory_order_release);
}

const LookupResult* AnswerTable::Find(std::string_view key) const {
  const uint64_t hash = Hash(key);
  const Entry* entry = Probe(*ShardOf(hash).current.load(std::memory_order_acquire), hash, key);
  return entry ? &entry->value : nullptr;
}

const LookupResult* AnswerTable::Insert(std::string_view key, LookupResult value) {
  // Build the entry before taking the lock, so inserts serialise only on the probe.
  auto entry = std::make_unique<Entry>(Entry{Hash(key), std::string(key), std::move(value)});
  Shard& shard = ShardOf(entry->hash);
  std::lock_guard<std::mutex> lock(shard.mu);
  Slots* slots = shard.arrays.back().get();
  if (const Entry* existing = Probe(*slots, entry->hash, key)) return &existing->value;
  if (2 * (shard.entries.size() + 1) > slots->mask + 1) {
    // Fill the bigger array completely before readers can see it.
    auto grown = std::make_unique<Slots>(2 * (slots->mask + 1));
    for (const auto& e : shard.entries) Place(*grown, e.get());
    slots = grown.get();
    shard.arrays.push_back(std::move(grown));
    shard.current.store(slots, std::memory_order_release);
  }
  shard.entries.push_back(std::move(entry));
  Place(*slots, shard.entries.back().get());
  return &shard.entries.back()->value;
}

size_t AnswerTable::size() const {
  size_t total = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    total += shard.entries.size();
  }
  return total;
}

}  // namespace tessel::client
