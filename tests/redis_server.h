#pragma once

// A real redis-server (Debian's package) for tests: started on a free loopback port in
// its own temp dir, stopped by its PID. No mocks stand in for Redis.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace floodgate::testing {

class RedisServer {
 public:
  // Starts a server with `extra_args` (e.g. {"--requirepass", "secret"}); fails the
  // calling test (and returns nullptr) when it cannot.
  static std::unique_ptr<RedisServer> Start(std::vector<std::string> extra_args = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& options = "") const;

  // SIGKILL, like a crash; Restart() brings it back on the same port.
  void Kill();
  bool Restart();
  bool running() const { return pid_ > 0; }

  // redis-cli against this server; returns its stdout.
  std::string Cli(const std::vector<std::string>& args) const;

 private:
  RedisServer() = default;
  bool Launch();
  bool WaitReady(std::chrono::milliseconds limit) const;

  std::vector<std::string> extra_args_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A free TCP port on 127.0.0.1 (bound and released; the caller binds it next).
int FreeLoopbackPort();

}  // namespace floodgate::testing
