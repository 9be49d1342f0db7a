#include "schema/credentials.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool IsWellFormedToken(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return false;
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("token file '", path, "' cannot be read"));
  std::ostringstream content;
  content << in.rdbuf();
  std::string_view token = Trim(content.view());
  if (token.empty()) return absl::InvalidArgumentError(StrCat("token file '", path, "' is empty"));
  if (!IsWellFormedToken(token)) {
    return absl::InvalidArgumentError(
        StrCat("token file '", path, "' does not hold one token (expected up to ", kMaxTokenBytes,
               " printable characters without spaces)"));
  }
  return std::string(token);
}

absl::StatusOr<std::optional<std::string>> ClientToken(const std::string& flag_path) {
  std::string path = flag_path;
  if (path.empty()) {
    const char* env = std::getenv(kTokenFileEnv);
    if (env != nullptr) path = env;
  }
  if (path.empty()) return std::optional<std::string>();
  absl::StatusOr<std::string> token = ReadTokenFile(path);
  if (!token.ok()) return token.status();
  return std::optional<std::string>(*std::move(token));
}

std::string BearerValue(std::string_view token) { return StrCat(kBearerPrefix, token); }

std::optional<std::string_view> ParseBearer(std::string_view value) {
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = value[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return std::nullopt;
  }
  std::string_view token = value.substr(kScheme.size());
  if (!IsWellFormedToken(token)) return std::nullopt;
  return token;
}

void AddBearer(grpc::ClientContext& context, const std::optional<std::string>& token) {
  if (token) context.AddMetadata(kAuthorizationKey, BearerValue(*token));
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  if (in) content << in.rdbuf();
  if (!in || content.str().empty()) {
    return absl::InvalidArgumentError(StrCat(what, " '", path, "' cannot be read or is empty"));
  }
  return content.str();
}

absl::StatusOr<HostPort> ParseHostPort(std::string_view address, std::string_view flag) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address.data() + colon + 1, address.size() - colon - 1),
                        &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        StrCat(flag, " '", Shown(address, 100), "': expected HOST:PORT with a port 0-65535"));
  }
  std::string_view host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return HostPort{std::string(host), port};
}

absl::Status CheckGrpcAddress(std::string_view address, std::string_view flag) {
  static constexpr std::string_view kSchemes[] = {
      "unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:", "xds:"};
  for (std::string_view scheme : kSchemes) {
    if (address.starts_with(scheme)) return absl::OkStatus();
  }
  return ParseHostPort(address, flag).status();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientTlsFiles& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (tls.ca_file.empty()) {
    if (!tls.cert_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-cert and --tls-key need --tls-ca (the roots that verify the server)");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  TESSEL_ASSIGN_OR_RETURN(options.pem_root_certs, ReadSecretFile(tls.ca_file, "--tls-ca"));
  if (!tls.cert_file.empty()) {
    TESSEL_ASSIGN_OR_RETURN(options.pem_cert_chain, ReadSecretFile(tls.cert_file, "--tls-cert"));
    TESSEL_ASSIGN_OR_RETURN(options.pem_private_key, ReadSecretFile(tls.key_file, "--tls-key"));
  }
  return grpc::SslCredentials(options);
}

}  // namespace tessel
