#include "server/client_quota.h"

#include <utility>
#include <vector>

#include "schema/strings.h"

namespace tessel::server {

std::string ClientOfPeer(std::string_view peer) {
  if (peer.empty() || peer == "unknown") return "in-process";  // gRPC's in-process transport
  if (peer.substr(0, 5) != "ipv4:" && peer.substr(0, 5) != "ipv6:") return std::string(peer);
  const size_t colon = peer.rfind(':');
  if (colon == std::string_view::npos || colon < 5) return std::string(peer);
  return std::string(peer.substr(0, colon));
}

absl::Status ClientQuota::OpenWatch(const std::string& client) {
  absl::MutexLock lock(&mu_);
  int& open = watches_[client];
  if (open >= limits_.max_watch_streams) {
    return absl::ResourceExhaustedError(StrCat("client ", Shown(client), " has ", open,
                                               " WatchJob streams open (limit ",
                                               limits_.max_watch_streams, ")"));
  }
  ++open;
  return absl::OkStatus();
}

void ClientQuota::CloseWatch(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = watches_.find(client);
  if (it == watches_.end()) return;
  if (--it->second <= 0) watches_.erase(it);
}

absl::Status ClientQuota::MayStartJob(const std::string& client,
                                      const std::function<bool(int64_t)>& active) {
  std::vector<int64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(client);
    if (it == jobs_.end() || static_cast<int>(it->second.size()) < limits_.max_active_jobs) {
      return absl::OkStatus();
    }
    ids.assign(it->second.begin(), it->second.end());
  }
  // At the limit: forget the jobs that ended (asked without the lock), then decide.
  std::vector<int64_t> ended;
  for (int64_t id : ids) {
    if (!active(id)) ended.push_back(id);
  }
  absl::MutexLock lock(&mu_);
  std::set<int64_t>& mine = jobs_[client];
  for (int64_t id : ended) mine.erase(id);
  if (static_cast<int>(mine.size()) >= limits_.max_active_jobs) {
    return absl::ResourceExhaustedError(StrCat("client ", Shown(client), " has ", mine.size(),
                                               " queued or running jobs (limit ",
                                               limits_.max_active_jobs, ")"));
  }
  return absl::OkStatus();
}

void ClientQuota::StartedJob(const std::string& client, int64_t job_id) {
  absl::MutexLock lock(&mu_);
  jobs_[client].insert(job_id);
}

}  // namespace tessel::server
