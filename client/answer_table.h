// libtessel's in-process answer table: workload key -> LookupResult, written once per key and
// read by every lookup of a program, from any number of threads.
//
// Reads take no lock and write no shared memory: a lookup loads the current slot array, probes
// it (open addressing, linear probing) and compares keys, so threads that only read never touch
// each other's cache lines. Inserts are serialised by one mutex; an entry, once published, is
// never moved or freed before the table is, so the pointer Find returns stays valid. When the
// slot array passes half full, a new one of twice the size is published and the old one is kept
// (readers may still be probing it) until the table is destroyed: the slots cost at most twice
// the final array.
#ifndef TESSEL_CLIENT_ANSWER_TABLE_H_
#define TESSEL_CLIENT_ANSWER_TABLE_H_

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
  const LookupResult* Insert(std::string_view key, const LookupResult& value);
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

  static uint64_t Hash(std::string_view key);
  static const Entry* Probe(const Slots& slots, uint64_t hash, std::string_view key);
  static void Place(Slots& slots, const Entry* entry);

  std::atomic<Slots*> current_;
  mutable std::mutex mu_;                                            // serialises inserts
  std::vector<std::unique_ptr<Slots>> arrays_ ABSL_GUARDED_BY(mu_);  // current_ is the last
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::client

#endif  // TESSEL_CLIENT_ANSWER_TABLE_H_
