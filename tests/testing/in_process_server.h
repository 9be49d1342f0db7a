// A real tessel-server in the test process, on 127.0.0.1 with a port the OS picks, for tests that
// talk to the server over TCP gRPC or an in-process channel.
#ifndef TESSEL_TESTS_TESTING_IN_PROCESS_SERVER_H_
#define TESSEL_TESTS_TESTING_IN_PROCESS_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/server.h"

namespace tessel::testing {

class InProcessServer {
 public:
  // Starts a server on the database `db_path` (created when absent); `options.listen` and
  // `options.db_path` are set here, the rest is the caller's.
  static absl::StatusOr<std::unique_ptr<InProcessServer>> Start(const std::string& db_path,
                                                                server::ServerOptions options = {});

  server::Server& server() { return *server_; }
  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  std::shared_ptr<grpc::Channel> InProcessChannel() { return server_->InProcessChannel(); }

 private:
  explicit InProcessServer(std::unique_ptr<server::Server> server);
  std::unique_ptr<server::Server> server_;
  std::string address_;
};

}  // namespace tessel::testing

#endif  // TESSEL_TESTS_TESTING_IN_PROCESS_SERVER_H_
