// A gRPC server interceptor that times every call (both services, the probes included) into
// Metrics::ObserveRpc: one place for RPC latency by method and status code.
#ifndef TESSEL_SERVER_RPC_METRICS_H_
#define TESSEL_SERVER_RPC_METRICS_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "server/metrics.h"

namespace tessel::server {

// The factory to hand to ServerBuilder::experimental().SetInterceptorCreators; `metrics` must
// outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    Metrics* metrics);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_RPC_METRICS_H_
