// Per-client limits of the TesselService: open WatchJob streams and active (queued or running)
// jobs each client may have. A client is the peer's address without its port ("ipv4:10.0.0.7"),
// so one machine's build processes share a quota; in-process callers share one too.
#ifndef TESSEL_SERVER_CLIENT_QUOTA_H_
#define TESSEL_SERVER_CLIENT_QUOTA_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace tessel::server {

struct ClientLimits {
  int max_watch_streams = 256;  // open WatchJob calls per client
  int max_active_jobs = 256;    // queued or running jobs a client submitted
};

// "ipv4:127.0.0.1:5000" -> "ipv4:127.0.0.1", "ipv6:[::1]:5000" -> "ipv6:[::1]", no peer (gRPC's
// in-process transport says "unknown") -> "in-process"; other forms (unix sockets) unchanged.
std::string ClientOfPeer(std::string_view peer);

class ClientQuota {
 public:
  explicit ClientQuota(ClientLimits limits) : limits_(limits) {}

  // RESOURCE_EXHAUSTED naming the limit when `client` has max_watch_streams open; else counts one
  // more, to be given back with CloseWatch.
  absl::Status OpenWatch(const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);
  void CloseWatch(const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);

  // RESOURCE_EXHAUSTED when `client` has max_active_jobs jobs for which `active` holds (the
  // others are forgotten on the way).
  absl::Status MayStartJob(const std::string& client, const std::function<bool(int64_t)>& active)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Counts `job_id` as started by `client`.
  void StartedJob(const std::string& client, int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const ClientLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, int> watches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<int64_t>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_CLIENT_QUOTA_H_
