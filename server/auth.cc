#include "server/auth.h"

#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "schema/credentials.h"
#include "schema/strings.h"
#include "sim/enum_names.h"

namespace tessel::server {
namespace {

constexpr size_t kMaxTokenNameBytes = 64;

constexpr sim::EnumName<Role> kRoleNames[] = {
    {Role::kReader, "reader"}, {Role::kTuner, "tuner"}, {Role::kWorker, "worker"}};

// The one table of who may call what.
struct MethodRole {
  std::string_view method;
  Role role;
};
constexpr MethodRole kMethodRoles[] = {
    {"SubmitJob", Role::kTuner},
    {"CancelJob", Role::kTuner},
    {"Import", Role::kTuner},
    {"GetJob", Role::kReader},
    {"ListJobs", Role::kReader},
    {"WatchJob", Role::kReader},
    {"ListTrials", Role::kReader},
    {"Lookup", Role::kReader},
    {"ListKernels", Role::kReader},
    {"ListTargets", Role::kReader},
    {"ListWorkers", Role::kReader},
    {"Export", Role::kReader},
    {"Register", Role::kWorker},
    {"Lease", Role::kWorker},
    {"Report", Role::kWorker},
    {"Heartbeat", Role::kWorker},
    // AdminService: the database's backup, check, vacuum and restore.
    {"Backup", Role::kTuner},
    {"CheckDatabase", Role::kTuner},
    {"Vacuum", Role::kTuner},
    {"Restore", Role::kTuner},
};

// Equal contents, in time that depends on the lengths only.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

}  // namespace

std::string_view RoleName(Role role) { return sim::NameIn(kRoleNames, role, "unknown"); }

std::optional<Role> ParseRole(std::string_view name) { return sim::ValueIn(kRoleNames, name); }

std::optional<Role> RequiredRole(std::string_view method) {
  for (const MethodRole& row : kMethodRoles) {
    if (row.method == method) return row.role;
  }
  return std::nullopt;
}

bool RoleMayCall(Role held, Role required) {
  return held == required || (held == Role::kTuner && required == Role::kReader);
}

std::string TokenFingerprint(std::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

absl::StatusOr<TokenTable> TokenTable::Parse(std::string_view text, std::string_view source) {
  TokenTable table;
  int line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_number;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    const std::vector<std::string_view> fields = Fields(line);
    if (fields.empty()) continue;
    const std::string where = StrCat(source, ":", line_number);
    if (fields.size() != 2 && fields.size() != 3) {
      return absl::InvalidArgumentError(
          StrCat(where, ": expected 'ROLE TOKEN [NAME]' (roles: ", sim::NamesIn(kRoleNames), ")"));
    }
    const std::string_view name = fields.size() == 3 ? fields[2] : std::string_view();
    if (name.size() > kMaxTokenNameBytes ||
        name.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            std::string_view::npos) {
      return absl::InvalidArgumentError(StrCat(where, ": a token's name is up to ",
                                               kMaxTokenNameBytes,
                                               " letters, digits, '.', '_' or '-'"));
    }
    std::optional<Role> role = ParseRole(fields[0]);
    if (!role) {
      return absl::InvalidArgumentError(
          StrCat(where, ": unknown role (known: ", sim::NamesIn(kRoleNames), ")"));
    }
    if (!IsWellFormedToken(fields[1])) {
      return absl::InvalidArgumentError(
          StrCat(where, ": the token is not up to ", kMaxTokenBytes, " printable characters"));
    }
    if (table.RoleOf(fields[1]).has_value()) {
      return absl::InvalidArgumentError(StrCat(where, ": the token is listed twice"));
    }
    table.entries_.push_back({std::string(fields[1]), *role, std::string(name)});
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("--token-file '", path, "' cannot be read"));
  std::ostringstream content;
  content << in.rdbuf();
  absl::StatusOr<TokenTable> table = Parse(content.view(), path);
  if (table.ok() && table->size() == 0) {
    return absl::InvalidArgumentError(StrCat("--token-file '", path, "' lists no token"));
  }
  return table;
}

const TokenTable::Entry* TokenTable::Find(std::string_view token) const {
  const Entry* found = nullptr;
  for (const Entry& entry : entries_) {
    if (ConstantTimeEquals(entry.token, token)) found = &entry;
  }
  return found;
}

std::optional<Role> TokenTable::RoleOf(std::string_view token) const {
  const Entry* entry = Find(token);
  return entry ? std::optional<Role>(entry->role) : std::nullopt;
}

std::string TokenTable::NameOf(std::string_view token) const {
  const Entry* entry = Find(token);
  return entry ? entry->name : std::string();
}

Authorizer::Authorizer(std::optional<TokenTable> tokens, bool open_lookups)
    : tokens_(std::move(tokens)), open_lookups_(open_lookups) {}

absl::Status Authorizer::Check(std::string_view method,
                               std::optional<std::string_view> authorization) const {
  return Authorize(method, authorization).status();
}

absl::StatusOr<Caller> Authorizer::Authorize(std::string_view method,
                                             std::optional<std::string_view> authorization) const {
  const std::optional<Role> required = RequiredRole(method);
  if (!required) return absl::PermissionDeniedError(StrCat("no role may call ", method));
  if (!tokens_ || (open_lookups_ && method == "Lookup")) return Caller{};
  if (!authorization) {
    return absl::UnauthenticatedError(
        StrCat(method, " needs a token: send 'authorization: Bearer TOKEN' (--token-file)"));
  }
  const std::optional<std::string_view> token = ParseBearer(*authorization);
  if (!token) {
    return absl::UnauthenticatedError(
        StrCat("authorization metadata is not 'Bearer TOKEN' (calling ", method, ")"));
  }
  const std::optional<Role> held = tokens_->RoleOf(*token);
  if (!held) return absl::UnauthenticatedError(StrCat("unknown token (calling ", method, ")"));
  if (!RoleMayCall(*held, *required)) {
    return absl::PermissionDeniedError(StrCat("role ", RoleName(*held), " may not call ", method,
                                              " (needs ", RoleName(*required), ")"));
  }
  std::string name = tokens_->NameOf(*token);
  if (name.empty()) return Caller{};
  return Caller{TokenFingerprint(*token), std::move(name)};
}

absl::Status Authorizer::Check(std::string_view method,
                               const grpc::ServerContextBase& context) const {
  return Authorize(method, context).status();
}

absl::StatusOr<Caller> Authorizer::Authorize(std::string_view method,
                                             const grpc::ServerContextBase& context) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kAuthorizationKey);
  if (it == metadata.end()) return Authorize(method, std::nullopt);
  return Authorize(method, std::string_view(it->second.data(), it->second.size()));
}

}  // namespace tessel::server
