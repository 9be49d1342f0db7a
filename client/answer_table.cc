#include "client/answer_table.h"

#include "absl/hash/hash.h"

namespace tessel::client {
namespace {

constexpr size_t kInitialCapacity = 64;

}  // namespace

AnswerTable::Slots::Slots(size_t capacity)
    : mask(capacity - 1), slot(new std::atomic<const Entry*>[capacity]) {
  for (size_t i = 0; i < capacity; ++i) slot[i].store(nullptr, std::memory_order_relaxed);
}

AnswerTable::AnswerTable() {
  arrays_.push_back(std::make_unique<Slots>(kInitialCapacity));
  current_.store(arrays_.back().get(), std::memory_order_release);
}

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
  const Entry* entry = Probe(*current_.load(std::memory_order_acquire), Hash(key), key);
  return entry ? &entry->value : nullptr;
}

const LookupResult* AnswerTable::Insert(std::string_view key, const LookupResult& value) {
  // Copy the answer before taking the lock, so concurrent inserts serialise only on the probe.
  auto entry = std::make_unique<Entry>(Entry{Hash(key), std::string(key), value});
  std::lock_guard<std::mutex> lock(mu_);
  Slots* slots = arrays_.back().get();
  if (const Entry* existing = Probe(*slots, entry->hash, key)) return &existing->value;
  if (2 * (entries_.size() + 1) > slots->mask + 1) {
    // Fill the bigger array completely before readers can see it.
    auto grown = std::make_unique<Slots>(2 * (slots->mask + 1));
    for (const auto& e : entries_) Place(*grown, e.get());
    slots = grown.get();
    arrays_.push_back(std::move(grown));
    current_.store(slots, std::memory_order_release);
  }
  entries_.push_back(std::move(entry));
  Place(*slots, entries_.back().get());
  return &entries_.back()->value;
}

size_t AnswerTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace tessel::client
