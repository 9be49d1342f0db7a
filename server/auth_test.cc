// Tests for the server's token table and role check: the file format, the documented code for no
// token, a wrong token and a wrong role on every method, and no token in any message.
#include "server/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "schema/credentials.h"

namespace tessel::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTokens[] =
    "# tessel tokens\n"
    "reader r-token\n"
    "tuner  t-token   # the build farm\n"
    "\n"
    "worker w-token\n";

constexpr std::string_view kReaderMethods[] = {"GetJob",      "ListJobs",    "WatchJob",
                                               "ListTrials",  "Lookup",      "ListKernels",
                                               "ListTargets", "ListWorkers", "Export"};
constexpr std::string_view kTunerMethods[] = {"SubmitJob", "CancelJob", "Import"};
constexpr std::string_view kWorkerMethods[] = {"Register", "Lease", "Report", "Heartbeat"};

Authorizer MakeAuthorizer(bool open_lookups = false) {
  auto table = TokenTable::Parse(kTokens, "tokens");
  EXPECT_TRUE(table.ok()) << table.status();
  return Authorizer(*std::move(table), open_lookups);
}

absl::StatusCode CodeFor(const Authorizer& auth, std::string_view method, std::string_view token) {
  return auth.Check(method, BearerValue(token)).code();
}

TEST(TokenTableTest, ParsesRolesCommentsAndBlankLines) {
  auto table = TokenTable::Parse(kTokens, "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3u);
  EXPECT_EQ(table->RoleOf("r-token"), Role::kReader);
  EXPECT_EQ(table->RoleOf("t-token"), Role::kTuner);
  EXPECT_EQ(table->RoleOf("w-token"), Role::kWorker);
  EXPECT_FALSE(table->RoleOf("t-toke").has_value());
  EXPECT_FALSE(table->RoleOf("t-tokenx").has_value());
  EXPECT_FALSE(table->RoleOf("").has_value());
}

TEST(TokenTableTest, ErrorsNameTheLineAndNeverTheToken) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"reader sekrit1\nadmin sekrit2\n", "tokens:2: unknown role"},
      {"tuner sekrit1 name extra\n", "tokens:1: expected 'ROLE TOKEN [NAME]'"},
      {"sekrit1\n", "tokens:1: expected 'ROLE TOKEN [NAME]'"},
      {"worker sekrit1 gpu/7\n", "tokens:1: a token's name is up to 64 letters"},
      {"reader sekrit1\ntuner sekrit1\n", "tokens:2: the token is listed twice"},
  };
  for (const auto& c : cases) {
    auto table = TokenTable::Parse(c.text, "tokens");
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(table.status().message()), HasSubstr(c.says));
    EXPECT_THAT(std::string(table.status().message()), Not(HasSubstr("sekrit")));
  }
  EXPECT_FALSE(TokenTable::Load("/nonexistent/tokens").ok());
}

TEST(AuthorizerTest, EveryMethodGetsTheDocumentedCodeForEachCaller) {
  const Authorizer auth = MakeAuthorizer();
  for (auto group :
       {std::pair{Role::kReader, std::vector<std::string_view>(std::begin(kReaderMethods),
                                                               std::end(kReaderMethods))},
        std::pair{Role::kTuner, std::vector<std::string_view>(std::begin(kTunerMethods),
                                                              std::end(kTunerMethods))},
        std::pair{Role::kWorker, std::vector<std::string_view>(std::begin(kWorkerMethods),
                                                               std::end(kWorkerMethods))}}) {
    for (std::string_view method : group.second) {
      SCOPED_TRACE(std::string(method));
      EXPECT_EQ(RequiredRole(method), group.first);
      EXPECT_EQ(auth.Check(method, std::nullopt).code(), absl::StatusCode::kUnauthenticated);
      EXPECT_EQ(CodeFor(auth, method, "wrong-token"), absl::StatusCode::kUnauthenticated);
      EXPECT_EQ(auth.Check(method, "Basic t-token").code(), absl::StatusCode::kUnauthenticated);
      const bool reader_ok = group.first == Role::kReader;
      const bool tuner_ok = group.first != Role::kWorker;
      const bool worker_ok = group.first == Role::kWorker;
      EXPECT_EQ(CodeFor(auth, method, "r-token"),
                reader_ok ? absl::StatusCode::kOk : absl::StatusCode::kPermissionDenied);
      EXPECT_EQ(CodeFor(auth, method, "t-token"),
                tuner_ok ? absl::StatusCode::kOk : absl::StatusCode::kPermissionDenied);
      EXPECT_EQ(CodeFor(auth, method, "w-token"),
                worker_ok ? absl::StatusCode::kOk : absl::StatusCode::kPermissionDenied);
    }
  }
}

TEST(AuthorizerTest, MessagesNameTheMethodAndRoleButNoToken) {
  const Authorizer auth = MakeAuthorizer();
  absl::Status denied = auth.Check("SubmitJob", BearerValue("r-token"));
  EXPECT_THAT(std::string(denied.message()), HasSubstr("reader may not call SubmitJob"));
  EXPECT_THAT(std::string(denied.message()), HasSubstr("needs tuner"));
  for (const char* token : {"r-token", "wrong-token"}) {
    for (std::string_view method : {"SubmitJob", "Register", "Lookup"}) {
      absl::Status status = auth.Check(method, BearerValue(token));
      EXPECT_THAT(std::string(status.message()), Not(HasSubstr("token-")));
      EXPECT_THAT(std::string(status.message()), Not(HasSubstr(token)));
    }
  }
}

TEST(AuthorizerTest, OpenLookupsLeaveOnlyLookupOpen) {
  const Authorizer auth = MakeAuthorizer(/*open_lookups=*/true);
  EXPECT_TRUE(auth.Check("Lookup", std::nullopt).ok());
  EXPECT_EQ(auth.Check("Export", std::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Check("SubmitJob", std::nullopt).code(), absl::StatusCode::kUnauthenticated);
}

TEST(AuthorizerTest, WithoutATableEveryKnownMethodIsAllowedAndUnknownOnesNever) {
  const Authorizer open;
  EXPECT_FALSE(open.enabled());
  EXPECT_TRUE(open.Check("SubmitJob", std::nullopt).ok());
  EXPECT_TRUE(open.Check("Register", std::nullopt).ok());
  EXPECT_EQ(open.Check("DropTables", std::nullopt).code(), absl::StatusCode::kPermissionDenied);
}

// A caller with a named token is known by the token's fingerprint: the same for the same token,
// different for another, and nothing of the token in it. An unnamed token (perhaps a fleet's)
// names no caller.
TEST(AuthorizerTest, ACallerWithANamedTokenIsKnownByItsFingerprint) {
  auto table = TokenTable::Parse("worker w-token gpu-7\nworker fleet-token\n", "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  const Authorizer auth(*std::move(table), false);
  absl::StatusOr<Caller> worker = auth.Authorize("Register", BearerValue("w-token"));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->name, "gpu-7");
  EXPECT_EQ(worker->credential, TokenFingerprint("w-token"));
  EXPECT_EQ(worker->credential.size(), 16u);
  EXPECT_EQ(worker->credential.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_THAT(worker->credential, Not(HasSubstr("w-token")));
  // SHA-256("abc") starts ba7816bf8f01cfea (FIPS 180-2, appendix B.1).
  EXPECT_EQ(TokenFingerprint("abc"), "ba7816bf8f01cfea");
  EXPECT_NE(TokenFingerprint("w-token"), TokenFingerprint("t-token"));
  absl::StatusOr<Caller> fleet = auth.Authorize("Register", BearerValue("fleet-token"));
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  EXPECT_TRUE(fleet->credential.empty());
  EXPECT_EQ(auth.Authorize("Register", BearerValue("other")).status().code(),
            absl::StatusCode::kUnauthenticated);
  // Without a table there is no credential to know a caller by.
  absl::StatusOr<Caller> open = Authorizer().Authorize("Register", std::nullopt);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->credential.empty());
}

}  // namespace
}  // namespace tessel::server
