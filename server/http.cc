#include "server/http.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "schema/credentials.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "spdlog/spdlog.h"

namespace tessel::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kIdleTimeout = std::chrono::seconds(30);
constexpr size_t kMaxHeaderBytes = 8 * 1024;

// One connection: read a request, answer it, repeat while the client keeps it alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpHandler* handler)
      : stream_(std::move(socket)), handler_(handler) {}

  void Read() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(0);
    stream_.expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout) return Close();
    if (ec) {
      // A malformed or oversized request: 400 (431 for headers), then close.
      const bool too_large = ec == http::error::header_limit || ec == http::error::body_limit;
      return Answer(HttpResponse{too_large ? 431 : 400, "text/plain; charset=utf-8",
                                 too_large ? "request too large\n" : "bad request\n"},
                    /*keep_alive=*/false, /*head=*/false, 11);
    }
    const auto& request = parser_->get();
    const std::string target(request.target());
    HttpRequest in;
    in.method = std::string(request.method_string());
    const size_t q = target.find('?');
    in.path = target.substr(0, q);
    in.query = q == std::string::npos ? "" : target.substr(q + 1);
    HttpResponse out;
    if (request.method() != http::verb::get && request.method() != http::verb::head) {
      out = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
    } else {
      try {
        out = (*handler_)(in);
      } catch (const std::exception& e) {
        spdlog::error("http {}: {}", Shown(in.path, 200), e.what());
        out = {500, "text/plain; charset=utf-8", "internal error\n"};
      }
    }
    Answer(std::move(out), request.keep_alive(), request.method() == http::verb::head,
           request.version());
  }

  void Answer(HttpResponse out, bool keep_alive, bool head, unsigned version) {
    auto response =
        std::make_shared<http::response<http::string_body>>(http::status(out.status), version);
    response->set(http::field::server, "tessel-server");
    response->set(http::field::content_type, out.content_type);
    response->set(http::field::cache_control, "no-store");
    response->set("X-Content-Type-Options", "nosniff");
    response->keep_alive(keep_alive);
    const size_t length = out.body.size();
    if (!head) response->body() = std::move(out.body);
    response->content_length(length);
    stream_.expires_after(kIdleTimeout);
    http::async_write(
        stream_, *response,
        [self = shared_from_this(), response, keep_alive](beast::error_code ec, size_t) {
          if (ec || !keep_alive) return self->Close();
          self->Read();
        });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  const HttpHandler* handler_;
};

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(HttpHandler handler) : handler_(std::move(handler)), acceptor_(io_) {}

  absl::Status Listen(const std::string& address) {
    TESSEL_ASSIGN_OR_RETURN(const HostPort parsed, ParseHostPort(address, "--http"));
    const std::string& host = parsed.host;
    const int port = parsed.port;
    beast::error_code ec;
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(
          StrCat("--http '", Shown(address, 100), "': cannot resolve ", Shown(host, 100)));
    }
    const tcp::endpoint endpoint = results.begin()->endpoint();
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          StrCat("cannot listen for HTTP on ", Shown(address, 100), ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { io_.run(); });
    return absl::OkStatus();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    asio::post(io_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }

 private:
  void Accept() {
    acceptor_.async_accept(asio::make_strand(io_),
                           [this](beast::error_code ec, tcp::socket socket) {
                             if (ec == asio::error::operation_aborted) return;
                             if (!ec)
                               std::make_shared<Session>(std::move(socket), &handler_)->Read();
                             Accept();
                           });
  }

  HttpHandler handler_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  int port_ = 0;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              HttpHandler handler) {
  auto impl = std::make_unique<Impl>(std::move(handler));
  if (absl::Status s = impl->Listen(address); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop() { impl_->Stop(); }

}  // namespace tessel::server
