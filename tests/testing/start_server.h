// A test's SetUp starts its in-process tessel-server with one line:
//   ASSERT_NO_FATAL_FAILURE(testing::StartInProcessServer(tmp_.File("server.db"), &server_));
#ifndef TESSEL_TESTS_TESTING_START_SERVER_H_
#define TESSEL_TESTS_TESTING_START_SERVER_H_

#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/testing/in_process_server.h"

namespace tessel::testing {

// Starts a server on `db_path` into `*out`; a fatal test failure with the server's error when it
// cannot start.
inline void StartInProcessServer(const std::string& db_path, std::unique_ptr<InProcessServer>* out,
                                 server::ServerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<InProcessServer>> server =
      InProcessServer::Start(db_path, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  *out = *std::move(server);
}

}  // namespace tessel::testing

#endif  // TESSEL_TESTS_TESTING_START_SERVER_H_
