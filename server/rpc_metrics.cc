#include "server/rpc_metrics.h"

#include <chrono>
#include <string>
#include <string_view>

namespace tessel::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

std::string_view CodeName(grpc::StatusCode code) {
  static constexpr std::string_view kNames[] = {"OK",
                                                "CANCELLED",
                                                "UNKNOWN",
                                                "INVALID_ARGUMENT",
                                                "DEADLINE_EXCEEDED",
                                                "NOT_FOUND",
                                                "ALREADY_EXISTS",
                                                "PERMISSION_DENIED",
                                                "RESOURCE_EXHAUSTED",
                                                "FAILED_PRECONDITION",
                                                "ABORTED",
                                                "OUT_OF_RANGE",
                                                "UNIMPLEMENTED",
                                                "INTERNAL",
                                                "UNAVAILABLE",
                                                "DATA_LOSS",
                                                "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
}

class Interceptor final : public grpc::experimental::Interceptor {
 public:
  Interceptor(grpc::experimental::ServerRpcInfo* info, Metrics* metrics)
      : metrics_(metrics), start_(std::chrono::steady_clock::now()) {
    // "/tessel.v1.TesselService/Lookup" -> "Lookup"
    const std::string_view full = info->method() != nullptr ? info->method() : "";
    const size_t slash = full.rfind('/');
    method_ = std::string(slash == std::string_view::npos ? full : full.substr(slash + 1));
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->ObserveRpc(method_, CodeName(methods->GetSendStatus().error_code()), seconds);
    }
    methods->Proceed();
  }

 private:
  Metrics* metrics_;
  std::chrono::steady_clock::time_point start_;
  std::string method_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Interceptor(info, metrics_);
  }

 private:
  Metrics* metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    Metrics* metrics) {
  return std::make_unique<Factory>(metrics);
}

}  // namespace tessel::server
