// The HTTP/1.1 server on Beast: connections, keep-alive, limits, timeouts, shutdown.

#include "server/http_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
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
  // After a failed accept: the wait before the next, doubled while accepts keep failing.
  asio::basic_waitable_timer<std::chrono::steady_clock,
                             asio::wait_traits<std::chrono::steady_clock>, Executor>
      accept_retry{io.get_executor()};
  std::chrono::milliseconds accept_backoff{0};
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;

  void Accept();
  void RetryAccept(const beast::error_code& ec);
};

// One connection: read a request, let the service answer, write, repeat (keep-alive).
// The request state is explicit: reading, handling (waiting on the store), writing.
//
// The socket is driven by hand (async_read_some + Beast's parser, a non-blocking write
// first) rather than through beast::basic_stream and http::async_read: their composed
// operations, per-operation timers and work tracking measured at over a tenth of a
// request's CPU. Beast still does all of the HTTP parsing.
class HttpServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Worker& worker, Socket socket)
      : worker_(worker), socket_(std::move(socket)), timer_(worker.io.get_executor()) {
    boost::system::error_code ec;
    const auto endpoint = socket_.remote_endpoint(ec);
    peer_ = ec ? asio::ip::address() : endpoint.address();
    socket_.set_option(tcp::no_delay(true), ec);  // one write per answer: never wait on Nagle
    socket_.non_blocking(true, ec);               // for the write attempted inline
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

  void Start() {
    Read();
    WaitForDeadline();
  }

  // Shutdown: a connection waiting for its next request closes now; one being answered
  // finishes its response first (and then closes).
  void CloseIfIdle() {
    if (state_ == State::kReading && (!parser_ || !parser_->got_some())) Close();
  }

 private:
  enum class State { kReading, kHandling, kHolding, kWriting, kLingering, kDone };
  using Clock = std::chrono::steady_clock;

  // One timer per connection, re-armed lazily: each request only moves `deadline_`, and
  // the timer, when it fires early, waits again for the moved deadline. A timer per
  // request (add + cancel in the timer queue, a timerfd update) measured several
  // percent of a request.
  void SetDeadline(Clock::duration from_now) {
    deadline_ = Clock::now() + from_now;
    if (deadline_ < timer_.expiry()) timer_.cancel();  // wakes the wait to re-arm earlier
  }
  void WaitForDeadline() {
    timer_.expires_at(deadline_);
    timer_.async_wait([self = shared_from_this()](beast::error_code) {
      if (self->state_ == State::kDone) return;
      if (Clock::now() >= self->deadline_) return self->Close();  // cancels the socket's I/O
      self->WaitForDeadline();
    });
  }

  void Read() {
    state_ = State::kReading;
    parser_.reset();
    arena_.release();  // the previous request's header fields
    parser_.emplace(std::piecewise_construct, std::make_tuple(),
                    std::make_tuple(FieldAllocator(&arena_)));
    // Not eager until the header is done: a put() then stops at the header's end, so what
    // it consumed is exactly the header's bytes (see Parse).
    parser_->eager(false);
    parser_->body_limit(worker_.server.options_.body_limit);
    header_bytes_ = 0;
    // The deadline runs through reading, handling and writing: one bound per request
    // (the store bounds its own waits far below it), so neither a slowloris nor a client
    // that stops reading its answers can pin the connection.
    SetDeadline(worker_.server.options_.request_timeout);
    if (buffer_.size() == 0) return ReadSome();
    // A pipelined request is already here. Parsed from a fresh handler, not inline, so
    // a long pipeline cannot grow the stack.
    asio::post(worker_.io.get_executor(), [self = shared_from_this()] { self->Parse(); });
  }

  void ReadSome() {
    socket_.async_read_some(buffer_.prepare(kReadSize), [self = shared_from_this()](
                                                            beast::error_code ec, std::size_t n) {
      if (self->state_ == State::kDone) return;
      self->buffer_.commit(n);
      if (ec == asio::error::eof && self->parser_->got_some()) {
        self->parser_->put_eof(ec);  // a body delimited by the end of the stream, or cut short
        if (!ec) ec = http::error::partial_message;
        return self->OnRequest(ec);
      }
      if (ec) return self->Close();  // end of stream, reset, or cancelled by the deadline
      self->Parse();
    });
  }

  // Feeds the buffered bytes to the parser: a whole request is handled, an error
  // answered, anything less waits for more bytes.
  void Parse() {
    if (state_ == State::kDone) return;  // closed (shutdown) before a posted parse ran
    const std::size_t header_limit = worker_.server.options_.header_limit;
    while (buffer_.size() > 0 && !parser_->is_done()) {
      const bool in_header = !parser_->is_header_done();
      // Beast checks its header_limit per put() and never counts down what earlier puts
      // consumed: fields arriving over several reads passed twice the limit (32,730
      // bytes). The header's bytes are counted here, the rest of the budget given to
      // each put, so the request line and fields together stay within header_limit.
      if (in_header) {
        parser_->header_limit(static_cast<std::uint32_t>(header_limit - header_bytes_));
      }
      beast::error_code ec;
      const std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (in_header) {
        header_bytes_ += used;
        if (header_bytes_ > header_limit) return OnRequest(http::error::header_limit);
        if (parser_->is_header_done()) parser_->eager(true);
        // Still no header end within the budget, and the bytes here already reach past
        // it: the header cannot end in time (Beast would only wait for more).
        if (ec == http::error::need_more && header_bytes_ + buffer_.size() >= header_limit) {
          return OnRequest(http::error::header_limit);
        }
      }
      if (ec == http::error::need_more) break;
      if (ec) return OnRequest(ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) return OnRequest({});
    // The parser's limits bound what it keeps; this bounds what it has not looked at.
    if (buffer_.size() > worker_.server.options_.header_limit + kReadSize) {
      return OnRequest(http::error::header_limit);
    }
    ReadSome();
  }

  void OnRequest(beast::error_code ec) {
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
      Response response = ErrorResponse(Reply{11, false}, status, "invalid_argument", message);
      return Write(std::move(response), /*close=*/true);
    }
    state_ = State::kHandling;
    // The service answers inline (memory://) or later from the store's thread. The
    // callback holds only `this` (no allocation for the std::function); the session is
    // kept alive by `handling_` until the answer has arrived.
    handling_ = shared_from_this();
    answering_inline_ = true;
    {
      Request request = parser_->release();  // its fields live in arena_: gone before Read()
      worker_.server.service_.Handle(request, peer_, [this](Response response) {
        // Checked in this order: only this session's thread may read the flag.
        if (worker_.io.get_executor().running_in_this_thread() && answering_inline_) {
          inline_answer_.emplace(std::move(response));
          return;
        }
        asio::post(worker_.io.get_executor(),
                   [self = std::move(handling_), response = std::move(response)]() mutable {
                     self->Write(std::move(response), false);
                   });
      });
    }
    answering_inline_ = false;
    if (inline_answer_) {
      const auto self = std::move(handling_);
      Response response = std::move(*inline_answer_);
      inline_answer_.reset();
      Write(std::move(response), false);
    }
  }

  void Write(Response response, bool close) {
    if (state_ == State::kDone) return;  // the deadline passed while the store answered
    if (response.hold.count() > 0) return Hold(std::move(response));
    state_ = State::kWriting;
    worker_.server.service_.CountResponse(response.status);
    if (close || worker_.server.stopping_) response.keep_alive = false;
    const bool keep_alive = response.keep_alive;
    response.SerializeTo(out_);
    // The socket is almost always writable: try the write now, and only wait for the
    // reactor with what did not fit.
    beast::error_code ec;
    std::size_t written = socket_.write_some(asio::buffer(out_), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      ec = {};
      written = 0;
    }
    if (ec || written == out_.size()) return AfterWrite(ec, close, keep_alive);
    asio::async_write(
        socket_, asio::buffer(out_) + written,
        [self = shared_from_this(), close, keep_alive](beast::error_code ec, std::size_t) {
          self->AfterWrite(ec, close, keep_alive);
        });
  }

  void AfterWrite(beast::error_code ec, bool close, bool keep_alive) {
    if (state_ == State::kDone) return;
    if (!ec && keep_alive) return Read();
    if (close && !ec) return Linger();
    Close();
  }

  // An answer held for its delay (/v1/authz under delay=; docs/http.md, "Waiting") on a
  // timer of its own, while the socket is watched for readability: a client that goes away
  // meanwhile closes the session, which drops the answer and so frees its place (its
  // charge stays). Bytes of a pipelined request only end the watch; they are read after.
  void Hold(Response response) {
    state_ = State::kHolding;
    const auto hold = response.hold;
    response.hold = {};
    held_.emplace(std::move(response));
    SetDeadline(hold + worker_.server.options_.request_timeout);
    if (!hold_timer_) hold_timer_.emplace(worker_.io.get_executor());
    hold_timer_->expires_after(hold);
    hold_timer_->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->state_ != State::kHolding) return;
      beast::error_code ignored;
      self->socket_.cancel(ignored);  // the watch: nothing else is pending on the socket now
      Response answer = std::move(*self->held_);
      self->held_.reset();
      self->state_ = State::kHandling;
      self->Write(std::move(answer), false);
    });
    Watch();
  }

  void Watch() {
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (ec || self->state_ != State::kHolding) return;
      char byte;
      beast::error_code peek;
      const std::size_t n =
          self->socket_.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, peek);
      if (peek == asio::error::would_block || peek == asio::error::try_again) return self->Watch();
      if (peek || n == 0) return self->Close();  // gone: the answer and its place go too
      // A pipelined request: it waits in the socket until the held answer is written.
    });
  }

  // After refusing a request whose bytes are still arriving (an oversized body, say),
  // read and drop them for a moment before closing: closing with unread input makes
  // the kernel send a reset, which can destroy the error response on its way.
  void Linger() {
    if (state_ != State::kLingering) {  // first call: half-close, 500 ms in all
      state_ = State::kLingering;
      beast::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
      SetDeadline(std::chrono::milliseconds(500));
      drain_.resize(16 * 1024);
    }
    socket_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec || self->state_ == State::kDone) return self->Close();
                              self->Linger();
                            });
  }

  void Close() {
    if (state_ == State::kDone) return;
    state_ = State::kDone;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
    timer_.cancel();
    if (hold_timer_) hold_timer_->cancel();
    held_.reset();  // a held answer's place is free again
  }

  static constexpr std::size_t kReadSize = 16 * 1024;

  Worker& worker_;
  Socket socket_;
  asio::basic_waitable_timer<Clock, asio::wait_traits<Clock>, Executor> timer_;
  Clock::time_point deadline_;
  alignas(std::max_align_t) char arena_buffer_[4096];  // most requests' fields fit here
  beast::flat_buffer buffer_;
  std::pmr::monotonic_buffer_resource arena_{arena_buffer_, sizeof arena_buffer_};
  std::optional<http::request_parser<http::string_body, FieldAllocator>> parser_;
  std::size_t header_bytes_ = 0;       // of the request being read, its header's so far
  std::shared_ptr<Session> handling_;  // the session, while the service decides
  bool answering_inline_ = false;
  std::optional<Response> inline_answer_;
  std::string out_;  // the response being written
  std::optional<Response> held_;  // an answer held for its delay (Hold)
  std::optional<asio::basic_waitable_timer<Clock, asio::wait_traits<Clock>, Executor>> hold_timer_;
  std::vector<char> drain_;
  asio::ip::address peer_;
  State state_ = State::kReading;
};

void HttpServer::Worker::Accept() {
  acceptor.async_accept(io.get_executor(), [this](beast::error_code ec, Socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    // A connection that went away before it was taken fails alone: take the next at once.
    // Any other error (EMFILE, ENFILE, ENOBUFS: out of descriptors or memory) stays until
    // something frees, and accepting again at once would spin a core on it.
    if (ec && ec != asio::error::connection_aborted && ec != asio::error::connection_reset) {
      return RetryAccept(ec);
    }
    if (!ec) {
      accept_backoff = std::chrono::milliseconds(0);
      server.AcceptSucceeded();
      if (!server.stopping_) std::make_shared<Session>(*this, std::move(socket))->Start();
    }
    Accept();
  });
}

// Counted on every attempt, logged at most every 10 s (HttpServer::AcceptFailed); the next
// attempt waits 5 ms, doubling to 250 ms: the backlog holds the waiting connections, and
// the first accept after descriptors free takes them.
void HttpServer::Worker::RetryAccept(const beast::error_code& ec) {
  server.AcceptFailed(ec);
  accept_backoff = std::clamp<std::chrono::milliseconds>(
      accept_backoff * 2, std::chrono::milliseconds(5), std::chrono::milliseconds(250));
  accept_retry.expires_after(accept_backoff);
  accept_retry.async_wait([this](beast::error_code wait_error) {
    if (wait_error || !acceptor.is_open()) return;  // shut down meanwhile
    Accept();
  });
}

void HttpServer::AcceptFailed(const beast::error_code& ec) {
  service_.CountAcceptError();
  const std::uint64_t failures = accept_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
  std::lock_guard lock(accept_log_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (last_accept_warning_ != std::chrono::steady_clock::time_point{} &&
      now - last_accept_warning_ < kAcceptLogInterval) {
    return;
  }
  last_accept_warning_ = now;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  spdlog::warn(
      "floodgate: cannot accept connections: {} ({} connections open, file descriptor limit "
      "{}, {} failed attempts so far); retrying with a backoff up to 250 ms, logged at most "
      "every {} s (floodgate_http_accept_errors_total)",
      ec.message(), sessions_.load(), limit.rlim_cur, failures, kAcceptLogInterval.count());
  // Set after the line is out, so that "again" can only follow it.
  accept_failure_logged_.store(true);
}

void HttpServer::AcceptSucceeded() {
  if (!accept_failure_logged_.load(std::memory_order_relaxed) ||
      !accept_failure_logged_.exchange(false)) {
    return;
  }
  spdlog::info("floodgate: accepting connections again ({} failed attempts so far)",
               accept_errors_.load());
}

HttpServer::HttpServer(HttpHandler& service, HttpOptions options)
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
      w->accept_retry.cancel();
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
  // The workers stay until the server is destroyed: a session still waiting on the store
  // when the grace ran out gets its answer posted to its (stopped) io_context, which must
  // exist. Close the store before destroying the server (floodgate serve does).
}

}  // namespace floodgate::server
