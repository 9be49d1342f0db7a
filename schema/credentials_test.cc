// Tests for the client's side of authentication: token files, $TESSEL_TOKEN_FILE and the bearer
// metadata value. No error message may carry the token.
#include "schema/credentials.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CredentialsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = tmp_.File(name);
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  void TearDown() override { unsetenv(kTokenFileEnv); }

  testing::TempDir tmp_{"tessel-credentials-"};
};

TEST_F(CredentialsTest, ReadsTheTokenAloneIgnoringSurroundingWhitespace) {
  auto token = ReadTokenFile(Write("t", "  s3cret-Token_1\n\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret-Token_1");
}

TEST_F(CredentialsTest, RefusesMissingEmptyAndMalformedFilesNamingTheFileNotTheContent) {
  auto missing = ReadTokenFile(tmp_.File("absent"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("absent"));

  auto empty = ReadTokenFile(Write("empty", " \n"));
  EXPECT_THAT(empty.status().message(), HasSubstr("is empty"));

  auto two = ReadTokenFile(Write("two", "tuner hunter2\n"));
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.status().message(), Not(HasSubstr("hunter2")));

  auto binary = ReadTokenFile(Write("binary", std::string("ab\0cd", 5)));
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument);

  auto huge = ReadTokenFile(Write("huge", std::string(kMaxTokenBytes + 1, 'x')));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CredentialsTest, TheFlagWinsOverTheEnvironmentAndNeitherMeansNoToken) {
  auto none = ClientToken("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  setenv(kTokenFileEnv, Write("env", "from-env").c_str(), 1);
  auto env = ClientToken("");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->value_or(""), "from-env");

  auto flag = ClientToken(Write("flag", "from-flag"));
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->value_or(""), "from-flag");

  setenv(kTokenFileEnv, tmp_.File("absent").c_str(), 1);
  EXPECT_FALSE(ClientToken("").ok()) << "a named but unreadable file is an error, not no token";
}

TEST_F(CredentialsTest, AClientCertificateNeedsItsKeyAndTheServersRootsAndReadableFiles) {
  const std::string ca = Write("ca.pem", "roots");
  const std::string cert = Write("cert.pem", "chain");
  const std::string key = Write("key.pem", "secret-key-bytes");
  EXPECT_TRUE(ChannelCredentials({.ca_file = "", .cert_file = "", .key_file = ""}).ok());
  EXPECT_TRUE(ChannelCredentials({.ca_file = ca, .cert_file = cert, .key_file = key}).ok());

  auto no_key = ChannelCredentials({.ca_file = ca, .cert_file = cert, .key_file = ""});
  EXPECT_EQ(no_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_key.status().message(), HasSubstr("--tls-cert and --tls-key go together"));
  auto no_ca = ChannelCredentials({.ca_file = "", .cert_file = cert, .key_file = key});
  EXPECT_THAT(no_ca.status().message(), HasSubstr("need --tls-ca"));
  auto unreadable =
      ChannelCredentials({.ca_file = ca, .cert_file = cert, .key_file = tmp_.File("absent")});
  EXPECT_EQ(unreadable.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unreadable.status().message(), HasSubstr("--tls-key"));
  EXPECT_THAT(unreadable.status().message(), HasSubstr("absent"));
}

TEST(BearerTest, RoundTripsAndRejectsOtherSchemesAndMalformedTokens) {
  EXPECT_EQ(BearerValue("abc"), "Bearer abc");
  EXPECT_EQ(ParseBearer(BearerValue("abc")).value_or(""), "abc");
  EXPECT_EQ(ParseBearer("bearer abc").value_or(""), "abc");
  EXPECT_FALSE(ParseBearer("Basic abc").has_value());
  EXPECT_FALSE(ParseBearer("Bearer ").has_value());
  EXPECT_FALSE(ParseBearer("Bearer a b").has_value());
  EXPECT_FALSE(ParseBearer("abc").has_value());
}

TEST(AddressTest, HostPortSplitsAndDropsTheBracketsOfAnIpv6Host) {
  absl::StatusOr<HostPort> v4 = ParseHostPort("127.0.0.1:8080", "--http");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 8080);
  absl::StatusOr<HostPort> v6 = ParseHostPort("[::1]:0", "--http");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_THAT(ParseHostPort("localhost:65536", "--http").status().message(),
              HasSubstr("--http 'localhost:65536': expected HOST:PORT with a port 0-65535"));
}

TEST(AddressTest, APortMustBe0To65535AndSchemesAreLeftToGrpc) {
  for (const char* good : {"127.0.0.1:0", "localhost:50051", "[::1]:65535", "my-host.example:443",
                           "unix:/tmp/tessel.sock", "dns:///localhost:50051", "ipv4:127.0.0.1:1"}) {
    EXPECT_TRUE(CheckGrpcAddress(good, "--server").ok()) << good;
  }
  for (const char* bad : {"127.0.0.1:99999", "127.0.0.1:65536", "localhost", "localhost:", ":80",
                          "127.0.0.1:-1", "127.0.0.1:80x", "[::1]"}) {
    const absl::Status status = CheckGrpcAddress(bad, "--listen");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("--listen '"));
    EXPECT_THAT(status.message(), HasSubstr("a port 0-65535"));
  }
}

}  // namespace
}  // namespace tessel
