// Runs gRPC services inside the test process, for fakes of the server or of a worker's peer:
// reachable through an in-process channel, or over TCP on 127.0.0.1 with a port the OS picks.
#ifndef TESSEL_TESTS_TESTING_SERVICE_HOST_H_
#define TESSEL_TESTS_TESTING_SERVICE_HOST_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

namespace tessel::testing {

class ServiceHost {
 public:
  enum class Listen { kInProcessOnly, kLoopbackTcp };
  // Starts the services (not owned; they must outlive the host). Aborts if gRPC cannot start.
  explicit ServiceHost(const std::vector<grpc::Service*>& services,
                       Listen listen = Listen::kInProcessOnly);
  ServiceHost(const ServiceHost&) = delete;
  ServiceHost& operator=(const ServiceHost&) = delete;
  ~ServiceHost();

  std::shared_ptr<grpc::Channel> InProcessChannel();
  // "127.0.0.1:PORT"; empty for kInProcessOnly.
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace tessel::testing

#endif  // TESSEL_TESTS_TESTING_SERVICE_HOST_H_
