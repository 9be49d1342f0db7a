// libtessel: the runtime lookup a program links to find the tuned config for a kernel call.
//
//   Lookup::Find(kernel, dims, dtype, target)
//     1. in-process cache          (a hit is a hash probe; see Lookup::FindPrepared)
//     2. snapshot file             (immutable SQLite export, read into memory; needs no server)
//     3. server                    (read-through gRPC Lookup, optionally pinned to a snapshot)
//     4. local cache file          (the server's earlier answers, used while it is unreachable)
//   with graded answers: exact, nearest (same kernel/dtype/target, closest dims), other_target
//   (same problem tuned on another target), default (the kernel's default config).
//
// Links only the schema, gRPC and SQLite. Thread-safe, and concurrent lookups do not serialise:
// cached answers are read without a lock, counters are kept per thread, and no lock is held
// across a server call.
#ifndef TESSEL_CLIENT_LOOKUP_H_
#define TESSEL_CLIENT_LOOKUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "client/snapshot.h"
#include "schema/key.h"

namespace tessel::client {

struct LookupOptions {
  // Exported snapshot file (tessel export --format snapshot). Optional.
  std::string snapshot_path;
  // tessel-server address (HOST:PORT) asked when the snapshot has no exact answer. Optional.
  std::string server_address;
  // Where the server's answers are kept so a restarted program, or one whose server went away,
  // still finds them. Optional; a SQLite file created when absent.
  std::string cache_path;
  // Ask the server for answers as of this snapshot id (0 = its latest). Processes pinned to the
  // same snapshot get the same configs while the server publishes newer results.
  int64_t pin_snapshot = 0;
  // Deadline of one server call. A miss pays it once per key while the server is down.
  int server_timeout_ms = 500;
  // Ask the server to tune workloads that had no exact answer (once per workload, in the
  // background), with this budget. Submitting needs a `tuner` token on a server with a token
  // file; with a `reader` token the requests are refused and only counted.
  bool tune_misses = false;
  int tune_budget = 64;
  // Who this program is to a server with a token file: the token itself (not a file name), sent
  // as `authorization: Bearer TOKEN` with every server call. A `reader` token is enough for
  // lookups. Empty: the token in the file named by $TESSEL_TOKEN_FILE when that is set (read
  // once, by Create, as the CLI and tessel-worker do), else none. Never logged, and never part
  // of an error message.
  std::string token;
  // A PEM file of root certificates that verify the server's TLS certificate; empty speaks
  // plaintext to the server.
  std::string tls_ca_file;
  // A PEM certificate chain and its private key, presented to a server that requires client
  // certificates (mutual TLS, the server's --tls-client-ca). Both or neither, with tls_ca_file.
  std::string tls_cert_file;
  std::string tls_key_file;
};

class Lookup {
 public:
  // Opens the snapshot and cache files and connects lazily to the server. InvalidArgument when no
  // source is configured, when the token is not well formed, when $TESSEL_TOKEN_FILE names a
  // file that holds no token, or when a TLS file cannot be read or the TLS files do not go
  // together; the snapshot's or cache's error when one cannot be opened.
  static absl::StatusOr<std::unique_ptr<Lookup>> Create(const LookupOptions& options);
  ~Lookup();
  Lookup(const Lookup&) = delete;
  Lookup& operator=(const Lookup&) = delete;

  // The best known config for the workload; see the header comment for the order of sources.
  // Answers are cached in-process for the life of this object. NotFound when no source knows
  // the kernel; the server's error when it is the only source and fails (UNAUTHENTICATED for a
  // missing or unknown token, PERMISSION_DENIED for a token without the reader role).
  absl::StatusOr<LookupResult> Find(std::string_view kernel, const Dims& dims,
                                    std::string_view dtype = "bf16",
                                    std::string_view target = "snc2");

  // For hot paths: prepare the key once (WorkloadKey(...)), then FindPrepared costs one hash
  // probe, lock-free (client/answer_table.h), when cached. Returns nullptr when not cached yet
  // (call Find once). The pointer stays valid for the life of this object.
  const LookupResult* FindPrepared(const std::string& workload_key) const;

  // Server calls that failed, lookups answered from each source (for tests and metrics).
  struct Counters {
    int64_t cache_hits = 0;
    int64_t snapshot_answers = 0;
    int64_t server_answers = 0;
    int64_t local_cache_answers = 0;
    int64_t server_failures = 0;
    int64_t tune_requests = 0;
  };
  Counters counters() const;

 private:
  class Impl;
  explicit Lookup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::client

#endif  // TESSEL_CLIENT_LOOKUP_H_
