// How a tessel client proves who it is: a bearer token, read from a file, sent in the standard
// `authorization: Bearer TOKEN` metadata of every call. Written once here for the CLI, the worker
// and libtessel; the server's side (token table, roles) is server/auth.h.
//
// A token never appears in an error message or a log line: errors name the file, not its content.
#ifndef TESSEL_SCHEMA_CREDENTIALS_H_
#define TESSEL_SCHEMA_CREDENTIALS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessel {

// The metadata key and value prefix (gRPC metadata keys are lower case).
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";
// The environment variable naming a token file when no --token-file is given.
inline constexpr char kTokenFileEnv[] = "TESSEL_TOKEN_FILE";

// The longest token accepted anywhere (a guard against a wrong file, e.g. a binary or a key).
inline constexpr size_t kMaxTokenBytes = 4096;

// True for a well-formed token: 1..kMaxTokenBytes printable ASCII characters, no space.
bool IsWellFormedToken(std::string_view token);

// Reads a client's token file: the token alone, surrounding whitespace ignored. InvalidArgument
// (naming the file) when it cannot be read, is empty, or is not a well-formed token.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The token a client should send: read from `flag_path` when non-empty, else from the file named
// by $TESSEL_TOKEN_FILE when set and non-empty, else none (nullopt).
absl::StatusOr<std::optional<std::string>> ClientToken(const std::string& flag_path);

// "Bearer TOKEN", the metadata value for `token`.
std::string BearerValue(std::string_view token);

// The token in an `authorization` metadata value: nullopt unless it is "Bearer " followed by a
// well-formed token (the scheme is matched case-insensitively, as RFC 6750 allows).
std::optional<std::string_view> ParseBearer(std::string_view value);

// Adds `authorization: Bearer TOKEN` to a call's context when `token` is set.
void AddBearer(grpc::ClientContext& context, const std::optional<std::string>& token);

// The TLS files of a client (--tls-ca, --tls-cert, --tls-key). All empty: plaintext.
struct ClientTlsFiles {
  // PEM root certificates that verify the server's certificate; set, the client speaks TLS.
  std::string ca_file;
  // A PEM certificate chain and its private key, presented to a server that requires client
  // certificates (mutual TLS, the server's --tls-client-ca). Both or neither, with ca_file.
  std::string cert_file;
  std::string key_file;
};

// HOST:PORT split, the brackets of an IPv6 host removed ("[::1]:80" -> "::1", 80).
struct HostPort {
  std::string host;
  int port = 0;
};
// Parses `address` (given as `flag`, e.g. "--http") as HOST:PORT with a port 0-65535;
// InvalidArgument naming the flag otherwise.
absl::StatusOr<HostPort> ParseHostPort(std::string_view address, std::string_view flag);

// OK when `address` (given as `flag`, e.g. "--server") is HOST:PORT (ParseHostPort), or names a
// gRPC scheme (unix:, dns:, ipv4:, ipv6:, vsock:, xds:), which gRPC parses itself. gRPC takes a
// bare port above 65535 modulo 65536 (127.0.0.1:99999 is port 34463), so it is checked here, by
// the server's --listen and the clients' --server alike.
absl::Status CheckGrpcAddress(std::string_view address, std::string_view flag);

// How a client reaches a server: with `tls.ca_file`, TLS verified against those roots (and the
// client certificate presented when given); without, plaintext. InvalidArgument (naming the flag
// and the file, never the content) when a file cannot be read, when only one of cert_file and
// key_file is given, or when they are given without ca_file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientTlsFiles& tls);

// Reads a whole file (PEM certificates, keys); InvalidArgument naming `what` and the path when
// it cannot be read or is empty. The content is never part of the message.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what);

}  // namespace tessel

#endif  // TESSEL_SCHEMA_CREDENTIALS_H_
