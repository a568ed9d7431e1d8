// One connection to a Redis server on Asio: TCP, TLS or a unix socket, pipelined, reconnecting.

#include "store/redis/connection.h"

#include <absl/status/status.h>
#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cctype>

#include "common/strings.h"

namespace floodgate::redis {

namespace {

absl::Status Unreachable(const std::string& address, const boost::system::error_code& ec) {
  std::string why = ec.message();  // "Connection refused": lower-cased to read as a clause
  if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  return absl::UnavailableError(fmt::format("redis unreachable at {}: {}", address, why));
}

}  // namespace

Connection::Connection(asio::io_context& io, ConnectionOptions options, Hooks hooks)
    : io_(io),
      options_(std::move(options)),
      hooks_(std::move(hooks)),
      resolver_(io),
      socket_(io),
      over_unix_(!options_.unix_socket.empty()),
      unix_socket_(io),
      timer_(io),
      backoff_(options_.reconnect_min),
      read_buffer_(64 * 1024) {}

std::string Connection::address() const {
  return over_unix_ ? options_.unix_socket : HostPort(options_.host, options_.port);
}

void Connection::CloseSocket() {
  boost::system::error_code ignored;
  if (over_unix_) {
    unix_socket_.close(ignored);
  } else {
    tcp().close(ignored);
  }
}

void Connection::Start() {
  if (state_ == State::kIdle) Connect();
}

void Connection::Stop() {
  state_ = State::kStopped;
  ++generation_;
  timer_.cancel();
  resolver_.cancel();
  CloseSocket();
  auto handlers = std::move(handlers_);
  handlers_.clear();
  sent_at_.clear();
  pending_commands_ = writing_commands_ = 0;
  for (auto& handler : handlers) handler(absl::CancelledError("redis store shut down"));
}

void Connection::Connect() {
  state_ = State::kConnecting;
  const std::uint64_t generation = ++generation_;
  // A TLS stream cannot be reused once it has failed: each attempt gets a new one.
  if (options_.tls != nullptr) {
    tls_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket>>(io_, *options_.tls);
  }
  timer_.expires_after(options_.connect_timeout);
  timer_.async_wait([this, generation](const boost::system::error_code& ec) {
    if (ec || generation != generation_) return;
    Fail(absl::DeadlineExceededError(fmt::format(
        "redis unreachable at {}: no connection within {} ms", address(),
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.connect_timeout).count())));
  });
  if (over_unix_) return ConnectUnix(generation);
  resolver_.async_resolve(options_.host, std::to_string(options_.port),
                          [this, generation](const boost::system::error_code& ec,
                                             asio::ip::tcp::resolver::results_type results) {
                            if (generation != generation_) return;
                            if (ec) return Fail(Unreachable(address(), ec));
                            asio::async_connect(
                                tcp(), results,
                                [this, generation](const boost::system::error_code& ec,
                                                   const asio::ip::tcp::endpoint&) {
                                  if (generation != generation_) return;
                                  if (ec) return Fail(Unreachable(address(), ec));
                                  if (tls_) return Handshake();
                                  OnConnected();
                                });
                          });
}

// No name to resolve and no TLS: the socket file answers at once, or the attempt fails
// (no such file, or nobody listening) well within the connect timeout.
void Connection::ConnectUnix(std::uint64_t generation) {
  unix_socket_.async_connect(asio::local::stream_protocol::endpoint(options_.unix_socket),
                             [this, generation](const boost::system::error_code& ec) {
                               if (generation != generation_) return;
                               if (ec) return Fail(Unreachable(address(), ec));
                               OnConnected();
                             });
}

void Connection::Handshake() {
  // The certificate must chain to the trusted CAs (verify_peer, set on the context) and
  // name the host we dialled, or the configured server name (a DNS name or an IP
  // address in its subjectAltName).
  const std::string& name =
      options_.tls_server_name.empty() ? options_.host : options_.tls_server_name;
  boost::system::error_code ignored;
  asio::ip::make_address(name, ignored);
  if (ignored) SSL_set_tlsext_host_name(tls_->native_handle(), name.c_str());  // SNI
  tls_->set_verify_callback(asio::ssl::host_name_verification(name));
  tls_->async_handshake(asio::ssl::stream_base::client, [this, generation = generation_](
                                                            const boost::system::error_code& ec) {
    if (generation != generation_) return;
    if (ec) {
      return Fail(absl::UnavailableError(
          fmt::format("redis TLS handshake with {} failed: {}", address(), ec.message())));
    }
    OnConnected();
  });
}

void Connection::OnConnected() {
  if (!over_unix_) {  // a unix socket has no Nagle to turn off
    boost::system::error_code ignored;
    tcp().set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  state_ = State::kHandshake;
  reader_.Reset();
  StartRead();
  auto steps = std::make_shared<std::vector<HandshakeStep>>(hooks_.handshake());
  handshake_left_ = steps->size();
  const std::size_t first = std::min<std::size_t>(1, steps->size());
  SendHandshake(std::move(steps), 0, first);
}

// Sends handshake steps [from, to); once step 0 has answered, the rest follow.
void Connection::SendHandshake(std::shared_ptr<std::vector<HandshakeStep>> steps, std::size_t from,
                               std::size_t to) {
  for (std::size_t i = from; i < to; ++i) {
    pending_writes_ += (*steps)[i].command;
    sent_at_.push_back(std::chrono::steady_clock::now());
    ++pending_commands_;
    handlers_.push_back([this, i, steps, generation = generation_](absl::StatusOr<Reply> reply) {
      if (generation != generation_ || !reply.ok()) return;  // Fail() reported it already
      if (absl::Status status = (*steps)[i].check(**reply); !status.ok()) {
        return Fail(std::move(status));
      }
      if (const std::size_t n = steps->size(); i == 0 && n > 1) SendHandshake(steps, 1, n);
      if (--handshake_left_ == 0) {
        timer_.cancel();
        state_ = State::kReady;
        backoff_ = options_.reconnect_min;
        hooks_.on_ready();
      }
    });
  }
  StartWrite();
}

void Connection::Send(std::string_view command, ReplyHandler handler) {
  if (state_ != State::kReady) {
    handler(absl::UnavailableError(fmt::format("redis at {} is not connected", address())));
    return;
  }
  pending_writes_.append(command);
  handlers_.push_back(std::move(handler));
  sent_at_.push_back(std::chrono::steady_clock::now());
  ++pending_commands_;
  if (!write_in_flight_) StartWrite();
}

void Connection::StartWrite() {
  if (pending_writes_.empty()) return;
  writing_.swap(pending_writes_);
  pending_writes_.clear();
  writing_commands_ = pending_commands_;
  pending_commands_ = 0;
  write_in_flight_ = true;
  WithStream([this](auto& stream) {
    asio::async_write(
        stream, asio::buffer(writing_),
        [this, generation = generation_](const boost::system::error_code& ec, std::size_t) {
          if (generation != generation_) return;
          write_in_flight_ = false;
          writing_.clear();
          if (ec) return Fail(Unreachable(address(), ec));
          MarkWritten();
          StartWrite();  // whatever queued up meanwhile, in one write
        });
  });
}

void Connection::StartRead() {
  WithStream([this](auto& stream) {
    stream.async_read_some(
        asio::buffer(read_buffer_),
        [this, generation = generation_](const boost::system::error_code& ec, std::size_t n) {
          if (generation != generation_) return;
          if (ec) return Fail(Unreachable(address(), ec));
          OnBytes(n);
        });
  });
}

void Connection::OnBytes(std::size_t n) {
  last_bytes_ = std::chrono::steady_clock::now();
  if (absl::Status status = reader_.Feed(read_buffer_.data(), n); !status.ok()) {
    return Fail(std::move(status));
  }
  while (true) {
    absl::StatusOr<Reply> reply = reader_.Next();
    if (!reply.ok()) return Fail(reply.status());
    if (*reply == nullptr) break;
    if (handlers_.empty() && state_ == State::kReady && hooks_.on_push) {
      hooks_.on_push(**reply);
      continue;
    }
    if (handlers_.empty()) {
      return Fail(
          absl::InternalError(fmt::format("redis at {} sent a reply nobody asked for", address())));
    }
    ReplyHandler handler = std::move(handlers_.front());
    handlers_.pop_front();
    sent_at_.pop_front();
    const std::uint64_t before = generation_;
    handler(std::move(reply));
    if (generation_ != before) return;  // the handler failed this connection
  }
  StartRead();
}

// The commands of the write that completed now count from now: the server could not
// answer them before it had them. (Replies to its first commands may have come already.)
void Connection::MarkWritten() {
  const std::size_t unwritten = pending_commands_ + writing_commands_;
  const std::size_t end = sent_at_.size() - std::min(sent_at_.size(), pending_commands_);
  const std::size_t begin = sent_at_.size() - std::min(sent_at_.size(), unwritten);
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = begin; i < end; ++i) sent_at_[i] = now;
  writing_commands_ = 0;
}

std::chrono::steady_clock::duration Connection::SilentFor(
    std::chrono::steady_clock::time_point now) const {
  // Nothing out, or the oldest command not yet written.
  if (sent_at_.size() <= pending_commands_ + writing_commands_) return {};
  boost::system::error_code ec;
  const std::size_t waiting = tls_         ? tls_->next_layer().available(ec)
                              : over_unix_ ? unix_socket_.available(ec)
                                           : socket_.available(ec);
  if (!ec && waiting > 0) return {};
  return now - std::max(sent_at_.front(), last_bytes_);
}

void Connection::Fail(absl::Status status) {
  if (state_ == State::kStopped || state_ == State::kBackoff) return;
  ++generation_;
  timer_.cancel();
  CloseSocket();
  pending_writes_.clear();
  writing_.clear();
  write_in_flight_ = false;
  auto handlers = std::move(handlers_);
  handlers_.clear();
  sent_at_.clear();
  pending_commands_ = writing_commands_ = 0;
  state_ = State::kBackoff;
  for (auto& handler : handlers) handler(status);
  hooks_.on_down(status);
  ScheduleReconnect();
}

void Connection::ScheduleReconnect() {
  if (state_ == State::kStopped) return;
  timer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
  timer_.async_wait([this, generation = generation_](const boost::system::error_code& ec) {
    if (ec || generation != generation_ || state_ != State::kBackoff) return;
    Connect();
  });
}

}  // namespace floodgate::redis
