// A small HTTP/1.1 server (Boost.Beast on Boost.Asio) for tessel-server's side port: health,
// readiness, Prometheus metrics and the dashboard (server/dashboard.h routes them). GET and HEAD
// only; requests are bounded (8 KiB of headers, no body) and a connection idle for 30 s is
// closed. One I/O thread: handlers must be quick (they read in-memory state and the store's
// reader connections, never the writer).
#ifndef TESSEL_SERVER_HTTP_H_
#define TESSEL_SERVER_HTTP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tessel::server {

struct HttpRequest {
  std::string method;  // "GET", "HEAD", ...
  std::string path;    // without the query
  std::string query;   // after '?', undecoded
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  // Listens on `address` (HOST:PORT; port 0 picks a free one) and serves `handler` on a thread of
  // its own. InvalidArgument for a malformed address, Unavailable when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           HttpHandler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Stops accepting, closes connections and joins the thread. Idempotent.
  void Stop();

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_HTTP_H_
