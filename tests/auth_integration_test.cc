// Authentication and transport security against a real tessel-server process (127.0.0.1, port
// 0): every RPC's code for no token, a wrong token and a wrong role; tokens in no log line; a
// worker and the CLI with their own token files; a plaintext client refused by a TLS server; a
// mutual-TLS server serving clients with a certificate of its client CA and no others; libtessel's
// server lookups with a token and over TLS; no unauthenticated server beyond loopback (issue 15).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/lookup.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "schema/credentials.h"
#include "schema/key.h"
#include "schema/tessel.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/server_process_test.h"
#include "tests/testing/temp_dir.h"

namespace tessel {
namespace {

using ::std::chrono::milliseconds;
using ::std::chrono::seconds;
using ::tessel::testing::Process;
using ::tessel::testing::ReadFile;
using ::tessel::testing::RunResult;
using ::tessel::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kServerBin[] = TESSEL_SERVER_BIN;
constexpr char kWorkerBin[] = TESSEL_WORKER_BIN;
constexpr char kCliBin[] = TESSEL_CLI_BIN;

constexpr char kTunerToken[] = "tuner-0123456789-secret";
constexpr char kReaderToken[] = "reader-0123456789-secret";
constexpr char kWorkerToken[] = "worker-0123456789-secret";

// The documented role of every RPC (server/auth.h, issue 15).
const std::map<std::string, std::string>& DocumentedRoles() {
  static const auto* roles = new std::map<std::string, std::string>{
      {"Lookup", "reader"},      {"GetJob", "reader"},      {"ListJobs", "reader"},
      {"WatchJob", "reader"},    {"ListTrials", "reader"},  {"ListKernels", "reader"},
      {"ListTargets", "reader"}, {"ListWorkers", "reader"}, {"Export", "reader"},
      {"SubmitJob", "tuner"},    {"CancelJob", "tuner"},    {"Import", "tuner"},
      {"Register", "worker"},    {"Lease", "worker"},       {"Report", "worker"},
      {"Heartbeat", "worker"}};
  return *roles;
}

// A token whose role may not call a method needing `role`.
std::string WrongRoleToken(const std::string& role) {
  if (role == "reader") return kWorkerToken;
  if (role == "tuner") return kReaderToken;
  return kTunerToken;
}

std::string RightRoleToken(const std::string& role) {
  if (role == "reader") return kReaderToken;
  if (role == "tuner") return kTunerToken;
  return kWorkerToken;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

class AuthTest : public testing::ServerProcessTest {
 protected:
  AuthTest() : ServerProcessTest(kServerBin, "tessel-auth-") {}

  bool StartServer(const std::vector<std::string>& extra,
                   const std::string& listen = "127.0.0.1:0") {
    return ServerProcessTest::StartServer(dir_ + "/t.db", extra, listen);
  }

  std::string WriteTokenFiles() {
    const std::string table = dir_ + "/tokens";
    WriteFile(table, std::string("# who may call\ntuner ") + kTunerToken + "\nreader " +
                         kReaderToken + "\n\nworker " + kWorkerToken + "\n");
    WriteFile(dir_ + "/tuner.token", std::string(kTunerToken) + "\n");
    WriteFile(dir_ + "/worker.token", kWorkerToken);
    return table;
  }

  // Makes DIR/NAME.pem and DIR/NAME.key with openssl: a certificate for `subject`, signed by
  // DIR/ca.pem (and ca.key) unless NAME is "ca" itself, which is self-signed; `server` names it
  // localhost and 127.0.0.1. Empty on success, else openssl's complaint.
  std::string MakeCertificate(const std::string& name, const std::string& subject,
                              bool signed_by_ca, bool server = false) {
    std::vector<std::string> argv = {"/usr/bin/env", "openssl", "req",   "-x509", "-newkey",
                                     "rsa:2048",     "-nodes",  "-days", "1"};
    argv.insert(argv.end(), {"-subj", "/CN=" + subject, "-keyout", dir_ + "/" + name + ".key",
                             "-out", dir_ + "/" + name + ".pem"});
    if (signed_by_ca) {
      argv.insert(argv.end(), {"-CA", dir_ + "/ca.pem", "-CAkey", dir_ + "/ca.key", "-addext",
                               "basicConstraints=critical,CA:FALSE"});
    }
    if (server) argv.insert(argv.end(), {"-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"});
    RunResult made = testing::Run(argv, dir_, seconds(60));
    return made.exit_code == 0 ? "" : made.err;
  }

  // Calls `method` of `service` with an empty request; the status it ends with.
  grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                    const std::string& method, const std::optional<std::string>& bearer) {
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(5));
    if (bearer) context.AddMetadata(kAuthorizationKey, *bearer);
    grpc::Slice empty("");  // an empty request message: every field at its default
    grpc::ByteBuffer request(&empty, 1), response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/" + service + "/" + method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status status) { done.set_value(std::move(status)); });
    return done.get_future().get();
  }
};

TEST_F(AuthTest, EveryRpcAnswersTheDocumentedCodeForNoTokenAWrongTokenAndAWrongRole) {
  ASSERT_TRUE(StartServer({"--token-file", WriteTokenFiles()}));
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  std::set<std::string> seen;
  for (const char* service : {"tessel.v1.TesselService", "tessel.v1.WorkerService"}) {
    // Through a message of the same file, so its descriptors are linked and registered.
    const google::protobuf::ServiceDescriptor* descriptor =
        v1::Job::descriptor()->file()->pool()->FindServiceByName(service);
    ASSERT_NE(descriptor, nullptr) << service;
    for (int m = 0; m < descriptor->method_count(); ++m) {
      const std::string method = descriptor->method(m)->name();
      seen.insert(method);
      ASSERT_TRUE(DocumentedRoles().count(method)) << method << " has no documented role";
      const std::string role = DocumentedRoles().at(method);
      EXPECT_EQ(Call(channel, service, method, std::nullopt).error_code(),
                grpc::StatusCode::UNAUTHENTICATED)
          << method;
      EXPECT_EQ(Call(channel, service, method, BearerValue("not-a-known-token")).error_code(),
                grpc::StatusCode::UNAUTHENTICATED)
          << method;
      EXPECT_EQ(Call(channel, service, method, "Basic dXNlcjpwYXNz").error_code(),
                grpc::StatusCode::UNAUTHENTICATED)
          << method;
      const grpc::Status wrong_role =
          Call(channel, service, method, BearerValue(WrongRoleToken(role)));
      EXPECT_EQ(wrong_role.error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
      EXPECT_THAT(wrong_role.error_message(), HasSubstr("needs " + role)) << method;
      // The right role gets past authentication (the empty request may still be invalid).
      const grpc::StatusCode right =
          Call(channel, service, method, BearerValue(RightRoleToken(role))).error_code();
      EXPECT_NE(right, grpc::StatusCode::UNAUTHENTICATED) << method;
      EXPECT_NE(right, grpc::StatusCode::PERMISSION_DENIED) << method;
    }
  }
  EXPECT_EQ(seen.size(), DocumentedRoles().size());
  // A tuner may do what a reader may.
  EXPECT_TRUE(
      Call(channel, "tessel.v1.TesselService", "ListKernels", BearerValue(kTunerToken)).ok());
}

TEST_F(AuthTest, AWorkerAndTheCliWithTheirTokenFilesTuneAndNoTokenReachesALog) {
  ASSERT_TRUE(StartServer({"--token-file", WriteTokenFiles()}));
  auto worker = Process::Start({kWorkerBin, "--server", address_, "--threads", "1", "--name", "w",
                                "--token-file", dir_ + "/worker.token", "--verbose"},
                               dir_ + "/worker.out", dir_ + "/worker.err");
  ASSERT_TRUE(worker.ok()) << worker.status();
  workers_.push_back(std::move(*worker));

  const std::vector<std::string> tune = {
      kCliBin,    "tune",   "matmul", "--shape", "M=256,N=256,K=256", "--budget", "4",
      "--server", address_, "--json", "--quiet"};
  RunResult refused = testing::Run(tune, dir_);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("needs a token"));

  std::vector<std::string> with_token = tune;
  with_token.insert(with_token.end(), {"--token-file", dir_ + "/tuner.token"});
  RunResult tuned = testing::Run(with_token, dir_);
  EXPECT_EQ(tuned.exit_code, 0) << tuned.err;
  EXPECT_THAT(tuned.out, HasSubstr("\"state\": \"completed\""));

  // The environment variable names the token file when no flag does.
  RunResult jobs =
      testing::Run({"/usr/bin/env", std::string(kTokenFileEnv) + "=" + dir_ + "/tuner.token",
                    kCliBin, "jobs", "--server", address_, "--json"},
                   dir_);
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_THAT(jobs.out, HasSubstr("\"completed\""));

  workers_.clear();
  StopServer();
  for (const std::string& log : {ReadFile(dir_ + "/server.out") + ReadFile(dir_ + "/server.err"),
                                 ReadFile(dir_ + "/worker.out") + ReadFile(dir_ + "/worker.err"),
                                 refused.err, tuned.err, jobs.err}) {
    for (const char* token : {kTunerToken, kReaderToken, kWorkerToken}) {
      EXPECT_THAT(log, Not(HasSubstr(token)));
    }
  }
  EXPECT_THAT(ReadFile(dir_ + "/server.err") + ReadFile(dir_ + "/server.out"),
              HasSubstr("token authentication"));
}

TEST_F(AuthTest, APlaintextClientIsRefusedByATlsServer) {
  RunResult made =
      testing::Run({"/usr/bin/env", "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", dir_ + "/key.pem", "-out", dir_ + "/cert.pem", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"},
                   dir_, seconds(60));
  if (made.exit_code != 0) GTEST_SKIP() << "openssl cannot make a certificate: " << made.err;
  ASSERT_TRUE(StartServer({"--tls-cert", dir_ + "/cert.pem", "--tls-key", dir_ + "/key.pem"}));

  auto plaintext = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  EXPECT_EQ(Call(plaintext, "tessel.v1.TesselService", "ListKernels", std::nullopt).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  auto credentials =
      ChannelCredentials({.ca_file = dir_ + "/cert.pem", .cert_file = "", .key_file = ""});
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  auto tls = grpc::CreateChannel(address_, *credentials);
  EXPECT_TRUE(Call(tls, "tessel.v1.TesselService", "ListKernels", std::nullopt).ok());

  RunResult cli = testing::Run(
      {kCliBin, "jobs", "--server", address_, "--tls-ca", dir_ + "/cert.pem", "--json"}, dir_);
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  RunResult plain_cli = testing::Run({kCliBin, "jobs", "--server", address_, "--json"}, dir_);
  EXPECT_NE(plain_cli.exit_code, 0);
  EXPECT_THAT(plain_cli.err, HasSubstr("pass its root certificate with --tls-ca"));
}

TEST_F(AuthTest, AMutualTlsServerServesClientsWithACertificateOfItsClientCaAndNoOthers) {
  // A client CA, a client certificate it signed, one it did not, and the server's certificate.
  for (const std::string& error :
       {MakeCertificate("ca", "tessel-test-ca", false), MakeCertificate("client", "a-client", true),
        MakeCertificate("rogue", "a-rogue", false),
        MakeCertificate("server", "localhost", true, /*server=*/true)}) {
    if (!error.empty()) GTEST_SKIP() << "openssl cannot make a certificate: " << error;
  }
  const std::string ca = dir_ + "/ca.pem";
  ASSERT_TRUE(StartServer({"--token-file", WriteTokenFiles(), "--tls-cert", dir_ + "/server.pem",
                           "--tls-key", dir_ + "/server.key", "--tls-client-ca", ca}));

  // A TLS channel presenting certificate NAME ("": none).
  auto channel_as = [&](const std::string& name) -> std::shared_ptr<grpc::Channel> {
    const std::string cert = name.empty() ? "" : dir_ + "/" + name + ".pem";
    const std::string key = name.empty() ? "" : dir_ + "/" + name + ".key";
    auto credentials = ChannelCredentials({.ca_file = ca, .cert_file = cert, .key_file = key});
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    return grpc::CreateChannel(
        address_, credentials.ok() ? *credentials : grpc::InsecureChannelCredentials());
  };
  const std::string service = "tessel.v1.TesselService";
  EXPECT_TRUE(Call(channel_as("client"), service, "ListJobs", BearerValue(kReaderToken)).ok());
  EXPECT_EQ(Call(channel_as("client"), service, "ListJobs", std::nullopt).error_code(),
            grpc::StatusCode::UNAUTHENTICATED)
      << "a certificate does not replace the token";
  for (const std::string refused : {"", "rogue"}) {
    EXPECT_EQ(
        Call(channel_as(refused), service, "ListJobs", BearerValue(kReaderToken)).error_code(),
        grpc::StatusCode::UNAVAILABLE)
        << (refused.empty() ? "no client certificate" : "a certificate the CA did not sign");
  }

  // The worker and the CLI present theirs with --tls-cert/--tls-key and tune end to end.
  const std::vector<std::string> tls = {"--tls-ca",           ca,          "--tls-cert",
                                        dir_ + "/client.pem", "--tls-key", dir_ + "/client.key"};
  std::vector<std::string> worker_argv = {
      kWorkerBin, "--server", address_, "--threads", "1", "--token-file", dir_ + "/worker.token"};
  worker_argv.insert(worker_argv.end(), tls.begin(), tls.end());
  auto worker = Process::Start(worker_argv, dir_ + "/worker.out", dir_ + "/worker.err");
  ASSERT_TRUE(worker.ok()) << worker.status();
  workers_.push_back(std::move(*worker));
  std::vector<std::string> tune = {kCliBin,    "tune", "matmul", "--shape", "M=256,N=256,K=256",
                                   "--budget", "2",    "--json", "--quiet"};
  tune.insert(tune.end(), {"--server", address_, "--token-file", dir_ + "/tuner.token"});
  tune.insert(tune.end(), tls.begin(), tls.begin() + 2);  // --tls-ca only
  RunResult without_certificate = testing::Run(tune, dir_, seconds(60));
  EXPECT_NE(without_certificate.exit_code, 0);
  EXPECT_THAT(without_certificate.err, HasSubstr("--tls-cert"))
      << "the refusal names what to check";
  tune.insert(tune.end(), tls.begin() + 2, tls.end());
  RunResult tuned = testing::Run(tune, dir_, seconds(60));
  EXPECT_EQ(tuned.exit_code, 0) << tuned.err;
  EXPECT_THAT(tuned.out, HasSubstr("\"state\": \"completed\""));
}

// A libtessel Lookup of the server at address_ only (no snapshot, no cache file) with `token`
// and the TLS roots `tls_ca_file`; asks for matmul 256^3, which nothing was tuned for.
absl::StatusOr<client::LookupResult> LookUpOnServer(const std::string& address,
                                                    const std::string& token,
                                                    const std::string& tls_ca_file = "") {
  client::LookupOptions options;
  options.server_address = address;
  options.server_timeout_ms = 5000;
  options.token = token;
  options.tls_ca_file = tls_ca_file;
  absl::StatusOr<std::unique_ptr<client::Lookup>> lookup = client::Lookup::Create(options);
  if (!lookup.ok()) return lookup.status();
  return (*lookup)->Find("matmul", *Dims::Parse("M=256,N=256,K=256"));
}

TEST_F(AuthTest, LibtesselLooksUpWithAReaderTokenAndPassesTheServersRefusalThroughWithout) {
  if (std::getenv(kTokenFileEnv) != nullptr) {
    GTEST_SKIP() << "$" << kTokenFileEnv << " is set: libtessel would send its token";
  }
  ASSERT_TRUE(StartServer({"--token-file", WriteTokenFiles()}));  // no --open-lookups

  absl::StatusOr<client::LookupResult> read = LookUpOnServer(address_, kReaderToken);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->source, "server");
  EXPECT_EQ(read->match, "default");  // nothing was tuned; the server answers the default
  EXPECT_TRUE(LookUpOnServer(address_, kTunerToken).ok()) << "a tuner may do what a reader may";

  absl::StatusOr<client::LookupResult> anonymous = LookUpOnServer(address_, "");
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kUnauthenticated) << anonymous.status();
  EXPECT_THAT(anonymous.status().message(), HasSubstr("Lookup needs a token"));
  absl::StatusOr<client::LookupResult> unknown = LookUpOnServer(address_, "not-a-known-token");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnauthenticated) << unknown.status();
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown token"));
  EXPECT_THAT(unknown.status().message(), Not(HasSubstr("not-a-known-token")));
  absl::StatusOr<client::LookupResult> worker = LookUpOnServer(address_, kWorkerToken);
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kPermissionDenied) << worker.status();
  EXPECT_THAT(worker.status().message(), HasSubstr("needs reader"));
  EXPECT_THAT(worker.status().message(), Not(HasSubstr(kWorkerToken)));

  absl::StatusOr<client::LookupResult> malformed = LookUpOnServer(address_, "two words");
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.status().message(), HasSubstr("LookupOptions.token is not a well-formed"));
  EXPECT_THAT(malformed.status().message(), Not(HasSubstr("two words")));

  StopServer();
  for (const char* token : {kTunerToken, kReaderToken, kWorkerToken}) {
    EXPECT_THAT(ReadFile(dir_ + "/server.err") + ReadFile(dir_ + "/server.out"),
                Not(HasSubstr(token)));
  }
}

TEST_F(AuthTest, LibtesselLooksUpOverTlsWithTheServersRootsAndNotInPlaintext) {
  const std::string error = MakeCertificate("server", "localhost", false, /*server=*/true);
  if (!error.empty()) GTEST_SKIP() << "openssl cannot make a certificate: " << error;
  ASSERT_TRUE(StartServer({"--token-file", WriteTokenFiles(), "--tls-cert", dir_ + "/server.pem",
                           "--tls-key", dir_ + "/server.key"}));

  absl::StatusOr<client::LookupResult> tls =
      LookUpOnServer(address_, kReaderToken, dir_ + "/server.pem");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(tls->source, "server");
  EXPECT_EQ(LookUpOnServer(address_, kReaderToken).status().code(), absl::StatusCode::kUnavailable)
      << "plaintext to a TLS server";
  absl::StatusOr<client::LookupResult> no_roots =
      LookUpOnServer(address_, kReaderToken, dir_ + "/missing.pem");
  EXPECT_EQ(no_roots.status().code(), absl::StatusCode::kInvalidArgument) << no_roots.status();
  EXPECT_THAT(no_roots.status().message(), HasSubstr("missing.pem"));
}

TEST_F(AuthTest, WithoutATokenFileTheServerListensOnlyOnLoopbackUnlessInsecure) {
  RunResult refused = testing::Run({kServerBin, "--listen", "0.0.0.0:0", "--db", dir_ + "/r.db"},
                                   dir_, seconds(30));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("refusing to listen on 0.0.0.0:0 without --token-file"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/r.db")) << "refused before opening the store";

  ASSERT_TRUE(StartServer({"--insecure"}, "0.0.0.0:0"));
  EXPECT_THAT(ReadFile(dir_ + "/server.err") + ReadFile(dir_ + "/server.out"),
              HasSubstr("no authentication (--insecure)"));
}

// gRPC takes a port above 65535 modulo 65536 (99999 would serve on 34463): the server refuses it.
TEST_F(AuthTest, AListenPortAbove65535IsRefusedNotWrappedAround) {
  RunResult refused = testing::Run(
      {kServerBin, "--listen", "127.0.0.1:99999", "--db", dir_ + "/p.db"}, dir_, seconds(30));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err,
              HasSubstr("--listen '127.0.0.1:99999': expected HOST:PORT with a port 0-65535"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/p.db")) << "refused before opening the store";
}

}  // namespace
}  // namespace tessel
