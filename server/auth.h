// Who may call what: the server's token table (--token-file), the role each RPC needs, and the
// check every RPC handler runs first. The client's side (reading its token, the bearer metadata)
// is schema/credentials.h.
//
// Token file: one `ROLE TOKEN [NAME]` per line; `#` starts a comment; blank lines are ignored.
// NAME (letters, digits, '.', '_', '-'; up to 64) says the token belongs to one holder, such as
// one worker machine: a worker quarantined for lying then quarantines its token too, so it cannot
// come back under a new worker id (an unnamed token may be shared by a whole fleet, and refusing
// it would lock the honest workers out). Roles:
//   reader - Lookup, GetJob, ListJobs, WatchJob, ListTrials, ListKernels, ListTargets,
//            ListWorkers, Export;
//   tuner  - SubmitJob, CancelJob, Import, the AdminService (Backup, CheckDatabase, Vacuum,
//            Restore), and everything a reader may call;
//   worker - Register, Lease, Report, Heartbeat (the worker protocol only).
// A missing or unknown token is UNAUTHENTICATED, a known token of the wrong role
// PERMISSION_DENIED. Tokens are compared in time that does not depend on their content, and no
// message or log line carries one.
#ifndef TESSEL_SERVER_AUTH_H_
#define TESSEL_SERVER_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessel::server {

enum class Role { kReader, kTuner, kWorker };

// "reader", "tuner", "worker".
std::string_view RoleName(Role role);
std::optional<Role> ParseRole(std::string_view name);

// The role an RPC of TesselService or WorkerService needs (by its proto method name, e.g.
// "SubmitJob"); nullopt for a method this table does not know, which nobody may call.
std::optional<Role> RequiredRole(std::string_view method);

// True when a caller holding `held` may call a method that needs `required`: the same role, or
// tuner for a reader's method.
bool RoleMayCall(Role held, Role required);

// A name for `token` that does not reveal it: the first 16 hex digits of its SHA-256. Stable
// across restarts and edits of the token file, so it can be stored.
std::string TokenFingerprint(std::string_view token);

// Who an allowed call comes from: for a named token, its fingerprint and name; both empty for an
// unnamed token, without a token table, or when the method needs no token.
struct Caller {
  std::string credential;
  std::string name;
};

class TokenTable {
 public:
  // Parses a token file's text; `source` names it in errors (which give the line, never a token).
  static absl::StatusOr<TokenTable> Parse(std::string_view text, std::string_view source);
  // Reads and parses the file at `path`. An empty table is an error: it would lock everyone out.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The role of `token`, nullopt when it is not in the table. Every entry is compared, each in
  // time that depends only on the lengths.
  std::optional<Role> RoleOf(std::string_view token) const;
  // The NAME of `token`'s line; '' when it has none or is not in the table.
  std::string NameOf(std::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string token;
    Role role;
    std::string name;  // '' when the line names no holder
  };
  // The entry of `token`, compared as RoleOf does.
  const Entry* Find(std::string_view token) const;

  std::vector<Entry> entries_;
};

class Authorizer {
 public:
  // No table: every call is allowed (the server then listens on loopback only unless told
  // otherwise; see server.h). `open_lookups`: Lookup needs no token.
  Authorizer() = default;
  Authorizer(std::optional<TokenTable> tokens, bool open_lookups);

  bool enabled() const { return tokens_.has_value(); }

  // OK when the caller may call `method`. `authorization` is the `authorization` metadata value,
  // nullopt when the call has none.
  absl::Status Check(std::string_view method, std::optional<std::string_view> authorization) const;
  // The same, reading the metadata from the call's context.
  absl::Status Check(std::string_view method, const grpc::ServerContextBase& context) const;
  // As Check, and who the allowed caller is.
  absl::StatusOr<Caller> Authorize(std::string_view method,
                                   std::optional<std::string_view> authorization) const;
  absl::StatusOr<Caller> Authorize(std::string_view method,
                                   const grpc::ServerContextBase& context) const;

 private:
  std::optional<TokenTable> tokens_;
  bool open_lookups_ = false;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_AUTH_H_
