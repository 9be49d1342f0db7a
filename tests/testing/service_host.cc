#include "tests/testing/service_host.h"

#include <cstdio>
#include <cstdlib>

namespace tessel::testing {

ServiceHost::ServiceHost(const std::vector<grpc::Service*>& services, Listen listen) {
  grpc::ServerBuilder builder;
  int port = 0;
  if (listen == Listen::kLoopbackTcp) {
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || (listen == Listen::kLoopbackTcp && port == 0)) {
    std::fprintf(stderr, "ServiceHost: gRPC server did not start\n");
    std::abort();
  }
  if (listen == Listen::kLoopbackTcp) address_ = "127.0.0.1:" + std::to_string(port);
}

ServiceHost::~ServiceHost() { server_->Shutdown(); }

std::shared_ptr<grpc::Channel> ServiceHost::InProcessChannel() {
  return server_->InProcessChannel(grpc::ChannelArguments());
}

}  // namespace tessel::testing
