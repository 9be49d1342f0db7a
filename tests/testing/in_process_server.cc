#include "tests/testing/in_process_server.h"

#include <utility>

namespace tessel::testing {

absl::StatusOr<std::unique_ptr<InProcessServer>> InProcessServer::Start(
    const std::string& db_path, server::ServerOptions options) {
  options.listen = "127.0.0.1:0";
  options.db_path = db_path;
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Create(options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<InProcessServer>(new InProcessServer(*std::move(server)));
}

InProcessServer::InProcessServer(std::unique_ptr<server::Server> server)
    : server_(std::move(server)), address_("127.0.0.1:" + std::to_string(server_->port())) {}

}  // namespace tessel::testing
