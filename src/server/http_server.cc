#include "server/http_server.h"

#include <fmt/format.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <optional>
#include <set>

namespace floodgate::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
// Concrete executor types: Beast and Asio default to the type-erased any_io_executor,
// whose copies showed up at several percent of a request's cost.
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Acceptor = asio::basic_socket_acceptor<tcp, Executor>;
using Stream = beast::basic_stream<tcp, Executor, beast::unlimited_rate_policy>;

// One thread: its io_context, its acceptor, and the connections it accepted.
class HttpServer::Worker {
 public:
  explicit Worker(HttpServer& server)
      : server(server), acceptor(io.get_executor()), work(asio::make_work_guard(io)) {}

  HttpServer& server;
  // Declared before the io_context: handlers it destroys may end sessions, which then
  // unregister here.
  std::mutex mu;  // sessions may end on another thread (a store callback holds the last ref)
  std::set<Session*> sessions;
  // Every socket operation of a worker starts on its own thread, so the reactor needs no
  // locks (UNSAFE_IO); handlers posted from other threads (store answers) still are.
  asio::io_context io{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  Acceptor acceptor;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;

  void Accept();
};

// One connection: read a request, let the service answer, write, repeat (keep-alive).
// The request state is explicit: reading, handling (waiting on the store), writing.
class HttpServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Worker& worker, Socket socket) : worker_(worker), stream_(std::move(socket)) {
    boost::system::error_code ec;
    const auto endpoint = stream_.socket().remote_endpoint(ec);
    peer_ = ec ? asio::ip::address() : endpoint.address();
    ++worker_.server.sessions_;
    std::lock_guard lock(worker_.mu);
    worker_.sessions.insert(this);
  }
  ~Session() {
    {
      std::lock_guard lock(worker_.mu);
      worker_.sessions.erase(this);
    }
    --worker_.server.sessions_;
  }

  void Read() {
    state_ = State::kReading;
    parser_.reset();
    arena_.release();  // the previous request's header fields
    parser_.emplace(std::piecewise_construct, std::make_tuple(),
                    std::make_tuple(FieldAllocator(&arena_)));
    parser_->header_limit(static_cast<std::uint32_t>(worker_.server.options_.header_limit));
    parser_->body_limit(worker_.server.options_.body_limit);
    stream_.expires_after(worker_.server.options_.request_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

  // Shutdown: a connection waiting for its next request closes now; one being answered
  // finishes its response first (and then closes).
  void CloseIfIdle() {
    if (state_ == State::kReading && (!parser_ || !parser_->got_some())) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_.close();
    }
  }

 private:
  enum class State { kReading, kHandling, kWriting, kDone };

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec == asio::error::eof) {
      return Close();
    }
    if (ec) {
      // Malformed or oversized: answer once, then close (the stream is not trustworthy).
      http::status status = http::status::bad_request;
      std::string message = fmt::format("malformed HTTP request: {}", ec.message());
      if (ec == http::error::header_limit) {
        status = http::status::request_header_fields_too_large;
        message =
            fmt::format("request headers exceed {} bytes", worker_.server.options_.header_limit);
      } else if (ec == http::error::body_limit) {
        status = http::status::payload_too_large;
        message = fmt::format("request body exceeds {} bytes", worker_.server.options_.body_limit);
      }
      Response response = Service::Error(11, false, status, "invalid_argument", message);
      return Write(std::move(response), /*close=*/true);
    }
    // The deadline armed by Read() keeps running through handling and writing: one
    // timer per request bounds all three (the store bounds its own waits far below it),
    // and a client that stops reading its answers cannot pin the connection.
    state_ = State::kHandling;
    Request request = parser_->release();
    worker_.server.service_.Handle(request, peer_, [self = shared_from_this()](Response response) {
      // The answer may come from a store thread; write on this connection's thread.
      asio::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->Write(std::move(response), false);
      });
    });
  }

  void Write(Response response, bool close) {
    state_ = State::kWriting;
    worker_.server.service_.CountResponse(response.status);
    if (close || worker_.server.stopping_) response.keep_alive = false;
    const bool keep_alive = response.keep_alive;
    response.SerializeTo(out_);
    asio::async_write(
        stream_, asio::buffer(out_),
        [self = shared_from_this(), close, keep_alive](beast::error_code ec, std::size_t) {
          if (!ec && keep_alive) return self->Read();
          if (close && !ec) return self->Linger();
          self->Close();
        });
  }

  // After refusing a request whose bytes are still arriving (an oversized body, say),
  // read and drop them for a moment before closing: closing with unread input makes
  // the kernel send a reset, which can destroy the error response on its way.
  void Linger() {
    if (drain_.empty()) {  // first call: half-close, and 500 ms in all, however it trickles
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      stream_.expires_after(std::chrono::milliseconds(500));
      drain_.resize(16 * 1024);
    }
    stream_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->Close();
                              self->Linger();
                            });
  }

  void Close() {
    state_ = State::kDone;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  Worker& worker_;
  Stream stream_;
  alignas(std::max_align_t) char arena_buffer_[4096];  // most requests' fields fit here
  beast::flat_buffer buffer_;
  std::pmr::monotonic_buffer_resource arena_{arena_buffer_, sizeof arena_buffer_};
  std::optional<http::request_parser<http::string_body, FieldAllocator>> parser_;
  std::string out_;  // the response being written
  std::vector<char> drain_;
  asio::ip::address peer_;
  State state_ = State::kReading;
};

void HttpServer::Worker::Accept() {
  acceptor.async_accept(io.get_executor(), [this](beast::error_code ec, Socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec && !server.stopping_) std::make_shared<Session>(*this, std::move(socket))->Read();
    Accept();
  });
}

HttpServer::HttpServer(Service& service, HttpOptions options)
    : service_(service), options_(std::move(options)) {}

HttpServer::~HttpServer() { Shutdown(std::chrono::milliseconds(0)); }

absl::Status HttpServer::Start() {
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options_.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("listen address \"{}\" is not an IP address", options_.host));
  }
  int threads = options_.threads > 0
                    ? options_.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  port_ = options_.port;
  for (int i = 0; i < threads; ++i) {
    auto worker = std::make_unique<Worker>(*this);
    const tcp::endpoint endpoint(address, port_);
    worker->acceptor.open(endpoint.protocol(), ec);
    if (!ec) worker->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) {
      // Every thread accepts on the same port; the kernel spreads connections.
      using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
      worker->acceptor.set_option(reuse_port(true), ec);
    }
    if (!ec) worker->acceptor.bind(endpoint, ec);
    if (!ec) worker->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          fmt::format("cannot listen on {}:{}: {}", options_.host, port_, ec.message()));
    }
    port_ = worker->acceptor.local_endpoint().port();  // port 0 resolved by the first
    workers_.push_back(std::move(worker));
  }
  for (auto& worker : workers_) {
    worker->Accept();
    worker->thread = std::thread([w = worker.get()] { w->io.run(); });
  }
  return absl::OkStatus();
}

void HttpServer::Shutdown(std::chrono::milliseconds grace) {
  if (workers_.empty() || stopping_.exchange(true)) return;
  for (auto& worker : workers_) {
    asio::post(worker->io, [w = worker.get()] {
      beast::error_code ignored;
      w->acceptor.close(ignored);
      std::lock_guard lock(w->mu);
      for (Session* session : w->sessions) session->CloseIfIdle();
    });
  }
  // Requests in flight finish (each closes its connection afterwards). Polled: the
  // sessions end on their own threads, and this bound is the point.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (sessions_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& worker : workers_) {
    worker->work.reset();
    if (sessions_.load() > 0) worker->io.stop();  // grace ran out
  }
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  workers_.clear();
}

}  // namespace floodgate::server
