#pragma once

// The HTTP/1.1 server on Beast: its options, its threads on one port, and a graceful shutdown.

#include <absl/status/status.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http_message.h"

namespace floodgate::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;  // 0: any free port (see HttpServer::port())
  int threads = 0;            // 0: one per core
  // A connection must deliver each request whole within this (a slowloris cannot pin a
  // connection), and may sit idle between requests this long.
  std::chrono::milliseconds request_timeout{10'000};
  // The release hook's X-RateLimit-Lease may list 16 Redis lease ids, each up to 736
  // bytes (docs/leases.md): 11.8 KiB.
  std::size_t header_limit = 16 * 1024;
  std::size_t body_limit = 64 * 1024;
};

// HTTP/1.1 on Boost.Beast: one io_context per thread, each with its own acceptor on the
// same port (SO_REUSEPORT), so connections spread over threads without a hand-off.
class HttpServer {
 public:
  // `handler` must outlive the server.
  HttpServer(HttpHandler& handler, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving; an address in use or not local is an error.
  absl::Status Start();
  // Stops accepting, lets requests in flight finish (closing their connections), and
  // returns once every connection is done or `grace` has passed.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(10));
  std::uint16_t port() const { return port_; }
  std::size_t connections() const { return sessions_.load(); }

 private:
  class Worker;
  class Session;
  friend class Session;

  // A failed accept: counted every time, logged at most once per kAcceptLogInterval (at the
  // descriptor limit, accepts fail and succeed by turns: an episode per success flapped the
  // log). A success after a logged failure says so once. Any thread.
  void AcceptFailed(const boost::system::error_code& ec);
  void AcceptSucceeded();
  static constexpr std::chrono::seconds kAcceptLogInterval{10};

  HttpHandler& service_;
  HttpOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> sessions_{0};
  std::atomic<std::uint64_t> accept_errors_{0};
  std::atomic<bool> accept_failure_logged_{false};  // and no success logged since
  std::mutex accept_log_mu_;
  std::chrono::steady_clock::time_point last_accept_warning_;  // guarded by accept_log_mu_
  std::uint16_t port_ = 0;
};

}  // namespace floodgate::server
