#pragma once

// One connection to a Redis server on Asio: TCP, TLS or a unix socket, pipelined, reconnecting.

#include <absl/functional/any_invocable.h>
#include <absl/status/statusor.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/redis/resp.h"

namespace floodgate::redis {

namespace asio = boost::asio;

using ReplyHandler = absl::AnyInvocable<void(absl::StatusOr<Reply>)>;

struct ConnectionOptions {
  std::string host;
  std::uint16_t port = 6379;
  std::chrono::microseconds connect_timeout{1'000'000};
  std::chrono::microseconds reconnect_min{10'000};
  std::chrono::microseconds reconnect_max{500'000};
  // TLS (rediss://) when set: certificates checked against the context's trust, and the
  // server's certificate against `host`. Owned by the store; outlives the connection.
  asio::ssl::context* tls = nullptr;
  std::string tls_server_name;  // checked (and sent as SNI) instead of `host` when set
  // A unix-domain socket's path instead of host and port (never with TLS) when set.
  std::string unix_socket;
};

// One command of a connection's handshake, with the check of its answer: an error closes
// the connection (which retries after a backoff).
struct HandshakeStep {
  std::string command;  // RESP
  std::function<absl::Status(const redisReply& reply)> check;
};

// One connection to Redis, automatically pipelined: commands sent while a write is
// in flight go out together in the next write, and replies are matched to handlers in
// order. It reconnects by itself with capped exponential backoff. Not thread-safe: every
// method runs on the io_context's thread (owners post to it).
class Connection {
 public:
  struct Hooks {
    // What every new connection sends first (AUTH, SELECT, SCRIPT LOAD), each command
    // with its check. The first is sent alone and the rest once it has answered: a server
    // that wants a password closes the connection on an unauthenticated client's large
    // request (a script body), and the reset can swallow the error it wrote; the first
    // command's answer (AUTH's, or a PING's NOAUTH) says what is wrong before anything
    // large goes.
    std::function<std::vector<HandshakeStep>()> handshake;
    std::function<void()> on_ready;
    // The connection failed (or a handshake was refused); it retries after a backoff.
    std::function<void(const absl::Status&)> on_down;
    // A reply nobody asked for on a ready connection: a message of a channel it
    // subscribed to (a sentinel's +switch-master). Unset, such a reply fails the connection.
    std::function<void(const redisReply&)> on_push;
  };

  Connection(asio::io_context& io, ConnectionOptions options, Hooks hooks);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Start();
  // Closes the socket and fails every pending handler; no reconnect afterwards.
  void Stop();
  bool ready() const { return state_ == State::kReady; }
  std::size_t in_flight() const { return handlers_.size(); }
  std::string address() const;

  // Queues one RESP command; when not ready the handler fails at once (Unavailable).
  void Send(std::string_view command, ReplyHandler handler);

  // How long the oldest unanswered command has waited since it was written (since it was
  // queued, while it is not yet): zero when none is out.
  std::chrono::steady_clock::duration OldestWait(std::chrono::steady_clock::time_point now) const {
    return sent_at_.empty() ? std::chrono::steady_clock::duration::zero() : now - sent_at_.front();
  }
  // How long the server has sat on its oldest unanswered command without sending a byte:
  // since that command was written, or since bytes last arrived if later. Zero when
  // nothing is outstanding, when the oldest command is still being written (a server
  // that reads nothing is the stall OldestWait finds), or when bytes wait unread in the
  // socket (a thread kept from reading them is this process's delay, not the server's).
  // Replies come in order, so a server that keeps answering is never silent for long,
  // however many commands wait behind.
  std::chrono::steady_clock::duration SilentFor(std::chrono::steady_clock::time_point now) const;
  // Drops the connection as if it had failed (a peer that stopped answering: a
  // half-open TCP connection gives no error for hours), and reconnects.
  void Abort(absl::Status status) { Fail(std::move(status)); }

 private:
  enum class State { kIdle, kConnecting, kHandshake, kReady, kBackoff, kStopped };

  void Connect();
  void Handshake();
  void OnConnected();
  void ConnectUnix(std::uint64_t generation);
  asio::ip::tcp::socket& tcp() { return tls_ ? tls_->next_layer() : socket_; }
  void CloseSocket();
  // Calls f with the byte stream: the TLS stream over the socket, the unix socket, or the
  // TCP socket. Two predictable branches, no virtual call: every read and write passes here.
  template <class F>
  void WithStream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else if (over_unix_) {
      f(unix_socket_);
    } else {
      f(socket_);
    }
  }
  void StartWrite();
  void MarkWritten();
  void StartRead();
  void OnBytes(std::size_t n);
  void Fail(absl::Status status);
  void ScheduleReconnect();

  asio::io_context& io_;
  ConnectionOptions options_;
  Hooks hooks_;
  asio::ip::tcp::resolver resolver_;
  asio::ip::tcp::socket socket_;  // plain TCP; with TLS the socket lives inside tls_
  const bool over_unix_;
  asio::local::stream_protocol::socket unix_socket_;
  std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket>> tls_;  // new per connection
  asio::steady_timer timer_;  // connect timeout, then reconnect backoff
  State state_ = State::kIdle;
  std::uint64_t generation_ = 0;  // bumps per socket; stale completions are ignored
  std::chrono::microseconds backoff_;
  std::string pending_writes_;
  std::string writing_;
  bool write_in_flight_ = false;
  std::deque<ReplyHandler> handlers_;
  // One per handler: when its command was queued, then when its write completed.
  std::deque<std::chrono::steady_clock::time_point> sent_at_;
  // Commands at the back of handlers_ not yet written: in pending_writes_, in writing_.
  std::size_t pending_commands_ = 0;
  std::size_t writing_commands_ = 0;
  std::chrono::steady_clock::time_point last_bytes_{};  // when bytes last arrived
  std::size_t handshake_left_ = 0;
  void SendHandshake(std::shared_ptr<std::vector<HandshakeStep>> steps, std::size_t from,
                     std::size_t to);
  ReplyReader reader_;
  std::vector<char> read_buffer_;
};

}  // namespace floodgate::redis
