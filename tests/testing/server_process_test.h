// A GoogleTest fixture for tests that run a real tessel-server (and workers) as processes in a
// temporary directory: it starts the server on 127.0.0.1 port 0, and on teardown stops the
// workers and the server (SIGTERM, then waits), keeping the directory when the test failed.
#ifndef TESSEL_TESTS_TESTING_SERVER_PROCESS_TEST_H_
#define TESSEL_TESTS_TESTING_SERVER_PROCESS_TEST_H_

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace tessel::testing {

class ServerProcessTest : public ::testing::Test {
 protected:
  // `server_bin`: the tessel-server binary; `tmp_prefix` names the temporary directory.
  ServerProcessTest(std::string server_bin, const std::string& tmp_prefix)
      : server_bin_(std::move(server_bin)), tmp_(tmp_prefix) {}

  void TearDown() override {
    workers_.clear();
    StopServer();
    if (HasFailure()) tmp_.Keep();
  }

  // Starts the server on `listen` with database `db` and `extra` flags; sets server_ and
  // address_. A test failure (false) when it does not come up.
  bool StartServer(const std::string& db, const std::vector<std::string>& extra = {},
                   const std::string& listen = "127.0.0.1:0") {
    auto server = StartServerProcess(server_bin_, dir_, db, extra, listen);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return false;
    server_.emplace(std::move(server->process));
    address_ = server->address;
    return true;
  }

  // SIGTERM to the server, then waits up to 10 s for it to exit. Nothing when none runs.
  void StopServer() {
    if (!server_) return;
    server_->Signal(SIGTERM);
    server_->Wait(std::chrono::seconds(10));
    server_.reset();
  }

  const std::string server_bin_;
  TempDir tmp_;
  std::string dir_ = tmp_.path();
  std::string address_;
  std::optional<Process> server_;
  std::vector<Process> workers_;
};

}  // namespace tessel::testing

#endif  // TESSEL_TESTS_TESTING_SERVER_PROCESS_TEST_H_
