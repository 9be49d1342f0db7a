// libtessel's in-process answer table: workload key -> LookupResult, written once per key and
// read by every lookup of a program, from any number of threads.
//
// The keys are spread by hash over kShards independent shards. Reads take no lock and write no
// shared memory: a lookup loads its shard's current slot array, probes it (open addressing,
// linear probing) and compares keys, so threads that only read never touch each other's cache
// lines. Inserts lock only their shard, so two threads inserting at once rarely wait for each
// other (and a shard's growth stalls only that shard). An entry, once published, is never moved
// or freed before the table is, so the pointer Find returns stays valid. When a shard's slot
// array passes half full, a new one of twice the size is published and the old one is kept
// (readers may still be probing it) until the table is destroyed: the slots cost at most twice
// the final arrays.
#ifndef TESSEL_CLIENT_ANSWER_TABLE_H_
#define TESSEL_CLIENT_ANSWER_TABLE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "client/snapshot.h"

namespace tessel::client {

class AnswerTable {
 public:
  AnswerTable();
  AnswerTable(const AnswerTable&) = delete;
  AnswerTable& operator=(const AnswerTable&) = delete;

  // The answer stored for `key`, or nullptr. Lock-free; valid for the life of the table.
  const LookupResult* Find(std::string_view key) const;
  // Stores `value` for `key` unless the key has an answer already; returns the stored answer
  // (the earlier one when two threads raced to insert the same key).
  const LookupResult* Insert(std::string_view key, LookupResult value);
  // Number of keys stored.
  size_t size() const;

 private:
  struct Entry {
    uint64_t hash;
    std::string key;
    LookupResult value;
  };
  struct Slots {
    explicit Slots(size_t capacity);
    size_t mask;  // capacity - 1 (a power of two)
    std::unique_ptr<std::atomic<const Entry*>[]> slot;
  };

  struct alignas(64) Shard {
    Shard();
    std::atomic<Slots*> current;
    mutable std::mutex mu;  // serialises this shard's inserts
    std::vector<std::unique_ptr<Slots>> arrays ABSL_GUARDED_BY(mu);  // current is the last
    std::vector<std::unique_ptr<Entry>> entries ABSL_GUARDED_BY(mu);
  };
  static constexpr int kShardBits = 5;
  static constexpr size_t kShards = size_t{1} << kShardBits;

  static uint64_t Hash(std::string_view key);
  static const Entry* Probe(const Slots& slots, uint64_t hash, std::string_view key);
  static void Place(Slots& slots, const Entry* entry);
  // The shard of `hash`: its top bits (the slots use the low ones).
  Shard& ShardOf(uint64_t hash) { return shards_[hash >> (64 - kShardBits)]; }
  const Shard& ShardOf(uint64_t hash) const { return shards_[hash >> (64 - kShardBits)]; }

  std::array<Shard, kShards> shards_;
};

}  // namespace tessel::client

#endif  // TESSEL_CLIENT_ANSWER_TABLE_H_
